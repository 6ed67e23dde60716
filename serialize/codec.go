package serialize

// Codec encodes Go values to message bodies and decodes bodies into Go values for one
// format. Codecs registered in a Registry must be safe for concurrent use.
//
// Unmarshal receives a non-nil pointer (the registry checks this) and the body, which it
// must not keep after it returns unless it copies it. Errors should say what is wrong with
// the body; a codec that cannot handle the target's type should return an error wrapping
// [ErrUnsupportedType].
type Codec interface {
	// Name is a short name used in errors and dead-letter descriptions ("json").
	Name() string
	// Marshal encodes v.
	Marshal(v any) ([]byte, error)
	// Unmarshal decodes data into v, a non-nil pointer.
	Unmarshal(data []byte, v any) error
}

// MediaTypeCodec is a Codec that needs the content type's parameters (such as charset).
// When a codec implements it, the registry calls these methods instead of Marshal and
// Unmarshal.
type MediaTypeCodec interface {
	Codec
	// MarshalMediaType encodes v for the media type mt.
	MarshalMediaType(v any, mt MediaType) ([]byte, error)
	// UnmarshalMediaType decodes data, described by mt, into v, a non-nil pointer.
	UnmarshalMediaType(data []byte, mt MediaType, v any) error
}
