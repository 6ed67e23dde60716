package amqp

import (
	"encoding/binary"
	"fmt"
	"math"
	"time"
)

// Type constructors of the AMQP 1.0 type system (part 1.6).
const (
	tcDescribed  = 0x00
	tcNull       = 0x40
	tcTrue       = 0x41
	tcFalse      = 0x42
	tcUint0      = 0x43
	tcUlong0     = 0x44
	tcList0      = 0x45
	tcUbyte      = 0x50
	tcByte       = 0x51
	tcSmallUint  = 0x52
	tcSmallUlong = 0x53
	tcSmallInt   = 0x54
	tcSmallLong  = 0x55
	tcBool       = 0x56
	tcUshort     = 0x60
	tcShort      = 0x61
	tcUint       = 0x70
	tcInt        = 0x71
	tcFloat      = 0x72
	tcChar       = 0x73
	tcDecimal32  = 0x74
	tcUlong      = 0x80
	tcLong       = 0x81
	tcDouble     = 0x82
	tcTimestamp  = 0x83
	tcDecimal64  = 0x84
	tcDecimal128 = 0x94
	tcUUID       = 0x98
	tcVbin8      = 0xa0
	tcStr8       = 0xa1
	tcSym8       = 0xa3
	tcVbin32     = 0xb0
	tcStr32      = 0xb1
	tcSym32      = 0xb3
	tcList8      = 0xc0
	tcMap8       = 0xc1
	tcList32     = 0xd0
	tcMap32      = 0xd1
	tcArray8     = 0xe0
	tcArray32    = 0xf0
)

// Marshal returns the AMQP encoding of v (see the package documentation for the mapping).
// It returns an error wrapping ErrUnsupportedType for a Go value without an AMQP type.
func Marshal(v any) ([]byte, error) {
	return AppendValue(nil, v)
}

// AppendValue appends the AMQP encoding of v to dst and returns the extended slice, using
// the smallest constructor for v. Besides the types of the package mapping it accepts
// []Symbol (as an array of symbols), the performatives, delivery states, Source, Target
// and *Error (as described lists). On error the returned slice is dst unchanged in length.
func AppendValue(dst []byte, v any) ([]byte, error) {
	out, err := appendValue(dst, v, 0)
	if err != nil {
		return dst, err
	}
	return out, nil
}

func appendValue(dst []byte, v any, depth int) ([]byte, error) {
	if depth > MaxDepth {
		return dst, fmt.Errorf("%w: nesting deeper than %d", ErrUnsupportedType, MaxDepth)
	}
	switch v := v.(type) {
	case nil:
		return append(dst, tcNull), nil
	case bool:
		return appendBool(dst, v), nil
	case uint8:
		return append(dst, tcUbyte, v), nil
	case uint16:
		return binary.BigEndian.AppendUint16(append(dst, tcUshort), v), nil
	case uint32:
		return appendUint(dst, v), nil
	case uint64:
		return appendUlong(dst, v), nil
	case int8:
		return append(dst, tcByte, byte(v)), nil
	case int16:
		return binary.BigEndian.AppendUint16(append(dst, tcShort), uint16(v)), nil
	case int32:
		return appendInt(dst, v), nil
	case int64:
		return appendLong(dst, v), nil
	case float32:
		return binary.BigEndian.AppendUint32(append(dst, tcFloat), math.Float32bits(v)), nil
	case float64:
		return binary.BigEndian.AppendUint64(append(dst, tcDouble), math.Float64bits(v)), nil
	case Decimal32:
		return append(append(dst, tcDecimal32), v[:]...), nil
	case Decimal64:
		return append(append(dst, tcDecimal64), v[:]...), nil
	case Decimal128:
		return append(append(dst, tcDecimal128), v[:]...), nil
	case Char:
		return binary.BigEndian.AppendUint32(append(dst, tcChar), uint32(v)), nil
	case time.Time:
		return appendTimestamp(dst, v), nil
	case UUID:
		return append(append(dst, tcUUID), v[:]...), nil
	case []byte:
		return appendBinary(dst, v), nil
	case string:
		return appendString(dst, v), nil
	case Symbol:
		return appendSymbol(dst, v), nil
	case []Symbol:
		return appendSymbolArray(dst, v), nil
	case []any:
		return appendList(dst, v, depth)
	case Map:
		return appendMap(dst, v, depth)
	case Array:
		return appendArray(dst, v, depth)
	case *Described:
		if v == nil {
			return append(dst, tcNull), nil
		}
		return appendDescribed(dst, v, depth)
	case Described:
		return appendDescribed(dst, &v, depth)
	case composite:
		return appendComposite(dst, v)
	}
	return dst, fmt.Errorf("%w: %T", ErrUnsupportedType, v)
}

func appendBool(dst []byte, v bool) []byte {
	if v {
		return append(dst, tcTrue)
	}
	return append(dst, tcFalse)
}

func appendUint(dst []byte, v uint32) []byte {
	switch {
	case v == 0:
		return append(dst, tcUint0)
	case v < 256:
		return append(dst, tcSmallUint, byte(v))
	}
	return binary.BigEndian.AppendUint32(append(dst, tcUint), v)
}

func appendUlong(dst []byte, v uint64) []byte {
	switch {
	case v == 0:
		return append(dst, tcUlong0)
	case v < 256:
		return append(dst, tcSmallUlong, byte(v))
	}
	return binary.BigEndian.AppendUint64(append(dst, tcUlong), v)
}

func appendInt(dst []byte, v int32) []byte {
	if v >= math.MinInt8 && v <= math.MaxInt8 {
		return append(dst, tcSmallInt, byte(v))
	}
	return binary.BigEndian.AppendUint32(append(dst, tcInt), uint32(v))
}

