package serialize_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/sbkit/sbkit"
	"github.com/sbkit/sbkit/serialize"
)

// recordingCodec records its calls into a shared log and fails unless ok.
type recordingCodec struct {
	name string
	ok   bool
	mu   *sync.Mutex
	log  *[]string
}

func (c recordingCodec) Name() string                  { return c.name }
func (c recordingCodec) Marshal(v any) ([]byte, error) { return nil, errors.New("unused") }
func (c recordingCodec) Unmarshal(data []byte, v any) error {
	c.mu.Lock()
	*c.log = append(*c.log, c.name)
	c.mu.Unlock()
	if c.ok {
		*(v.(*string)) = c.name
		return nil
	}
	return errors.New(c.name + " cannot read this")
}

// TestFallbackOrder: the message's own content type first, then the fallbacks in the
// configured order, stopping at the first success; duplicates are not retried.
func TestFallbackOrder(t *testing.T) {
	var mu sync.Mutex
	tests := []struct {
		name        string
		contentType string
		okCodec     string // the only codec that succeeds; "" none
		wantCalls   string
		wantAttempt []string // Attempt.String prefixes on failure
	}{
		{"own type succeeds", "application/a", "a", "a", nil},
		{"own type fails, first fallback succeeds", "application/c", "b", "c,b", nil},
		{"fallbacks in order", "application/c", "a", "c,b,a", nil},
		{"missing content type goes to fallbacks", "", "a", "b,a", nil},
		{"unknown content type goes to fallbacks", "application/zzz", "b", "b", nil},
		{"invalid content type goes to fallbacks", "not a type", "b", "b", nil},
		{"fallback equal to own type not retried", "application/b", "", "b,a", []string{
			`content-type "application/b" (b): b cannot read this`,
			`fallback "application/a" (a): a cannot read this`,
		}},
		{"utf-8 charset equals the fallback without one", "application/b; charset=UTF-8", "", "b,a", []string{
			`content-type "application/b; charset=UTF-8" (b): b cannot read this`,
			`fallback "application/a" (a): a cannot read this`,
		}},
		{"another charset is a different attempt", "application/b; charset=iso-8859-1", "", "b,b,a", []string{
			`content-type "application/b; charset=iso-8859-1" (b)`,
			`fallback "application/b" (b)`,
			`fallback "application/a" (a)`,
		}},
		{"all fail", "", "", "b,a", []string{
			`content-type: serialize: no content type`,
			`fallback "application/b" (b): b cannot read this`,
			`fallback "application/a" (a): a cannot read this`,
		}},
		{"unknown then all fail", "application/zzz; v=1", "", "b,a", []string{
			`content-type "application/zzz; v=1": serialize: no codec for content type "application/zzz"`,
			`fallback "application/b" (b)`,
			`fallback "application/a" (a)`,
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var calls []string
			reg := mustNew(t, &serialize.Options{DisableBuiltins: true})
			for _, n := range []string{"a", "b", "c"} {
				if err := reg.Register("application/"+n, recordingCodec{name: n, ok: n == tt.okCodec, mu: &mu, log: &calls}); err != nil {
					t.Fatal(err)
				}
			}
			if err := reg.SetFallbacks("application/b", "APPLICATION/A"); err != nil {
				t.Fatal(err)
			}
			var got string
			err := reg.Decode(received(tt.contentType, []byte("x")), &got)
			if strings.Join(calls, ",") != tt.wantCalls {
				t.Fatalf("calls %v, want %s", calls, tt.wantCalls)
			}
			if tt.okCodec != "" {
				if err != nil || got != tt.okCodec {
					t.Fatalf("got %q, %v; want %q decoded", got, err, tt.okCodec)
				}
				return
			}
			var derr *serialize.DecodeError
			if !errors.As(err, &derr) {
				t.Fatalf("got %v, want *DecodeError", err)
			}
			if len(derr.Attempts) != len(tt.wantAttempt) {
				t.Fatalf("attempts %v, want %d", derr.Attempts, len(tt.wantAttempt))
			}
			for i, a := range derr.Attempts {
				if !strings.HasPrefix(a.String(), tt.wantAttempt[i]) {
					t.Errorf("attempt %d = %q, want prefix %q", i, a.String(), tt.wantAttempt[i])
				}
			}
			if derr.ContentType != tt.contentType {
				t.Errorf("ContentType = %q", derr.ContentType)
			}
		})
	}
}

