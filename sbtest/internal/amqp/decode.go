package amqp

import (
	"encoding/binary"
	"math"
	"time"
)

// maxZeroWidthElems bounds the count of an array whose elements take no bytes (element
// constructors null, true, false, uint0, ulong0, list0): such a count is not limited by the
// input length, so it gets a small fixed limit instead (no peer sends such arrays; the
// limit keeps a crafted input from allocating far more than its own size).
const maxZeroWidthElems = 16

// Unmarshal decodes the first AMQP value of data and returns it with the bytes that follow
// it (a sub-slice of data). Described values are returned as *Described, whatever their
// descriptor. Every error wraps ErrMalformed. The returned value does not alias data
// except for []byte values (binary), which do.
func Unmarshal(data []byte) (v any, rest []byte, err error) {
	d := decoder{b: data}
	v, err = d.value(0)
	if err != nil {
		return nil, data, err
	}
	return v, d.b, nil
}

// decoder consumes an input slice from the front.
type decoder struct {
	b []byte
}

func (d *decoder) byte1() (byte, error) {
	if len(d.b) < 1 {
		return 0, malformed("truncated input")
	}
	c := d.b[0]
	d.b = d.b[1:]
	return c, nil
}

// take returns the next n bytes; n comes from untrusted input, so it is checked against
// the remaining length before anything is sliced or allocated.
func (d *decoder) take(n uint64) ([]byte, error) {
	if n > uint64(len(d.b)) {
		return nil, malformed("length %d exceeds the %d remaining bytes", n, len(d.b))
	}
	p := d.b[:n:n]
	d.b = d.b[n:]
	return p, nil
}

func (d *decoder) u8() (uint8, error) { return d.byte1() }

func (d *decoder) u16() (uint16, error) {
	p, err := d.take(2)
	if err != nil {
		return 0, err
	}
	return binary.BigEndian.Uint16(p), nil
}

func (d *decoder) u32() (uint32, error) {
	p, err := d.take(4)
	if err != nil {
		return 0, err
	}
	return binary.BigEndian.Uint32(p), nil
}

func (d *decoder) u64() (uint64, error) {
	p, err := d.take(8)
	if err != nil {
		return 0, err
	}
	return binary.BigEndian.Uint64(p), nil
}

// value decodes one value with its constructor.
func (d *decoder) value(depth int) (any, error) {
	c, err := d.byte1()
	if err != nil {
		return nil, err
	}
	if c == tcDescribed {
		return d.described(depth + 1)
	}
	return d.body(c, depth)
}

// described decodes the descriptor and value after a 0x00 constructor.
func (d *decoder) described(depth int) (*Described, error) {
	if depth > MaxDepth {
		return nil, malformed("nesting deeper than %d", MaxDepth)
	}
	desc, err := d.value(depth)
	if err != nil {
		return nil, err
	}
	switch desc.(type) {
	case uint64, Symbol:
	default:
		return nil, malformed("descriptor of type %T (want ulong or symbol)", desc)
	}
	v, err := d.value(depth)
	if err != nil {
		return nil, err
	}
	return &Described{Descriptor: desc, Value: v}, nil
}

// body decodes the value of constructor c (not 0x00).
func (d *decoder) body(c byte, depth int) (any, error) {
	switch c {
	case tcNull:
		return nil, nil
	case tcTrue:
		return true, nil
	case tcFalse:
		return false, nil
	case tcBool:
		b, err := d.byte1()
		if err != nil {
			return nil, err
		}
		switch b {
		case 0:
			return false, nil
		case 1:
			return true, nil
		}
		return nil, malformed("boolean byte 0x%02x", b)
	case tcUbyte:
		return d.u8()
	case tcByte:
		v, err := d.u8()
		return int8(v), err
	case tcUshort:
		return d.u16()
	case tcShort:
		v, err := d.u16()
		return int16(v), err
	case tcUint0:
		return uint32(0), nil
	case tcSmallUint:
		v, err := d.u8()
		return uint32(v), err
	case tcUint:
		return d.u32()
	case tcUlong0:
		return uint64(0), nil
	case tcSmallUlong:
		v, err := d.u8()
		return uint64(v), err
	case tcUlong:
		return d.u64()
	case tcSmallInt:
		v, err := d.u8()
		return int32(int8(v)), err
	case tcInt:
		v, err := d.u32()
		return int32(v), err
	case tcSmallLong:
		v, err := d.u8()
		return int64(int8(v)), err
	case tcLong:
		v, err := d.u64()
		return int64(v), err
	case tcFloat:
		v, err := d.u32()
		return math.Float32frombits(v), err
	case tcDouble:
		v, err := d.u64()
		return math.Float64frombits(v), err
	case tcDecimal32:
		var v Decimal32
		p, err := d.take(4)
		copy(v[:], p)
		return v, err
	case tcDecimal64:
		var v Decimal64
		p, err := d.take(8)
		copy(v[:], p)
		return v, err
	case tcDecimal128:
		var v Decimal128
		p, err := d.take(16)
		copy(v[:], p)
		return v, err
	case tcChar:
		v, err := d.u32()
		return Char(v), err
	case tcTimestamp:
		v, err := d.u64()
		return time.UnixMilli(int64(v)).UTC(), err
	case tcUUID:
		var v UUID
		p, err := d.take(16)
		copy(v[:], p)
		return v, err
	case tcVbin8, tcVbin32:
		return d.variable(c == tcVbin32)
	case tcStr8, tcStr32:
		p, err := d.variable(c == tcStr32)
		return string(p), err
	case tcSym8, tcSym32:
		p, err := d.variable(c == tcSym32)
		return Symbol(p), err
	case tcList0:
		return []any{}, nil
	case tcList8, tcList32:
		return d.list(c == tcList32, depth+1)
	case tcMap8, tcMap32:
		return d.mapValue(c == tcMap32, depth+1)
	case tcArray8, tcArray32:
		return d.array(c == tcArray32, depth+1)
	}
	return nil, malformed("unknown constructor 0x%02x", c)
}

