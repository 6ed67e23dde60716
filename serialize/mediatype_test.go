package serialize_test

import (
	"errors"
	"testing"

	"github.com/sbkit/sbkit/serialize"
)

func TestLookupContentTypeSpellings(t *testing.T) {
	reg := mustNew(t, nil)
	tests := []struct {
		contentType string
		codec       string
		mediaType   string
		charset     string
	}{
		{"application/json", "json", "application/json", ""},
		{"application/json; charset=utf-8", "json", "application/json", "utf-8"},
		{"application/json;charset=UTF-8", "json", "application/json", "utf-8"},
		{"APPLICATION/JSON", "json", "application/json", ""},
		{"  Application/Json ; Charset=\"utf-8\"  ", "json", "application/json", "utf-8"},
		{"text/json", "json", "text/json", ""},
		{"application/vnd.x+json", "json", "application/vnd.x+json", ""},
		{"application/vnd.acme.order+json; version=2", "json", "application/vnd.acme.order+json", ""},
		{"APPLICATION/PROBLEM+JSON", "json", "application/problem+json", ""},
		{"application/xml", "xml", "application/xml", ""},
		{"text/xml", "xml", "text/xml", ""},
		{"text/xml; charset=ISO-8859-1", "xml", "text/xml", "iso-8859-1"},
		{"application/atom+xml", "xml", "application/atom+xml", ""},
		{"application/x-protobuf", "protobuf", "application/x-protobuf", ""},
		{"application/protobuf", "protobuf", "application/protobuf", ""},
		{"application/vnd.google.protobuf; proto=google.protobuf.Struct", "protobuf", "application/vnd.google.protobuf", ""},
		{"application/vnd.acme+protobuf", "protobuf", "application/vnd.acme+protobuf", ""},
		{"text/plain", "text", "text/plain", ""},
		{"Text/Plain; charset=us-ascii", "text", "text/plain", "us-ascii"},
		{"application/octet-stream", "raw", "application/octet-stream", ""},
		{"application/json;", "json", "application/json", ""},                          // trailing separator
		{"application/json; charset", "json", "application/json", ""},                  // malformed parameter: type still used
		{"application/json; charset=utf-8; charset=x", "json", "application/json", ""}, // duplicate parameter
	}
	for _, tt := range tests {
		t.Run(tt.contentType, func(t *testing.T) {
			c, mt, err := reg.Lookup(tt.contentType)
			if err != nil {
				t.Fatalf("Lookup: %v", err)
			}
			if c.Name() != tt.codec || mt.Type != tt.mediaType || mt.Charset() != tt.charset {
				t.Fatalf("got codec %s type %q charset %q, want %s %q %q", c.Name(), mt.Type, mt.Charset(), tt.codec, tt.mediaType, tt.charset)
			}
		})
	}
}

func TestLookupErrors(t *testing.T) {
	reg := mustNew(t, nil)
	tests := []struct {
		contentType string
		want        error
	}{
		{"", serialize.ErrNoContentType},
		{"   ", serialize.ErrNoContentType},
		{"json", serialize.ErrInvalidContentType},
		{"application/", serialize.ErrInvalidContentType},
		{"/json", serialize.ErrInvalidContentType},
		{"application json", serialize.ErrInvalidContentType},
		{"application/msgpack", serialize.ErrUnknownContentType},
		{"application/vnd.x+cbor", serialize.ErrUnknownContentType},
		{"application/json+", serialize.ErrUnknownContentType}, // empty suffix is no suffix
		{"image/png", serialize.ErrUnknownContentType},
	}
	for _, tt := range tests {
		t.Run(tt.contentType, func(t *testing.T) {
			if _, _, err := reg.Lookup(tt.contentType); !errors.Is(err, tt.want) {
				t.Fatalf("Lookup(%q) = %v, want %v", tt.contentType, err, tt.want)
			}
		})
	}
}

func TestParseMediaTypeKeepsParameters(t *testing.T) {
	mt, err := serialize.ParseMediaType(`Application/Vnd.Acme.Order+JSON; Version=2; charset="UTF-8"`)
	if err != nil {
		t.Fatal(err)
	}
	if mt.Type != "application/vnd.acme.order+json" || mt.Suffix != "json" {
		t.Fatalf("type %q suffix %q", mt.Type, mt.Suffix)
	}
	if mt.Params["version"] != "2" || mt.Charset() != "utf-8" {
		t.Fatalf("params %v", mt.Params)
	}
	if got, want := mt.String(), "application/vnd.acme.order+json; charset=UTF-8; version=2"; got != want {
		t.Fatalf("String() = %q, want %q", got, want)
	}
}

func TestExactRegistrationWinsOverSuffix(t *testing.T) {
	reg := mustNew(t, nil)
	if err := reg.Register("application/vnd.special+json", serialize.TextCodec{}); err != nil {
		t.Fatal(err)
	}
	c, _, err := reg.Lookup("application/VND.special+json")
	if err != nil || c.Name() != "text" {
		t.Fatalf("got %v, %v; want the exact registration (text)", c, err)
	}
	c, _, err = reg.Lookup("application/vnd.other+json")
	if err != nil || c.Name() != "json" {
		t.Fatalf("got %v, %v; want the suffix registration (json)", c, err)
	}
}