// TestDefaultFallbackIsJSON: with default options a message without content type is read
// as JSON, and an empty non-nil Fallbacks disables that.
func TestDefaultFallbackIsJSON(t *testing.T) {
	body := []byte(`{"id":"a1","qty":2}`)
	o, err := serialize.Decode[order](mustNew(t, nil), received("", body))
	if err != nil || o.ID != "a1" {
		t.Fatalf("default fallback: %+v %v", o, err)
	}
	_, err = serialize.Decode[order](mustNew(t, &serialize.Options{Fallbacks: []string{}}), received("", body))
	if !errors.Is(err, serialize.ErrNoContentType) {
		t.Fatalf("no fallbacks: got %v, want ErrNoContentType", err)
	}
	// A JSON body labelled text/plain, decoded into a struct: the text codec cannot fill
	// a struct, so the JSON fallback does.
	o, err = serialize.Decode[order](mustNew(t, nil), received("text/plain", body))
	if err != nil || o.Qty != 2 {
		t.Fatalf("fallback after codec failure: %+v %v", o, err)
	}
}

// TestTargetResetBetweenAttempts: a partial decode by a failed codec does not leak into
// the value produced by the fallback.
func TestTargetResetBetweenAttempts(t *testing.T) {
	reg := mustNew(t, nil)
	if err := reg.SetFallbacks("application/xml"); err != nil {
		t.Fatal(err)
	}
	// encoding/json fills "id" before failing on "qty".
	body := []byte(`{"id":"from-json","qty":"bad"}`)
	var o order
	err := reg.Decode(received("application/json", body), &o)
	if err == nil {
		t.Fatal("expected failure")
	}
	if o.ID != "" {
		t.Fatalf("partial JSON decode leaked: %+v", o)
	}
	// Now a body that JSON half-reads and XML fully reads.
	body = []byte(`<order><qty>4</qty></order>`)
	o = order{}
	if err := reg.Decode(received("application/json", body), &o); err != nil || o.Qty != 4 || o.ID != "" {
		t.Fatalf("got %+v, %v", o, err)
	}
}

type panicCodec struct{}

func (panicCodec) Name() string                    { return "boom" }
func (panicCodec) Marshal(any) ([]byte, error)     { panic("marshal exploded") }
func (panicCodec) Unmarshal(d []byte, v any) error { panic("unmarshal exploded") }

func TestCodecPanicIsRecovered(t *testing.T) {
	reg := mustNew(t, nil)
	if err := reg.Register("application/boom", panicCodec{}); err != nil {
		t.Fatal(err)
	}
	var o order
	err := reg.DecodeBytes("application/boom", []byte(`{"id":"ok"}`), &o)
	if err != nil || o.ID != "ok" {
		t.Fatalf("panic should fall back to JSON: %+v %v", o, err)
	}
	err = reg.DecodeBytes("application/boom", []byte(`nope`), &o)
	if !errors.Is(err, serialize.ErrCodecPanic) || !strings.Contains(err.Error(), "unmarshal exploded") {
		t.Fatalf("got %v, want ErrCodecPanic", err)
	}
	if _, err := reg.Encode(o, "application/boom", nil); !errors.Is(err, serialize.ErrCodecPanic) {
		t.Fatalf("Encode: got %v, want ErrCodecPanic", err)
	}
}

