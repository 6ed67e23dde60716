package amqp

import (
	"encoding/binary"
	"fmt"
	"math"
	"time"
)

// appendArray appends a as an array8 or array32.
func appendArray(dst []byte, a Array, depth int) ([]byte, error) {
	dst, c := beginCompound(dst)
	dst, err := appendArrayBody(dst, a, depth+1)
	if err != nil {
		return dst[:c.start], err
	}
	return c.finish(dst, tcArray8, tcArray32, len(a))
}

// appendArrayBody appends the shared element constructor of elems, then every element
// without its constructor. All elements must have the Go type of the first; an empty
// array gets the sym8 constructor (what most peers expect of an empty capability list).
func appendArrayBody(dst []byte, elems []any, depth int) ([]byte, error) {
	if depth > MaxDepth {
		return dst, fmt.Errorf("%w: nesting deeper than %d", ErrUnsupportedType, MaxDepth)
	}
	if len(elems) == 0 {
		return append(dst, tcSym8), nil
	}
	mixed := func(i int) error {
		return fmt.Errorf("%w: array element %d is %T, element 0 is %T", ErrUnsupportedType, i, elems[i], elems[0])
	}
	var err error
	switch first := elems[0].(type) {
	case nil:
		if len(elems) > maxZeroWidthElems {
			return dst, fmt.Errorf("%w: array of %d nulls (at most %d)", ErrUnsupportedType, len(elems), maxZeroWidthElems)
		}
		for i, e := range elems {
			if e != nil {
				return dst, mixed(i)
			}
		}
		return append(dst, tcNull), nil
	case bool:
		return appendFixed(dst, tcBool, elems, func(dst []byte, v bool) []byte {
			if v {
				return append(dst, 1)
			}
			return append(dst, 0)
		})
	case uint8:
		return appendFixed(dst, tcUbyte, elems, func(dst []byte, v uint8) []byte { return append(dst, v) })
	case uint16:
		return appendFixed(dst, tcUshort, elems, binary.BigEndian.AppendUint16)
	case uint32:
		return appendFixed(dst, tcUint, elems, binary.BigEndian.AppendUint32)
	case uint64:
		return appendFixed(dst, tcUlong, elems, binary.BigEndian.AppendUint64)
	case int8:
		return appendFixed(dst, tcByte, elems, func(dst []byte, v int8) []byte { return append(dst, byte(v)) })
	case int16:
		return appendFixed(dst, tcShort, elems, func(dst []byte, v int16) []byte {
			return binary.BigEndian.AppendUint16(dst, uint16(v))
		})
	case int32:
		return appendFixed(dst, tcInt, elems, func(dst []byte, v int32) []byte {
			return binary.BigEndian.AppendUint32(dst, uint32(v))
		})
	case int64:
		return appendFixed(dst, tcLong, elems, func(dst []byte, v int64) []byte {
			return binary.BigEndian.AppendUint64(dst, uint64(v))
		})
	case float32:
		return appendFixed(dst, tcFloat, elems, func(dst []byte, v float32) []byte {
			return binary.BigEndian.AppendUint32(dst, math.Float32bits(v))
		})
	case float64:
		return appendFixed(dst, tcDouble, elems, func(dst []byte, v float64) []byte {
			return binary.BigEndian.AppendUint64(dst, math.Float64bits(v))
		})
	case Decimal32:
		return appendFixed(dst, tcDecimal32, elems, func(dst []byte, v Decimal32) []byte { return append(dst, v[:]...) })
	case Decimal64:
		return appendFixed(dst, tcDecimal64, elems, func(dst []byte, v Decimal64) []byte { return append(dst, v[:]...) })
	case Decimal128:
		return appendFixed(dst, tcDecimal128, elems, func(dst []byte, v Decimal128) []byte { return append(dst, v[:]...) })
	case Char:
		return appendFixed(dst, tcChar, elems, func(dst []byte, v Char) []byte {
			return binary.BigEndian.AppendUint32(dst, uint32(v))
		})
	case time.Time:
		return appendFixed(dst, tcTimestamp, elems, func(dst []byte, v time.Time) []byte {
			return binary.BigEndian.AppendUint64(dst, uint64(v.UnixMilli()))
		})
	case UUID:
		return appendFixed(dst, tcUUID, elems, func(dst []byte, v UUID) []byte { return append(dst, v[:]...) })
	case []byte:
		return appendVariableElems(dst, tcVbin8, tcVbin32, elems, func(v []byte) string { return string(v) })
	case string:
		return appendVariableElems(dst, tcStr8, tcStr32, elems, func(v string) string { return v })
	case Symbol:
		return appendVariableElems(dst, tcSym8, tcSym32, elems, func(v Symbol) string { return string(v) })
	case []any:
		dst = append(dst, tcList32)
		for i, e := range elems {
			l, ok := e.([]any)
			if !ok {
				return dst, mixed(i)
			}
			start := len(dst)
			dst = append(dst, 0, 0, 0, 0, 0, 0, 0, 0)
			for _, v := range l {
				if dst, err = appendValue(dst, v, depth+1); err != nil {
					return dst, err
				}
			}
			putSizeCount(dst, start, len(l))
		}
		return dst, nil
	case Map:
		dst = append(dst, tcMap32)
		for i, e := range elems {
			m, ok := e.(Map)
			if !ok {
				return dst, mixed(i)
			}
			start := len(dst)
			dst = append(dst, 0, 0, 0, 0, 0, 0, 0, 0)
			for _, kv := range m {
				if dst, err = appendValue(dst, kv.Key, depth+1); err != nil {
					return dst, err
				}
				if dst, err = appendValue(dst, kv.Value, depth+1); err != nil {
					return dst, err
				}
			}
			putSizeCount(dst, start, 2*len(m))
		}
		return dst, nil
	case Array:
		dst = append(dst, tcArray32)
		for i, e := range elems {
			a, ok := e.(Array)
			if !ok {
				return dst, mixed(i)
			}
			start := len(dst)
			dst = append(dst, 0, 0, 0, 0, 0, 0, 0, 0)
			if dst, err = appendArrayBody(dst, a, depth+1); err != nil {
				return dst, err
			}
			putSizeCount(dst, start, len(a))
		}
		return dst, nil
	case *Described:
		if first == nil {
			return dst, fmt.Errorf("%w: nil *Described in array", ErrUnsupportedType)
		}
		values := make([]any, len(elems))
		for i, e := range elems {
			d, ok := e.(*Described)
			if !ok || d == nil || !keyEqual(d.Descriptor, first.Descriptor) {
				return dst, fmt.Errorf("%w: array element %d is not a *Described with descriptor %v", ErrUnsupportedType, i, first.Descriptor)
			}
			values[i] = d.Value
		}
		switch first.Descriptor.(type) {
		case uint64, Symbol:
		default:
			return dst, fmt.Errorf("%w: descriptor of type %T (want uint64 or Symbol)", ErrUnsupportedType, first.Descriptor)
		}
		if dst, err = appendValue(append(dst, tcDescribed), first.Descriptor, depth+1); err != nil {
			return dst, err
		}
		return appendArrayBody(dst, values, depth+1)
	}
	return dst, fmt.Errorf("%w: array of %T", ErrUnsupportedType, elems[0])
}

