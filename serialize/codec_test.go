package serialize_test

import (
	"bytes"
	"encoding/xml"
	"errors"
	"net/netip"
	"reflect"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/sbkit/sbkit/serialize"
)

type xmlOrder struct {
	XMLName xml.Name `xml:"order"`
	ID      string   `xml:"id"`
	Qty     int      `xml:"qty"`
}

// TestCodecsDecode decodes one body per codec and content type into a fresh value and
// compares it with what was expected.
func TestCodecsDecode(t *testing.T) {
	reg := mustNew(t, &serialize.Options{Fallbacks: []string{}})
	pbStruct, _ := structpb.NewStruct(map[string]any{"id": "a1", "qty": 3})
	pbBytes, _ := proto.Marshal(pbStruct)
	tests := []struct {
		name        string
		contentType string
		body        []byte
		newTarget   func() any // a pointer
		want        any        // what the pointer should point to
	}{
		{"json struct", "application/json", []byte(`{"id":"a1","qty":3}`), func() any { return new(order) }, order{ID: "a1", Qty: 3}},
		{"json charset utf-8", "application/json; charset=utf-8", []byte(`{"id":"é","qty":1}`), func() any { return new(order) }, order{ID: "é", Qty: 1}},
		{"json latin-1", "application/json; charset=iso-8859-1", []byte("{\"id\":\"\xe9\",\"qty\":1}"), func() any { return new(order) }, order{ID: "é", Qty: 1}},
		{"json with BOM", "application/json", append([]byte{0xEF, 0xBB, 0xBF}, `{"id":"b"}`...), func() any { return new(order) }, order{ID: "b"}},
		{"json into any", "application/vnd.x+json", []byte(`{"a":[1,"x"]}`), func() any { return new(any) }, any(map[string]any{"a": []any{1.0, "x"}})},
		{"json into proto (protojson)", "application/json", []byte(`{"id":"a1","qty":3}`), func() any { return new(*structpb.Struct) }, pbStruct},
		{"json wrapper proto", "application/json", []byte(`"hi"`), func() any { return new(*wrapperspb.StringValue) }, wrapperspb.String("hi")},
		{"xml struct", "application/xml", []byte(`<order><id>a1</id><qty>3</qty></order>`), func() any { return new(xmlOrder) }, xmlOrder{XMLName: xml.Name{Local: "order"}, ID: "a1", Qty: 3}},
		{"xml text/xml latin-1 declared", "text/xml", []byte("<?xml version=\"1.0\" encoding=\"ISO-8859-1\"?><order><id>\xe9</id></order>"), func() any { return new(xmlOrder) }, xmlOrder{XMLName: xml.Name{Local: "order"}, ID: "é"}},
		{"xml latin-1 param beats declaration", "text/xml; charset=latin1", []byte("<?xml version=\"1.0\" encoding=\"ISO-8859-1\"?><order><id>\xe9</id></order>"), func() any { return new(xmlOrder) }, xmlOrder{XMLName: xml.Name{Local: "order"}, ID: "é"}},
		{"xml suffix", "application/atom+xml", []byte(`<order><id>z</id></order>`), func() any { return new(xmlOrder) }, xmlOrder{XMLName: xml.Name{Local: "order"}, ID: "z"}},
		{"protobuf into **T", "application/x-protobuf", pbBytes, func() any { return new(*structpb.Struct) }, pbStruct},
		{"protobuf into *T", "application/protobuf", pbBytes, func() any { return &structpb.Struct{} }, pbStruct},
		{"protobuf empty body", "application/vnd.google.protobuf", []byte{}, func() any { return new(*wrapperspb.Int64Value) }, &wrapperspb.Int64Value{}},
		{"text string", "text/plain", []byte("héllo"), func() any { return new(string) }, "héllo"},
		{"text utf-8 BOM dropped", "text/plain; charset=utf-8", []byte("\xEF\xBB\xBFhi"), func() any { return new(string) }, "hi"},
		{"text latin-1", "text/plain; charset=ISO-8859-1", []byte("h\xe9llo"), func() any { return new(string) }, "héllo"},
		{"text bytes", "text/plain", []byte("abc"), func() any { return new([]byte) }, []byte("abc")},
		{"text any", "text/plain", []byte("abc"), func() any { return new(any) }, any("abc")},
		{"text TextUnmarshaler", "text/plain", []byte("10.0.0.1"), func() any { return new(netip.Addr) }, netip.MustParseAddr("10.0.0.1")},
		{"raw bytes", "application/octet-stream", []byte{0, 1, 0xff}, func() any { return new([]byte) }, []byte{0, 1, 0xff}},
		{"raw BinaryUnmarshaler", "application/octet-stream", []byte{10, 0, 0, 1}, func() any { return new(netip.Addr) }, netip.MustParseAddr("10.0.0.1")},
		{"raw any", "application/octet-stream", []byte{7}, func() any { return new(any) }, any([]byte{7})},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			target := tt.newTarget()
			if err := reg.DecodeBytes(tt.contentType, tt.body, target); err != nil {
				t.Fatalf("DecodeBytes: %v", err)
			}
			got := reflect.ValueOf(target).Elem().Interface()
			if isProto(target) {
				got = target
			}
			if !equal(got, tt.want) {
				t.Fatalf("got %#v, want %#v", got, tt.want)
			}
		})
	}
}