func TestBadArguments(t *testing.T) {
	reg := mustNew(t, nil)
	var nilReg *serialize.Registry
	var o order
	var nilPtr *order
	tests := []struct {
		name string
		err  error
		want error
	}{
		{"nil registry Decode", nilReg.Decode(received("application/json", []byte("{}")), &o), serialize.ErrNilRegistry},
		{"nil registry DecodeBytes", nilReg.DecodeBytes("application/json", nil, &o), serialize.ErrNilRegistry},
		{"nil registry generic", func() error { _, err := serialize.Decode[order](nil, received("", nil)); return err }(), serialize.ErrNilRegistry},
		{"nil registry Encode", func() error { _, err := nilReg.Encode(o, "", nil); return err }(), serialize.ErrNilRegistry},
		{"nil registry Register", nilReg.Register("a/b", serialize.RawCodec{}), serialize.ErrNilRegistry},
		{"nil registry SetFallbacks", nilReg.SetFallbacks(), serialize.ErrNilRegistry},
		{"nil message", reg.Decode(nil, &o), sbkit.ErrNilMessage},
		{"nil message generic", func() error { _, err := serialize.Decode[order](reg, nil); return err }(), sbkit.ErrNilMessage},
		{"nil target", reg.Decode(received("application/json", []byte("{}")), nil), serialize.ErrNilValue},
		{"nil pointer target", reg.DecodeBytes("application/json", []byte("{}"), nilPtr), serialize.ErrNilValue},
		{"non-pointer target", reg.DecodeBytes("application/json", []byte("{}"), o), serialize.ErrInvalidTarget},
		{"nil value Encode", func() error { _, err := reg.Encode(nil, "", nil); return err }(), serialize.ErrNilValue},
		{"nil pointer Encode", func() error { _, err := reg.Encode(nilPtr, "", nil); return err }(), serialize.ErrNilValue},
		{"Encode unknown type", func() error { _, err := reg.Encode(o, "application/msgpack", nil); return err }(), serialize.ErrUnknownContentType},
		{"Encode invalid type", func() error { _, err := reg.Encode(o, "json", nil); return err }(), serialize.ErrInvalidContentType},
		{"Encode unsupported value", func() error { _, err := reg.Encode(o, "text/plain", nil); return err }(), serialize.ErrUnsupportedType},
		{"Register nil codec", reg.Register("a/b", nil), serialize.ErrNilCodec},
		{"Register bad type", reg.Register("nonsense", serialize.RawCodec{}), serialize.ErrInvalidContentType},
		{"SetFallbacks unknown", reg.SetFallbacks("application/msgpack"), serialize.ErrUnknownContentType},
		{"New bad fallback", func() error { _, err := serialize.New(&serialize.Options{Fallbacks: []string{"x/y"}}); return err }(), serialize.ErrUnknownContentType},
		{"New bad default type", func() error { _, err := serialize.New(&serialize.Options{DefaultContentType: "json"}); return err }(), serialize.ErrInvalidContentType},
		{"New bad fallback is invalid options", func() error { _, err := serialize.New(&serialize.Options{Fallbacks: []string{"x/y"}}); return err }(), serialize.ErrInvalidOptions},
		{"New bad default type is invalid options", func() error { _, err := serialize.New(&serialize.Options{DefaultContentType: "json"}); return err }(), serialize.ErrInvalidOptions},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if !errors.Is(tt.err, tt.want) {
				t.Fatalf("got %v, want %v", tt.err, tt.want)
			}
		})
	}
	if err := reg.RegisterSuffix("", serialize.RawCodec{}); err == nil {
		t.Fatal("empty suffix accepted")
	}
	if got := reg.Fallbacks(); len(got) != 1 || got[0] != "application/json" {
		t.Fatalf("a failed SetFallbacks changed the chain: %v", got)
	}
}

func TestZeroRegistry(t *testing.T) {
	var reg serialize.Registry
	var s string
	if err := reg.DecodeBytes("text/plain", []byte("x"), &s); !errors.Is(err, serialize.ErrUnknownContentType) {
		t.Fatalf("empty registry: %v", err)
	}
	if err := reg.Register("text/plain", serialize.TextCodec{}); err != nil {
		t.Fatal(err)
	}
	if err := reg.DecodeBytes("text/plain", []byte("x"), &s); err != nil || s != "x" {
		t.Fatalf("after Register: %q %v", s, err)
	}
	if reg.MaxBodySize() != serialize.DefaultMaxBodySize {
		t.Fatalf("zero registry limit %d", reg.MaxBodySize())
	}
}