// putSizeCount fills the four-byte size and count reserved at dst[start:start+8] for a
// 32-bit compound element whose body follows them.
func putSizeCount(dst []byte, start, count int) {
	binary.BigEndian.PutUint32(dst[start:], uint32(len(dst)-start-4))
	binary.BigEndian.PutUint32(dst[start+4:], uint32(count))
}

// appendFixed appends constructor c and each element (all of type T) through put.
func appendFixed[T any](dst []byte, c byte, elems []any, put func([]byte, T) []byte) ([]byte, error) {
	dst = append(dst, c)
	for i, e := range elems {
		v, ok := e.(T)
		if !ok {
			return dst, fmt.Errorf("%w: array element %d is %T, element 0 is %T", ErrUnsupportedType, i, e, elems[0])
		}
		dst = put(dst, v)
	}
	return dst, nil
}

// appendVariableElems appends binary, string or symbol elements with the 8-bit size
// constructor when every element fits, else the 32-bit one.
func appendVariableElems[T any](dst []byte, c8, c32 byte, elems []any, str func(T) string) ([]byte, error) {
	wide := false
	for i, e := range elems {
		v, ok := e.(T)
		if !ok {
			return dst, fmt.Errorf("%w: array element %d is %T, element 0 is %T", ErrUnsupportedType, i, e, elems[0])
		}
		if len(str(v)) > 255 {
			wide = true
		}
	}
	if wide {
		dst = append(dst, c32)
	} else {
		dst = append(dst, c8)
	}
	for _, e := range elems {
		s := str(e.(T))
		if wide {
			dst = binary.BigEndian.AppendUint32(dst, uint32(len(s)))
		} else {
			dst = append(dst, byte(len(s)))
		}
		dst = append(dst, s...)
	}
	return dst, nil
}