func equal(a, b any) bool {
	if pa, ok := a.(proto.Message); ok {
		pb, ok := b.(proto.Message)
		return ok && proto.Equal(pa, pb)
	}
	return reflect.DeepEqual(a, b)
}

// TestCodecsReject: each codec fails, with an error, on bodies or targets it cannot handle.
func TestCodecsReject(t *testing.T) {
	reg := mustNew(t, &serialize.Options{Fallbacks: []string{}})
	tests := []struct {
		name        string
		contentType string
		body        []byte
		target      any
		wantIs      error // optional
	}{
		{"json garbage", "application/json", []byte("garbage"), new(order), nil},
		{"json empty", "application/json", nil, new(order), nil},
		{"json trailing data", "application/json", []byte(`{"id":"a"} {"id":"b"}`), new(order), nil},
		{"json wrong type", "application/json", []byte(`{"qty":"x"}`), new(order), nil},
		{"json bad charset", "application/json; charset=shift_jis", []byte(`{}`), new(order), serialize.ErrUnsupportedCharset},
		{"json bad protojson", "application/json", []byte(`{"id":`), new(*structpb.Struct), nil},
		{"xml garbage", "application/xml", []byte("<order><id>"), new(xmlOrder), nil},
		{"xml empty", "text/xml", nil, new(xmlOrder), nil},
		{"xml unknown declared encoding", "application/xml", []byte(`<?xml version="1.0" encoding="EBCDIC"?><order/>`), new(xmlOrder), serialize.ErrUnsupportedCharset},
		{"protobuf garbage", "application/x-protobuf", []byte{0xff, 0xff, 0xff}, new(*structpb.Struct), nil},
		{"protobuf non-proto target", "application/x-protobuf", []byte{}, new(order), serialize.ErrUnsupportedType},
		{"text invalid utf-8", "text/plain", []byte{0xff, 0xfe}, new(string), nil},
		{"text non-ascii in us-ascii", "text/plain; charset=us-ascii", []byte("h\xe9"), new(string), nil},
		{"text unsupported charset", "text/plain; charset=utf-16", []byte("hi"), new(string), serialize.ErrUnsupportedCharset},
		{"text wrong target", "text/plain", []byte("hi"), new(int), serialize.ErrUnsupportedType},
		{"raw wrong target", "application/octet-stream", []byte("hi"), new(string), serialize.ErrUnsupportedType},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := reg.DecodeBytes(tt.contentType, tt.body, tt.target)
			var derr *serialize.DecodeError
			if !errors.As(err, &derr) {
				t.Fatalf("got %v, want a *DecodeError", err)
			}
			if tt.wantIs != nil && !errors.Is(err, tt.wantIs) {
				t.Fatalf("got %v, want it to wrap %v", err, tt.wantIs)
			}
		})
	}
}