func TestMaxBodySize(t *testing.T) {
	reg := mustNew(t, &serialize.Options{MaxBodySize: 10})
	var calls []string
	var mu sync.Mutex
	if err := reg.Register("application/rec", recordingCodec{name: "rec", ok: true, mu: &mu, log: &calls}); err != nil {
		t.Fatal(err)
	}
	var s string
	if err := reg.DecodeBytes("application/rec", make([]byte, 10), &s); err != nil {
		t.Fatalf("body at the limit: %v", err)
	}
	calls = nil
	err := reg.Decode(received("application/rec", make([]byte, 11)), &s)
	if !errors.Is(err, serialize.ErrBodyTooLarge) || !strings.Contains(err.Error(), "11 bytes, limit 10") {
		t.Fatalf("got %v, want ErrBodyTooLarge naming sizes", err)
	}
	if len(calls) != 0 {
		t.Fatalf("a decoder ran on an oversized body: %v", calls)
	}
	if err := reg.DecodeBytes("application/rec", make([]byte, 11), &s); !errors.Is(err, serialize.ErrBodyTooLarge) {
		t.Fatalf("DecodeBytes: %v", err)
	}
	if _, err := reg.Encode("0123456789a", "text/plain", nil); !errors.Is(err, serialize.ErrBodyTooLarge) {
		t.Fatalf("Encode: %v", err)
	}
	if got := mustNew(t, nil).MaxBodySize(); got != 1<<20 {
		t.Fatalf("default MaxBodySize %d", got)
	}
	// Negative means no limit: a body over the default limit is decoded.
	unlimited := mustNew(t, &serialize.Options{MaxBodySize: -1})
	big := make([]byte, serialize.DefaultMaxBodySize+1)
	if err := unlimited.Decode(received("application/octet-stream", big), new([]byte)); err != nil {
		t.Fatalf("no limit: %v", err)
	}
	if got, err := serialize.MessageBody(received("", big), -1); err != nil || len(got) != len(big) {
		t.Fatalf("MessageBody without limit = %d bytes, %v", len(got), err)
	}
	if _, err := serialize.MessageBody(received("", big), 0); !errors.Is(err, serialize.ErrBodyTooLarge) {
		t.Fatalf("MessageBody at the default limit = %v, want ErrBodyTooLarge", err)
	}
}

