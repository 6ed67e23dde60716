package serialize

import (
	"encoding"
	"fmt"
)

// TextCodec reads and writes plain text. It encodes a string, a []byte or an
// encoding.TextMarshaler, and decodes into a *string, a *[]byte, a *any (which receives a
// string) or an [encoding.TextUnmarshaler]. Without a charset parameter the body must be
// valid UTF-8; the charsets utf-8, us-ascii and iso-8859-1 (latin-1, converted to UTF-8)
// are understood, any other fails with [ErrUnsupportedCharset]. A leading UTF-8 byte order
// mark is dropped. The zero value is ready to use. Safe for concurrent use.
type TextCodec struct{}

// Name returns "text".
func (TextCodec) Name() string { return "text" }

// Marshal encodes v as UTF-8 text.
func (TextCodec) Marshal(v any) ([]byte, error) {
	switch x := v.(type) {
	case string:
		return []byte(x), nil
	case []byte:
		return append([]byte(nil), x...), nil
	case *string:
		if x != nil {
			return []byte(*x), nil
		}
	case encoding.TextMarshaler:
		return x.MarshalText()
	}
	return nil, fmt.Errorf("%w: text encodes string, []byte or encoding.TextMarshaler, got %T", ErrUnsupportedType, v)
}

// Unmarshal decodes UTF-8 text into v.
func (c TextCodec) Unmarshal(data []byte, v any) error {
	return c.UnmarshalMediaType(data, MediaType{}, v)
}

// MarshalMediaType encodes v as text in the charset of mt.
func (c TextCodec) MarshalMediaType(v any, mt MediaType) ([]byte, error) {
	data, err := c.Marshal(v)
	if err != nil {
		return nil, err
	}
	return fromUTF8(data, mt.Charset())
}

// UnmarshalMediaType converts data from the charset of mt to UTF-8 and stores it in v.
func (TextCodec) UnmarshalMediaType(data []byte, mt MediaType, v any) error {
	text, err := toUTF8(data, mt.Charset(), true)
	if err != nil {
		return err
	}
	switch x := v.(type) {
	case *string:
		*x = string(text)
	case *[]byte:
		*x = append([]byte(nil), text...)
	case *any:
		*x = string(text)
	case encoding.TextUnmarshaler:
		return x.UnmarshalText(text)
	default:
		return fmt.Errorf("%w: text decodes into *string, *[]byte, *any or encoding.TextUnmarshaler, got %T", ErrUnsupportedType, v)
	}
	return nil
}
