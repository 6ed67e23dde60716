package serialize

import (
	"encoding"
	"fmt"
)

// RawCodec passes bytes through unchanged. It encodes a []byte or an
// encoding.BinaryMarshaler, and decodes into a *[]byte (a copy of the body), a *any (which
// receives a []byte) or an [encoding.BinaryUnmarshaler]. It never fails on any body. The
// zero value is ready to use. Safe for concurrent use.
type RawCodec struct{}

// Name returns "raw".
func (RawCodec) Name() string { return "raw" }

// Marshal returns a copy of v's bytes.
func (RawCodec) Marshal(v any) ([]byte, error) {
	switch x := v.(type) {
	case []byte:
		return append([]byte(nil), x...), nil
	case encoding.BinaryMarshaler:
		return x.MarshalBinary()
	}
	return nil, fmt.Errorf("%w: raw encodes []byte or encoding.BinaryMarshaler, got %T", ErrUnsupportedType, v)
}

// Unmarshal stores a copy of data in v.
func (RawCodec) Unmarshal(data []byte, v any) error {
	switch x := v.(type) {
	case *[]byte:
		*x = append([]byte(nil), data...)
	case *any:
		*x = append([]byte(nil), data...)
	case encoding.BinaryUnmarshaler:
		return x.UnmarshalBinary(data)
	default:
		return fmt.Errorf("%w: raw decodes into *[]byte, *any or encoding.BinaryUnmarshaler, got %T", ErrUnsupportedType, v)
	}
	return nil
}
