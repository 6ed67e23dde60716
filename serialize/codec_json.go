package serialize

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"google.golang.org/protobuf/encoding/protojson"
)

// JSONCodec reads and writes JSON. Protocol buffer messages (targets that are a
// [proto.Message] or a pointer to one) go through protojson, everything else through
// encoding/json. The zero value is ready to use and is what New registers. A charset
// parameter of utf-8, us-ascii or iso-8859-1 is honoured; a leading UTF-8 byte order mark
// is ignored. Safe for concurrent use.
type JSONCodec struct {
	// DisallowUnknownFields makes decoding fail when the body has an object key that the
	// target does not have. This makes JSON a stricter link in a fallback chain.
	// Default false.
	DisallowUnknownFields bool
	// UseNumber decodes numbers into interface{} values as [json.Number] instead of
	// float64. Default false.
	UseNumber bool
}

// Name returns "json".
func (JSONCodec) Name() string { return "json" }

// Marshal encodes v as JSON.
func (JSONCodec) Marshal(v any) ([]byte, error) {
	if m, ok := protoMessage(v); ok {
		return protojson.Marshal(m)
	}
	return json.Marshal(v)
}

// Unmarshal decodes the JSON document data into v. Data after the document is an error.
func (c JSONCodec) Unmarshal(data []byte, v any) error {
	data = bytes.TrimPrefix(data, utf8BOM)
	if m, ok := protoTarget(v); ok {
		return protojson.UnmarshalOptions{DiscardUnknown: !c.DisallowUnknownFields}.Unmarshal(data, m)
	}
	if !c.DisallowUnknownFields && !c.UseNumber {
		return json.Unmarshal(data, v)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	if c.DisallowUnknownFields {
		dec.DisallowUnknownFields()
	}
	if c.UseNumber {
		dec.UseNumber()
	}
	if err := dec.Decode(v); err != nil {
		if errors.Is(err, io.EOF) {
			return fmt.Errorf("serialize: empty JSON body: %w", io.ErrUnexpectedEOF)
		}
		return err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return errors.New("serialize: invalid JSON: data after the top-level value")
	}
	return nil
}

// MarshalMediaType encodes v as JSON in the charset of mt.
func (c JSONCodec) MarshalMediaType(v any, mt MediaType) ([]byte, error) {
	data, err := c.Marshal(v)
	if err != nil {
		return nil, err
	}
	return fromUTF8(data, mt.Charset())
}

// UnmarshalMediaType converts data from the charset of mt and decodes it.
func (c JSONCodec) UnmarshalMediaType(data []byte, mt MediaType, v any) error {
	data, err := toUTF8(data, mt.Charset(), false)
	if err != nil {
		return err
	}
	return c.Unmarshal(data, v)
}