func TestJSONCodecOptions(t *testing.T) {
	strict := serialize.JSONCodec{DisallowUnknownFields: true, UseNumber: true}
	var o order
	if err := strict.Unmarshal([]byte(`{"id":"a","extra":1}`), &o); err == nil {
		t.Fatal("DisallowUnknownFields accepted an unknown field")
	}
	if err := strict.Unmarshal([]byte(`{"id":"a"} x`), &o); err == nil {
		t.Fatal("strict decoder accepted trailing data")
	}
	if err := strict.Unmarshal(nil, &o); err == nil {
		t.Fatal("strict decoder accepted an empty body")
	}
	var v any
	if err := strict.Unmarshal([]byte(`{"n":12345678901234567890}`), &v); err != nil {
		t.Fatal(err)
	}
	if n, ok := v.(map[string]any)["n"].(interface{ String() string }); !ok || n.String() != "12345678901234567890" {
		t.Fatalf("UseNumber: got %#v", v)
	}
	var pb *structpb.Struct
	if err := strict.Unmarshal([]byte(`{"a":1}`), &pb); err != nil || pb.Fields["a"].GetNumberValue() != 1 {
		t.Fatalf("protojson through strict codec: %v %v", pb, err)
	}
}

// TestEncodeDecodeRoundTrip: what Encode writes, Decode reads back, per codec and charset.
func TestEncodeDecodeRoundTrip(t *testing.T) {
	reg := mustNew(t, nil)
	pb, _ := structpb.NewStruct(map[string]any{"k": "v", "n": 2})
	tests := []struct {
		contentType string
		value       any
		newTarget   func() any
		wantBody    []byte // optional
	}{
		{"application/json", order{ID: "a", Qty: 2}, func() any { return new(order) }, []byte(`{"id":"a","qty":2}`)},
		{"application/json; charset=iso-8859-1", order{ID: "é"}, func() any { return new(order) }, []byte("{\"id\":\"\xe9\",\"qty\":0}")},
		{"application/vnd.acme.order+json", &order{ID: "p"}, func() any { return new(order) }, nil},
		{"application/json", pb, func() any { return new(*structpb.Struct) }, nil},
		{"application/xml", xmlOrder{XMLName: xml.Name{Local: "order"}, ID: "x", Qty: 1}, func() any { return new(xmlOrder) }, []byte(`<order><id>x</id><qty>1</qty></order>`)},
		{"application/x-protobuf", pb, func() any { return new(*structpb.Struct) }, nil},
		{"text/plain", "héllo", func() any { return new(string) }, []byte("héllo")},
		{"text/plain; charset=latin1", "héllo", func() any { return new(string) }, []byte("h\xe9llo")},
		{"text/plain", netip.MustParseAddr("::1"), func() any { return new(netip.Addr) }, []byte("::1")},
		{"application/octet-stream", []byte{1, 2, 3}, func() any { return new([]byte) }, []byte{1, 2, 3}},
		{"application/octet-stream", netip.MustParseAddr("10.1.2.3"), func() any { return new(netip.Addr) }, []byte{10, 1, 2, 3}},
	}
	for _, tt := range tests {
		t.Run(tt.contentType, func(t *testing.T) {
			msg, err := reg.Encode(tt.value, tt.contentType, nil)
			if err != nil {
				t.Fatalf("Encode: %v", err)
			}
			if msg.ContentType == nil || *msg.ContentType != tt.contentType {
				t.Fatalf("ContentType = %v, want %q", msg.ContentType, tt.contentType)
			}
			if tt.wantBody != nil && !bytes.Equal(msg.Body, tt.wantBody) {
				t.Fatalf("Body = %q, want %q", msg.Body, tt.wantBody)
			}
			target := tt.newTarget()
			if err := reg.Decode(received(*msg.ContentType, msg.Body), target); err != nil {
				t.Fatalf("Decode: %v", err)
			}
			got := reflect.ValueOf(target).Elem().Interface()
			want := tt.value
			if rv := reflect.ValueOf(want); rv.Kind() == reflect.Pointer && !isProto(want) {
				want = rv.Elem().Interface()
			}
			if !equal(got, want) {
				t.Fatalf("round trip: got %#v, want %#v", got, want)
			}
		})
	}
}

func isProto(v any) bool { _, ok := v.(proto.Message); return ok }