func appendLong(dst []byte, v int64) []byte {
	if v >= math.MinInt8 && v <= math.MaxInt8 {
		return append(dst, tcSmallLong, byte(v))
	}
	return binary.BigEndian.AppendUint64(append(dst, tcLong), uint64(v))
}

func appendTimestamp(dst []byte, t time.Time) []byte {
	return binary.BigEndian.AppendUint64(append(dst, tcTimestamp), uint64(t.UnixMilli()))
}

// appendVariable appends a variable-width value with the one-byte-size constructor c8 or
// the four-byte-size constructor c32. Values longer than 4 GiB cannot be framed anyway;
// they are truncated to keep the encoding self-consistent (no caller produces them).
func appendVariable(dst []byte, c8, c32 byte, b string) []byte {
	if len(b) < 256 {
		dst = append(dst, c8, byte(len(b)))
	} else {
		if uint64(len(b)) > math.MaxUint32 {
			b = b[:math.MaxUint32]
		}
		dst = binary.BigEndian.AppendUint32(append(dst, c32), uint32(len(b)))
	}
	return append(dst, b...)
}

func appendBinary(dst, b []byte) []byte {
	if len(b) < 256 {
		dst = append(dst, tcVbin8, byte(len(b)))
	} else {
		if uint64(len(b)) > math.MaxUint32 {
			b = b[:math.MaxUint32]
		}
		dst = binary.BigEndian.AppendUint32(append(dst, tcVbin32), uint32(len(b)))
	}
	return append(dst, b...)
}

func appendString(dst []byte, s string) []byte { return appendVariable(dst, tcStr8, tcStr32, s) }

func appendSymbol(dst []byte, s Symbol) []byte {
	return appendVariable(dst, tcSym8, tcSym32, string(s))
}

// compound tracks a list, map or array being appended: it reserves the four-byte size and
// count of the 32-bit constructor and shrinks to the 8-bit one in finish when it fits.
type compound struct {
	start int // index of the constructor byte
}

// beginCompound reserves constructor, size and count (9 bytes) and returns the tracker.
func beginCompound(dst []byte) ([]byte, compound) {
	c := compound{start: len(dst)}
	return append(dst, 0, 0, 0, 0, 0, 0, 0, 0, 0), c
}

// finish writes the header for count elements. c8 and c32 are the constructors. The body
// after the reserved header is left in place for the 32-bit form, moved down by 6 bytes
// for the 8-bit form.
func (c compound) finish(dst []byte, c8, c32 byte, count int) ([]byte, error) {
	bodyStart := c.start + 9
	body := len(dst) - bodyStart
	if body+1 < 256 && count < 256 {
		dst[c.start] = c8
		dst[c.start+1] = byte(body + 1)
		dst[c.start+2] = byte(count)
		n := copy(dst[c.start+3:], dst[bodyStart:])
		return dst[:c.start+3+n], nil
	}
	if uint64(body)+4 > math.MaxUint32 || uint64(count) > math.MaxUint32 {
		return dst[:c.start], fmt.Errorf("%w: compound value larger than 4 GiB", ErrUnsupportedType)
	}
	dst[c.start] = c32
	binary.BigEndian.PutUint32(dst[c.start+1:], uint32(body+4))
	binary.BigEndian.PutUint32(dst[c.start+5:], uint32(count))
	return dst, nil
}

func appendList(dst []byte, l []any, depth int) ([]byte, error) {
	if len(l) == 0 {
		return append(dst, tcList0), nil
	}
	dst, c := beginCompound(dst)
	var err error
	for _, e := range l {
		if dst, err = appendValue(dst, e, depth+1); err != nil {
			return dst[:c.start], err
		}
	}
	return c.finish(dst, tcList8, tcList32, len(l))
}

func appendMap(dst []byte, m Map, depth int) ([]byte, error) {
	dst, c := beginCompound(dst)
	var err error
	for _, e := range m {
		if dst, err = appendValue(dst, e.Key, depth+1); err != nil {
			return dst[:c.start], err
		}
		if dst, err = appendValue(dst, e.Value, depth+1); err != nil {
			return dst[:c.start], err
		}
	}
	return c.finish(dst, tcMap8, tcMap32, 2*len(m))
}

func appendDescribed(dst []byte, d *Described, depth int) ([]byte, error) {
	start := len(dst)
	switch d.Descriptor.(type) {
	case uint64, Symbol:
	default:
		return dst, fmt.Errorf("%w: descriptor of type %T (want uint64 or Symbol)", ErrUnsupportedType, d.Descriptor)
	}
	dst, err := appendValue(append(dst, tcDescribed), d.Descriptor, depth+1)
	if err != nil {
		return dst[:start], err
	}
	if dst, err = appendValue(dst, d.Value, depth+1); err != nil {
		return dst[:start], err
	}
	return dst, nil
}

func appendSymbolArray(dst []byte, syms []Symbol) []byte {
	wide := false
	for _, s := range syms {
		if len(s) > 255 {
			wide = true
		}
	}
	dst, c := beginCompound(dst)
	if wide {
		dst = append(dst, tcSym32)
		for _, s := range syms {
			dst = binary.BigEndian.AppendUint32(dst, uint32(len(s)))
			dst = append(dst, s...)
		}
	} else {
		dst = append(dst, tcSym8)
		for _, s := range syms {
			dst = append(dst, byte(len(s)))
			dst = append(dst, s...)
		}
	}
	dst, _ = c.finish(dst, tcArray8, tcArray32, len(syms))
	return dst
}
