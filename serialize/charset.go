package serialize

import (
	"bytes"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"
)

var utf8BOM = []byte{0xEF, 0xBB, 0xBF}

// toUTF8 converts data in the given charset (lower case, "" meaning UTF-8) to UTF-8 and
// strips a leading UTF-8 byte order mark, which .NET writers often emit. When validate is
// set, UTF-8 input must be valid.
func toUTF8(data []byte, charset string, validate bool) ([]byte, error) {
	switch charset {
	case "", "utf-8", "utf8":
		data = bytes.TrimPrefix(data, utf8BOM)
		if validate && !utf8.Valid(data) {
			return nil, fmt.Errorf("serialize: body is not valid UTF-8")
		}
		return data, nil
	case "us-ascii", "ascii":
		for i, c := range data {
			if c >= utf8.RuneSelf {
				return nil, fmt.Errorf("serialize: byte 0x%02x at offset %d is not US-ASCII", c, i)
			}
		}
		return data, nil
	case "iso-8859-1", "iso8859-1", "iso_8859-1", "latin1", "latin-1", "l1":
		return latin1ToUTF8(data), nil
	}
	return nil, fmt.Errorf("%w %q (supported: utf-8, us-ascii, iso-8859-1)", ErrUnsupportedCharset, charset)
}

// fromUTF8 converts UTF-8 text to the given charset for encoding.
func fromUTF8(data []byte, charset string) ([]byte, error) {
	switch charset {
	case "", "utf-8", "utf8":
		return data, nil
	case "us-ascii", "ascii", "iso-8859-1", "iso8859-1", "iso_8859-1", "latin1", "latin-1", "l1":
		limit := rune(0xFF)
		if charset == "us-ascii" || charset == "ascii" {
			limit = 0x7F
		}
		out := make([]byte, 0, len(data))
		for i, r := range string(data) {
			if r > limit || r == utf8.RuneError {
				return nil, fmt.Errorf("serialize: character %q at offset %d cannot be written in %s", r, i, charset)
			}
			out = append(out, byte(r))
		}
		return out, nil
	}
	return nil, fmt.Errorf("%w %q (supported: utf-8, us-ascii, iso-8859-1)", ErrUnsupportedCharset, charset)
}

func latin1ToUTF8(data []byte) []byte {
	ascii := true
	for _, c := range data {
		if c >= utf8.RuneSelf {
			ascii = false
			break
		}
	}
	if ascii {
		return data
	}
	out := make([]byte, 0, len(data)+len(data)/2)
	for _, c := range data {
		out = utf8.AppendRune(out, rune(c))
	}
	return out
}

// xmlCharsetReader lets encoding/xml read documents that declare a charset other than
// UTF-8 in their <?xml encoding="..."?> header, for the charsets toUTF8 knows.
func xmlCharsetReader(charset string, input io.Reader) (io.Reader, error) {
	data, err := io.ReadAll(input)
	if err != nil {
		return nil, err
	}
	out, err := toUTF8(data, normalizeCharset(charset), false)
	if err != nil {
		return nil, err
	}
	return bytes.NewReader(out), nil
}

func normalizeCharset(charset string) string {
	return strings.ToLower(strings.TrimSpace(charset))
}
