package serialize_test

import (
	"testing"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/sbkit/sbkit/serialize"
)

func TestEncodeMessageTypeProperty(t *testing.T) {
	tests := []struct {
		name     string
		prop     string
		value    any
		ct       string
		opts     *serialize.EncodeOptions
		wantCT   string
		wantProp any // nil: no property map
	}{
		{"off by default", "", order{ID: "a"}, "application/json", nil, "application/json", nil},
		{"Go type name", "MessageType", order{ID: "a"}, "application/json", nil, "application/json", "serialize_test.order"},
		{"pointer stripped", "MessageType", &order{ID: "a"}, "application/json; charset=utf-8", nil, "application/json; charset=utf-8", "serialize_test.order"},
		{"proto full name", "Type", timestamppb.New(timestamppb.Now().AsTime()), "application/x-protobuf", nil, "application/x-protobuf", "google.protobuf.Timestamp"},
		{"explicit name", "MessageType", order{}, "", &serialize.EncodeOptions{MessageType: "acme.OrderPlaced.v1"}, "application/json", "acme.OrderPlaced.v1"},
		{"default content type", "", "x", "", nil, "text/plain", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			opts := &serialize.Options{MessageTypeProperty: tt.prop}
			if tt.name == "default content type" {
				opts.DefaultContentType = "text/plain"
			}
			reg := mustNew(t, opts)
			msg, err := reg.Encode(tt.value, tt.ct, tt.opts)
			if err != nil {
				t.Fatal(err)
			}
			if *msg.ContentType != tt.wantCT {
				t.Fatalf("ContentType %q, want %q", *msg.ContentType, tt.wantCT)
			}
			if tt.wantProp == nil {
				if msg.ApplicationProperties != nil {
					t.Fatalf("unexpected properties %v", msg.ApplicationProperties)
				}
				return
			}
			if got := msg.ApplicationProperties[tt.prop]; got != tt.wantProp {
				t.Fatalf("property %q = %v, want %v", tt.prop, got, tt.wantProp)
			}
		})
	}
	if serialize.TypeName(nil) != "" {
		t.Fatal("TypeName(nil)")
	}
}

func TestEncodeCharsetErrors(t *testing.T) {
	reg := mustNew(t, nil)
	if _, err := reg.Encode("日本", "text/plain; charset=iso-8859-1", nil); err == nil {
		t.Fatal("a character outside latin-1 was encoded")
	}
	if _, err := reg.Encode("é", "text/plain; charset=us-ascii", nil); err == nil {
		t.Fatal("a character outside ASCII was encoded")
	}
	if _, err := reg.Encode("x", "text/plain; charset=utf-16", nil); err == nil {
		t.Fatal("an unsupported charset was accepted")
	}
	if _, err := reg.Encode(map[string]int(nil), "application/json", nil); err != nil {
		t.Fatalf("a nil map is a value: %v", err)
	}
}

func TestTextCodecDirect(t *testing.T) {
	var c serialize.TextCodec
	s := "ptr"
	for _, v := range []any{"str", []byte("bytes"), &s} {
		if _, err := c.Marshal(v); err != nil {
			t.Fatalf("Marshal(%T): %v", v, err)
		}
	}
	if _, err := c.Marshal((*string)(nil)); err == nil {
		t.Fatal("nil *string encoded")
	}
	var got string
	if err := c.Unmarshal([]byte("\xEF\xBB\xBFtext"), &got); err != nil || got != "text" {
		t.Fatalf("Unmarshal: %q %v", got, err)
	}
	if err := c.Unmarshal([]byte{0xc3}, &got); err == nil {
		t.Fatal("invalid UTF-8 accepted without a charset")
	}
}