// TestAMQPValueBodies: bodies that arrive as AMQP value or sequence sections (older .NET
// clients), or as several data sections, leave msg.Body empty and are read from
// RawAMQPMessage.
func TestAMQPValueBodies(t *testing.T) {
	type symbol string // go-amqp's Symbol is a named string type
	raw := func(b azservicebus.AMQPAnnotatedMessageBody) *azservicebus.ReceivedMessage {
		ct := "application/json"
		return &azservicebus.ReceivedMessage{ContentType: &ct, RawAMQPMessage: &azservicebus.AMQPAnnotatedMessage{Body: b}}
	}
	tests := []struct {
		name string
		msg  *azservicebus.ReceivedMessage
		want string // decoded id; "" means expect an error
		is   error
	}{
		{"value string", raw(azservicebus.AMQPAnnotatedMessageBody{Value: `{"id":"s"}`}), "s", nil},
		{"value binary", raw(azservicebus.AMQPAnnotatedMessageBody{Value: []byte(`{"id":"b"}`)}), "b", nil},
		{"value symbol", raw(azservicebus.AMQPAnnotatedMessageBody{Value: symbol(`{"id":"y"}`)}), "y", nil},
		{"several data sections", raw(azservicebus.AMQPAnnotatedMessageBody{Data: [][]byte{[]byte(`{"id":`), []byte(`"d"}`)}}), "d", nil},
		{"sequence", raw(azservicebus.AMQPAnnotatedMessageBody{Sequence: [][]any{{`{"id"`, []byte(`:`)}, {`"q"}`}}}), "q", nil},
		{"value map (.NET IDictionary)", raw(azservicebus.AMQPAnnotatedMessageBody{Value: map[string]any{"id": "m", "qty": int32(2)}}), "m", nil},
		{"value map any keys", raw(azservicebus.AMQPAnnotatedMessageBody{Value: map[any]any{symbol("id"): "k"}}), "k", nil},
		{"value map int keys", raw(azservicebus.AMQPAnnotatedMessageBody{Value: map[any]any{1: "x"}}), "", serialize.ErrUnsupportedBody},
		{"value NaN", raw(azservicebus.AMQPAnnotatedMessageBody{Value: math.NaN()}), "", serialize.ErrUnsupportedBody},
		{"value channel", raw(azservicebus.AMQPAnnotatedMessageBody{Value: make(chan int)}), "", serialize.ErrUnsupportedBody},
		{"value number into struct", raw(azservicebus.AMQPAnnotatedMessageBody{Value: int64(5)}), "", nil},
		{"no body", raw(azservicebus.AMQPAnnotatedMessageBody{}), "", nil},
	}
	reg := mustNew(t, nil)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o, err := serialize.Decode[order](reg, tt.msg)
			if tt.want != "" {
				if err != nil || o.ID != tt.want {
					t.Fatalf("got %+v, %v; want id %q", o, err, tt.want)
				}
				return
			}
			if err == nil {
				t.Fatalf("got %+v, want an error", o)
			}
			if tt.is != nil && !errors.Is(err, tt.is) {
				t.Fatalf("got %v, want %v", err, tt.is)
			}
		})
	}
	// AMQP graphs of every simple type become JSON; without a content type they are
	// read as JSON even when the fallbacks do not include it.
	noFallbacks := mustNew(t, &serialize.Options{Fallbacks: []string{}})
	when := time.Date(2026, 11, 22, 7, 0, 0, 0, time.UTC)
	uuid := [16]byte{0x12, 0x34, 0x56, 0x78, 0x9a, 0xbc, 0xde, 0xf0, 1, 2, 3, 4, 5, 6, 7, 8}
	graph := &azservicebus.ReceivedMessage{RawAMQPMessage: &azservicebus.AMQPAnnotatedMessage{Body: azservicebus.AMQPAnnotatedMessageBody{
		Value: map[string]any{"list": []any{int8(1), uint64(2), 2.5, true, nil, symbol("s")}, "when": when, "id": uuid, "bin": []byte{1, 2}, "ints": []int32{7}},
	}}}
	got, err := serialize.Decode[map[string]any](noFallbacks, graph)
	if err != nil {
		t.Fatal(err)
	}
	wantJSON := `{"bin":"AQI=","id":"12345678-9abc-def0-0102-030405060708","ints":[7],"list":[1,2,2.5,true,null,"s"],"when":"2026-11-22T07:00:00Z"}`
	if b, _ := json.Marshal(got); string(b) != wantJSON {
		t.Fatalf("AMQP graph as JSON:\n got %s\nwant %s", b, wantJSON)
	}
	seq := &azservicebus.ReceivedMessage{RawAMQPMessage: &azservicebus.AMQPAnnotatedMessage{Body: azservicebus.AMQPAnnotatedMessageBody{
		Sequence: [][]any{{"a", int64(1)}, {[]any{"b"}}},
	}}}
	if got, err := serialize.Decode[[]any](noFallbacks, seq); err != nil || fmt.Sprint(got) != "[a 1 [b]]" {
		t.Fatalf("sequence as JSON array: %v %v", got, err)
	}
	deep := any("x")
	for range 200 {
		deep = []any{deep}
	}
	if _, err := serialize.MessageBody(raw(azservicebus.AMQPAnnotatedMessageBody{Value: deep}), 0); !errors.Is(err, serialize.ErrUnsupportedBody) {
		t.Fatalf("deep nesting: %v", err)
	}
	if _, err := serialize.MessageBody(raw(azservicebus.AMQPAnnotatedMessageBody{Value: map[string]any{"k": strings.Repeat("x", 20)}}), 10); !errors.Is(err, serialize.ErrBodyTooLarge) {
		t.Fatalf("converted body over the limit: %v", err)
	}

	// Body wins over the raw message when present.
	msg := raw(azservicebus.AMQPAnnotatedMessageBody{Value: `{"id":"raw"}`})
	msg.Body = []byte(`{"id":"body"}`)
	if o, err := serialize.Decode[order](reg, msg); err != nil || o.ID != "body" {
		t.Fatalf("Body should win: %+v %v", o, err)
	}
	// The size limit covers raw bodies, counted across sections.
	small := mustNew(t, &serialize.Options{MaxBodySize: 8})
	_, err = serialize.Decode[order](small, raw(azservicebus.AMQPAnnotatedMessageBody{Data: [][]byte{make([]byte, 5), make([]byte, 5)}}))
	if !errors.Is(err, serialize.ErrBodyTooLarge) {
		t.Fatalf("sections over the limit: %v", err)
	}
}

