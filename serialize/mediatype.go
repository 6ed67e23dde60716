package serialize

import (
	"errors"
	"fmt"
	"mime"
	"strings"
)

// MediaType is a parsed content type.
type MediaType struct {
	// Type is "type/subtype" in lower case, for example "application/vnd.acme.order+json".
	Type string
	// Suffix is the structured syntax suffix in lower case ("json" for
	// "application/vnd.acme.order+json"), or empty.
	Suffix string
	// Params are the parameters; names are lower case, values as sent (for example
	// {"charset": "utf-8"}). Nil when there are none.
	Params map[string]string
}

// ParseMediaType parses an RFC 2045 content type such as "Application/JSON; charset=utf-8"
// with [mime.ParseMediaType]. A content type whose parameters are malformed (a duplicate
// name, bad quoting) is still accepted, without parameters; one without a
// "type/subtype" or with an empty type fails with an error wrapping
// [ErrInvalidContentType].
func ParseMediaType(contentType string) (MediaType, error) {
	s := strings.TrimSpace(contentType)
	if s == "" {
		return MediaType{}, ErrNoContentType
	}
	typ, params, err := mime.ParseMediaType(s)
	if err != nil && !errors.Is(err, mime.ErrInvalidMediaParameter) {
		// Malformed parameters (a duplicate name, bad quoting): keep the type alone.
		head, _, hasParams := strings.Cut(s, ";")
		if !hasParams {
			return MediaType{}, fmt.Errorf("%w %q: %w", ErrInvalidContentType, contentType, err)
		}
		if typ, _, err = mime.ParseMediaType(head); err != nil {
			return MediaType{}, fmt.Errorf("%w %q: %w", ErrInvalidContentType, contentType, err)
		}
		params = nil
	}
	major, sub, ok := strings.Cut(typ, "/")
	if !ok || major == "" || sub == "" {
		return MediaType{}, fmt.Errorf("%w %q: want type/subtype", ErrInvalidContentType, contentType)
	}
	mt := MediaType{Type: typ}
	if i := strings.LastIndexByte(sub, '+'); i >= 0 && i < len(sub)-1 {
		mt.Suffix = sub[i+1:]
	}
	if len(params) > 0 {
		mt.Params = params
	}
	return mt, nil
}

// Charset returns the charset parameter in lower case, or "" when absent.
func (mt MediaType) Charset() string {
	return normalizeCharset(mt.Params["charset"])
}

// String formats the media type canonically with [mime.FormatMediaType] (lower-case type,
// parameters sorted by name).
func (mt MediaType) String() string {
	if s := mime.FormatMediaType(mt.Type, mt.Params); s != "" {
		return s
	}
	return mt.Type
}
