package serialize_test

import (
	"errors"
	"testing"
	"unicode/utf8"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/sbkit/sbkit/serialize"
)

// The fuzzers call the codecs directly (no recover), so a panic in a built-in codec fails
// the fuzzer, and through the registry, where the only errors allowed for a body within
// the size limit are *DecodeError values that do not wrap ErrCodecPanic.
// Run one with: go test ./serialize -run '^$' -fuzz '^FuzzDecodeJSON$' -fuzztime 30s

func FuzzDecodeJSON(f *testing.F) {
	for _, s := range []string{`{"id":"a","qty":1}`, `[1,2,{"a":null}]`, `"\ud800"`, `1e999`, `{"qty":1e3}`, "\xEF\xBB\xBF{}", `{"id":"a"} trailing`, `{"a":{"b":{"c":[[[[]]]]}}}`} {
		f.Add([]byte(s))
	}
	codecs := []serialize.JSONCodec{{}, {DisallowUnknownFields: true, UseNumber: true}}
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, c := range codecs {
			var o order
			_ = c.Unmarshal(body, &o)
			var v any
			if err := c.Unmarshal(body, &v); err == nil {
				if _, err := c.Marshal(v); err != nil {
					t.Fatalf("decoded %q but cannot re-encode %#v: %v", body, v, err)
				}
			}
			var pb *structpb.Struct
			_ = c.Unmarshal(body, &pb)
			var val *structpb.Value
			_ = c.Unmarshal(body, &val)
			_ = c.UnmarshalMediaType(body, serialize.MediaType{Params: map[string]string{"charset": "iso-8859-1"}}, &v)
		}
	})
}

func FuzzDecodeXML(f *testing.F) {
	for _, s := range []string{`<order><id>a</id><qty>1</qty></order>`, `<?xml version="1.0" encoding="ISO-8859-1"?><order><id>` + "\xe9" + `</id></order>`, `<?xml version="1.0" encoding="x"?><a/>`, `<a><!-- c --><![CDATA[x]]></a>`, `<a xmlns:p="u"><p:b/></a>`, `<!DOCTYPE a [<!ENTITY e "x">]><a>&e;</a>`, `<a`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var c serialize.XMLCodec
		var o xmlOrder
		_ = c.Unmarshal(body, &o)
		var s struct {
			Any   []string `xml:",any"`
			Attrs []string `xml:",any,attr"`
		}
		_ = c.Unmarshal(body, &s)
		_ = c.UnmarshalMediaType(body, serialize.MediaType{Params: map[string]string{"charset": "latin1"}}, &o)
	})
}

func FuzzDecodeProtobuf(f *testing.F) {
	st, _ := structpb.NewStruct(map[string]any{"a": []any{1, "x", map[string]any{"b": true}}})
	stBytes, _ := proto.Marshal(st)
	anyMsg, _ := anypb.New(st)
	anyBytes, _ := proto.Marshal(anyMsg)
	tsBytes, _ := proto.Marshal(timestamppb.New(timestamppb.Now().AsTime()))
	for _, b := range [][]byte{stBytes, anyBytes, tsBytes, {0x0a, 0xff, 0xff, 0xff, 0xff, 0x0f}, {0x08}, {}} {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var c serialize.ProtobufCodec
		var s *structpb.Struct
		if err := c.Unmarshal(body, &s); err == nil {
			if _, err := c.Marshal(s); err != nil {
				t.Fatalf("decoded but cannot re-encode: %v", err)
			}
		}
		var a anypb.Any
		if err := c.Unmarshal(body, &a); err == nil {
			_, _ = a.UnmarshalNew() // resolving the embedded type must not panic either
		}
		var ts *timestamppb.Timestamp
		_ = c.Unmarshal(body, &ts)
	})
}

func FuzzDecodeText(f *testing.F) {
	for _, c := range []struct{ charset, body string }{{"", "hello"}, {"utf-8", "h\xc3\xa9"}, {"ISO-8859-1", "h\xe9"}, {"us-ascii", "h\xe9"}, {"utf-16", "x"}, {"", "\xEF\xBB\xBF"}, {"latin1", "\x00\xff"}} {
		f.Add(c.charset, []byte(c.body))
	}
	f.Fuzz(func(t *testing.T, charset string, body []byte) {
		var c serialize.TextCodec
		mt := serialize.MediaType{Type: "text/plain", Params: map[string]string{"charset": charset}}
		var s string
		if err := c.UnmarshalMediaType(body, mt, &s); err == nil {
			if !utf8.ValidString(s) {
				t.Fatalf("decoded text is not UTF-8: %q", s)
			}
			if _, err := c.MarshalMediaType(s, mt); err != nil && mt.Charset() != "us-ascii" && mt.Charset() != "ascii" {
				// Text that was read from a charset can be written back to it.
				t.Fatalf("decoded %q from %s but cannot encode it back: %v", body, charset, err)
			}
		}
	})
}

func FuzzParseMediaType(f *testing.F) {
	for _, s := range []string{"application/json", "Application/Vnd.X+JSON; charset=\"utf-8\"", "text/plain;;", "a/b; c=\"d\\\"e\"", "a/b+", "a/+json", "a/b; c*=utf-8''%e2%82%ac", " / ", "a/b; a=1; a=2"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		mt, err := serialize.ParseMediaType(s)
		if err != nil {
			return
		}
		again, err := serialize.ParseMediaType(mt.String())
		if err != nil {
			t.Fatalf("String() of %q is %q, which does not parse: %v", s, mt.String(), err)
		}
		if again.Type != mt.Type || again.Suffix != mt.Suffix {
			t.Fatalf("%q -> %q -> %q: type changed", s, mt.String(), again.Type)
		}
	})
}

// FuzzDecode goes through the registry: any content type, any body, several targets.
func FuzzDecode(f *testing.F) {
	for _, c := range []struct{ ct, body string }{
		{"application/json", `{"id":"a"}`}, {"", `{"id":"a"}`}, {"text/xml; charset=latin1", `<order/>`},
		{"application/x-protobuf", "\x0a\x03\x0a\x01a"}, {"text/plain; charset=utf-8", "hi"}, {"application/octet-stream", "\x00"},
		{"application/vnd.a+json; x=\"", "{"}, {"APPLICATION/MSGPACK", "\x81"},
	} {
		f.Add(c.ct, []byte(c.body))
	}
	reg, err := serialize.New(&serialize.Options{MaxBodySize: 1 << 16})
	if err != nil {
		f.Fatal(err)
	}
	if err := reg.SetFallbacks("application/json", "application/xml", "text/plain", "application/x-protobuf", "application/octet-stream"); err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, contentType string, body []byte) {
		targets := []any{new(order), new(xmlOrder), new(any), new(*structpb.Struct), new(string), new([]byte)}
		for _, v := range targets {
			err := reg.Decode(received(contentType, body), v)
			if err == nil {
				continue
			}
			var derr *serialize.DecodeError
			switch {
			case errors.Is(err, serialize.ErrCodecPanic):
				t.Fatalf("codec panicked on %q %q: %v", contentType, body, err)
			case errors.Is(err, serialize.ErrBodyTooLarge):
				if len(body) <= reg.MaxBodySize() {
					t.Fatalf("body of %d bytes called too large", len(body))
				}
			case !errors.As(err, &derr):
				t.Fatalf("unexpected error type %T: %v", err, err)
			case len(derr.Attempts) == 0:
				t.Fatal("DecodeError without attempts")
			}
		}
	})
}