func TestDecodeErrorDescription(t *testing.T) {
	reg := mustNew(t, nil)
	if err := reg.SetFallbacks("application/json", "application/xml", "application/x-protobuf"); err != nil {
		t.Fatal(err)
	}
	_, err := serialize.Decode[order](reg, received("application/vnd.acme+json", []byte("\x00garbage")))
	var derr *serialize.DecodeError
	if !errors.As(err, &derr) {
		t.Fatalf("got %v", err)
	}
	desc := derr.Description(-1) // no limit
	if len(desc) > serialize.DefaultMaxDescriptionLength || derr.Description(0) != desc {
		t.Errorf("Description(0) = %q, want the default limit (%d bytes), which %d bytes fit", derr.Description(0), serialize.DefaultMaxDescriptionLength, len(desc))
	}
	for _, want := range []string{
		`4 attempt(s) failed`,
		`content-type "application/vnd.acme+json" (json): invalid character`,
		`fallback "application/json" (json): invalid character`,
		`fallback "application/xml" (xml): `,
		`fallback "application/x-protobuf" (protobuf): serialize: unsupported type for codec`,
	} {
		if !strings.Contains(desc, want) {
			t.Errorf("description lacks %q:\n%s", want, desc)
		}
	}
	if !errors.Is(err, serialize.ErrUnsupportedType) {
		t.Error("errors.Is does not see an attempt's error")
	}
	if got := derr.Description(40); len(got) > 40 || !strings.HasSuffix(got, "...") {
		t.Errorf("Description(40) = %q (%d bytes)", got, len(got))
	}
	if !strings.HasPrefix(err.Error(), "serialize: cannot decode body: 4 attempt(s) failed") {
		t.Errorf("Error() = %q", err.Error())
	}
}

// TestConcurrentRegisterAndDecode runs under -race: registering while decoding is safe.
func TestConcurrentRegisterAndDecode(t *testing.T) {
	reg := mustNew(t, nil)
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Add(2)
		go func() {
			defer wg.Done()
			for range 100 {
				if _, err := serialize.Decode[order](reg, received("application/json", []byte(`{"id":"x"}`))); err != nil {
					t.Error(err)
					return
				}
			}
		}()
		go func() {
			defer wg.Done()
			for j := range 100 {
				_ = reg.Register("application/x"+string(rune('a'+i)), serialize.RawCodec{})
				_ = reg.SetFallbacks("application/json")
				_ = j
			}
		}()
	}
	wg.Wait()
}

func TestDecodeGenericProto(t *testing.T) {
	reg := mustNew(t, nil)
	msg, err := reg.Encode(&structpb.Struct{Fields: map[string]*structpb.Value{"a": structpb.NewBoolValue(true)}}, "application/x-protobuf", nil)
	if err != nil {
		t.Fatal(err)
	}
	got, err := serialize.Decode[*structpb.Struct](reg, received(*msg.ContentType, msg.Body))
	if err != nil || !got.Fields["a"].GetBoolValue() {
		t.Fatalf("got %v, %v", got, err)
	}
}