// variable reads a vbin, str or sym body: a 1- or 4-byte size and that many bytes.
func (d *decoder) variable(wide bool) ([]byte, error) {
	var n uint64
	if wide {
		v, err := d.u32()
		if err != nil {
			return nil, err
		}
		n = uint64(v)
	} else {
		v, err := d.u8()
		if err != nil {
			return nil, err
		}
		n = uint64(v)
	}
	return d.take(n)
}

// compound reads the size and count of a list, map or array and returns a decoder over
// the remaining body (after the count) and the count. The body is removed from d.
func (d *decoder) compound(wide bool, depth int) (decoder, uint32, error) {
	if depth > MaxDepth {
		return decoder{}, 0, malformed("nesting deeper than %d", MaxDepth)
	}
	var size, count uint32
	var err error
	if wide {
		if size, err = d.u32(); err != nil {
			return decoder{}, 0, err
		}
		if size < 4 {
			return decoder{}, 0, malformed("compound size %d smaller than its count", size)
		}
	} else {
		var s uint8
		if s, err = d.u8(); err != nil {
			return decoder{}, 0, err
		}
		if s < 1 {
			return decoder{}, 0, malformed("compound size 0 smaller than its count")
		}
		size = uint32(s)
	}
	p, err := d.take(uint64(size))
	if err != nil {
		return decoder{}, 0, err
	}
	sub := decoder{b: p}
	if wide {
		count, _ = sub.u32()
	} else {
		c, _ := sub.u8()
		count = uint32(c)
	}
	return sub, count, nil
}

func (d *decoder) list(wide bool, depth int) ([]any, error) {
	sub, count, err := d.compound(wide, depth)
	if err != nil {
		return nil, err
	}
	// Every element takes at least one byte (its constructor).
	if uint64(count) > uint64(len(sub.b)) {
		return nil, malformed("list count %d exceeds its %d bytes", count, len(sub.b))
	}
	l := make([]any, count)
	for i := range l {
		if l[i], err = sub.value(depth); err != nil {
			return nil, err
		}
	}
	if len(sub.b) != 0 {
		return nil, malformed("%d bytes after the last list element", len(sub.b))
	}
	return l, nil
}

func (d *decoder) mapValue(wide bool, depth int) (Map, error) {
	sub, count, err := d.compound(wide, depth)
	if err != nil {
		return nil, err
	}
	if count%2 != 0 {
		return nil, malformed("map with an odd count %d", count)
	}
	if uint64(count) > uint64(len(sub.b)) {
		return nil, malformed("map count %d exceeds its %d bytes", count, len(sub.b))
	}
	m := make(Map, count/2)
	for i := range m {
		if m[i].Key, err = sub.value(depth); err != nil {
			return nil, err
		}
		if m[i].Value, err = sub.value(depth); err != nil {
			return nil, err
		}
	}
	if len(sub.b) != 0 {
		return nil, malformed("%d bytes after the last map entry", len(sub.b))
	}
	return m, nil
}

func (d *decoder) array(wide bool, depth int) (Array, error) {
	sub, count, err := d.compound(wide, depth)
	if err != nil {
		return nil, err
	}
	a, err := sub.arrayElems(count, depth)
	if err != nil {
		return nil, err
	}
	if len(sub.b) != 0 {
		return nil, malformed("%d bytes after the last array element", len(sub.b))
	}
	return a, nil
}

// arrayElems reads an element constructor (possibly described) and count element bodies.
func (d *decoder) arrayElems(count uint32, depth int) (Array, error) {
	c, err := d.byte1()
	if err != nil {
		return nil, err
	}
	if c == tcDescribed {
		if depth+1 > MaxDepth {
			return nil, malformed("nesting deeper than %d", MaxDepth)
		}
		desc, err := d.value(depth + 1)
		if err != nil {
			return nil, err
		}
		switch desc.(type) {
		case uint64, Symbol:
		default:
			return nil, malformed("descriptor of type %T (want ulong or symbol)", desc)
		}
		vals, err := d.arrayElems(count, depth+1)
		if err != nil {
			return nil, err
		}
		for i, v := range vals {
			vals[i] = &Described{Descriptor: desc, Value: v}
		}
		return vals, nil
	}
	switch c {
	case tcNull, tcTrue, tcFalse, tcUint0, tcUlong0, tcList0:
		if count > maxZeroWidthElems {
			return nil, malformed("array of %d zero-width elements", count)
		}
	default:
		if uint64(count) > uint64(len(d.b)) {
			return nil, malformed("array count %d exceeds its %d bytes", count, len(d.b))
		}
	}
	a := make(Array, count)
	for i := range a {
		if a[i], err = d.body(c, depth); err != nil {
			return nil, err
		}
	}
	return a, nil
}
