package serialize

import (
	"bytes"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
)

// XMLCodec reads and writes XML with encoding/xml. Documents declaring an encoding of
// utf-8, us-ascii or iso-8859-1 are read; so is a charset parameter with those values. A
// leading UTF-8 byte order mark is ignored. The zero value is ready to use. Safe for
// concurrent use.
type XMLCodec struct{}

// Name returns "xml".
func (XMLCodec) Name() string { return "xml" }

// Marshal encodes v as XML (without an <?xml?> header).
func (XMLCodec) Marshal(v any) ([]byte, error) { return xml.Marshal(v) }

// Unmarshal decodes the first XML element of data into v.
func (XMLCodec) Unmarshal(data []byte, v any) error {
	return xmlDecode(data, v, xmlCharsetReader)
}

func xmlDecode(data []byte, v any, charsetReader func(string, io.Reader) (io.Reader, error)) error {
	dec := xml.NewDecoder(bytes.NewReader(bytes.TrimPrefix(data, utf8BOM)))
	dec.CharsetReader = charsetReader
	if err := dec.Decode(v); err != nil {
		if errors.Is(err, io.EOF) {
			return fmt.Errorf("serialize: no XML element in body: %w", io.ErrUnexpectedEOF)
		}
		return err
	}
	return nil
}

// MarshalMediaType encodes v as XML in the charset of mt.
func (c XMLCodec) MarshalMediaType(v any, mt MediaType) ([]byte, error) {
	data, err := c.Marshal(v)
	if err != nil {
		return nil, err
	}
	return fromUTF8(data, mt.Charset())
}

// UnmarshalMediaType decodes data into v. A charset parameter in mt wins over the
// document's own encoding declaration (as in HTTP): the body is converted from it first.
func (c XMLCodec) UnmarshalMediaType(data []byte, mt MediaType, v any) error {
	charset := mt.Charset()
	if charset == "" {
		return c.Unmarshal(data, v)
	}
	data, err := toUTF8(data, charset, false)
	if err != nil {
		return err
	}
	return xmlDecode(data, v, func(_ string, r io.Reader) (io.Reader, error) { return r, nil })
}
