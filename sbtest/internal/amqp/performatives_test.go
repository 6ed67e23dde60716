package amqp

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"
)

// roundTripFrame encodes p in a frame, reads it back and returns the decoded body.
func roundTripFrame(t *testing.T, p Performative) Performative {
	t.Helper()
	typ := FrameTypeAMQP
	if isSASL(p) {
		typ = FrameTypeSASL
	}
	b, err := AppendFrame(nil, Frame{Type: typ, Channel: 5, Body: p})
	if err != nil {
		t.Fatalf("AppendFrame(%T): %v", p, err)
	}
	f, err := ReadFrame(bytes.NewReader(b), uint32(len(b)))
	if err != nil {
		t.Fatalf("ReadFrame(%T): %v\n% x", p, err, b)
	}
	return f.Body
}

// TestPerformativeRoundTrip sets every field of every performative (and the parts they
// carry) and checks the decoded value is equal.
func TestPerformativeRoundTrip(t *testing.T) {
	ts := time.UnixMilli(1700000000123).UTC()
	props := Map{{Symbol("com.microsoft:timeout"), uint32(60000)}, {Symbol("ts"), ts}}
	errv := &Error{Condition: "amqp:not-found", Description: "no such entity", Info: Map{{Symbol("k"), "v"}}}
	tests := []Performative{
		&Open{ContainerID: "c", Hostname: "h", MaxFrameSize: Ptr(uint32(65536)), ChannelMax: Ptr(uint16(4999)),
			IdleTimeOut: Ptr(uint32(60000)), OutgoingLocales: []Symbol{"en-US"}, IncomingLocales: []Symbol{"en-US", "de"},
			OfferedCapabilities: []Symbol{"x"}, DesiredCapabilities: []Symbol{"y"}, Properties: props},
		&Open{ContainerID: "only"},
		&Begin{RemoteChannel: Ptr(uint16(0)), NextOutgoingID: 1, IncomingWindow: 5000, OutgoingWindow: 4000,
			HandleMax: Ptr(uint32(255)), OfferedCapabilities: []Symbol{"a"}, DesiredCapabilities: []Symbol{"b"}, Properties: props},
		&Begin{NextOutgoingID: 0, IncomingWindow: 0, OutgoingWindow: 0},
		&Attach{Name: "link", Handle: 3, Role: RoleReceiver, SndSettleMode: Ptr(SenderSettleUnsettled),
			RcvSettleMode: Ptr(ReceiverSettleSecond),
			Source: &Source{Address: "q/Subscriptions/s", Durable: 2, ExpiryPolicy: "never", Timeout: 30, Dynamic: true,
				DynamicNodeProperties: Map{{Symbol("lifetime-policy"), &Described{uint64(0x2b), []any{}}}},
				DistributionMode:      "move",
				Filter: Map{{Symbol("com.microsoft:session-filter"),
					&Described{Descriptor: uint64(0x00000137000000C), Value: "session"}}},
				DefaultOutcome: &Modified{DeliveryFailed: true}, Outcomes: []Symbol{"amqp:accepted:list"},
				Capabilities: []Symbol{"queue"}},
			Target:    &Target{Address: "t", Durable: 1, ExpiryPolicy: "link-detach", Timeout: 1, Dynamic: true, Capabilities: []Symbol{"c"}},
			Unsettled: Map{{[]byte{1}, &Described{uint64(CodeAccepted), []any{}}}}, IncompleteUnsettled: true, InitialDeliveryCount: 7,
			MaxMessageSize: 262144, OfferedCapabilities: []Symbol{"o"}, DesiredCapabilities: []Symbol{"d"}, Properties: props},
		&Attach{Name: "sender", Handle: 0, Role: RoleSender, Target: &Target{Address: "q"}, Source: &Source{}},
		&Flow{NextIncomingID: Ptr(uint32(9)), IncomingWindow: 1, NextOutgoingID: 2, OutgoingWindow: 3,
			Handle: Ptr(uint32(0)), DeliveryCount: Ptr(uint32(10)), LinkCredit: Ptr(uint32(100)),
			Available: Ptr(uint32(4)), Drain: true, Echo: true, Properties: props},
		&Flow{IncomingWindow: 1, NextOutgoingID: 2, OutgoingWindow: 3},
		&Transfer{Handle: 1, DeliveryID: Ptr(uint32(77)), DeliveryTag: bytes.Repeat([]byte{0xab}, 16),
			MessageFormat: Ptr(MessageFormatBatch), Settled: true, More: true, RcvSettleMode: Ptr(ReceiverSettleFirst),
			State: &Received{SectionNumber: 1, SectionOffset: 1 << 40}, Resume: true, Aborted: true, Batchable: true},
		&Transfer{Handle: 0},
		&Disposition{Role: RoleReceiver, First: 1, Last: Ptr(uint32(5)), Settled: true,
			State: &Rejected{Error: &Error{Condition: "com.microsoft:dead-letter",
				Info: Map{{Symbol("DeadLetterReason"), "r"}, {Symbol("DeadLetterErrorDescription"), "d"}}}}, Batchable: true},
		&Disposition{Role: RoleSender, First: 0, State: &Accepted{}},
		&Disposition{Role: RoleReceiver, First: 2, State: &Released{}},
		&Disposition{Role: RoleReceiver, First: 3, Settled: true,
			State: &Modified{DeliveryFailed: true, UndeliverableHere: true, MessageAnnotations: Map{{Symbol("x"), int32(1)}}}},
		&Detach{Handle: 4, Closed: true, Error: errv},
		&Detach{Handle: 0},
		&End{Error: errv},
		&End{},
		&Close{Error: &Error{Condition: "amqp:connection:forced"}},
		&Close{},
		&SASLMechanisms{Mechanisms: []Symbol{"ANONYMOUS", "MSSBCBS"}},
		&SASLInit{Mechanism: "ANONYMOUS", InitialResponse: []byte("x"), Hostname: "localhost"},
		&SASLInit{Mechanism: "ANONYMOUS"},
		&SASLChallenge{Challenge: []byte("c")},
		&SASLResponse{Response: []byte{}},
		&SASLOutcome{Code: SASLCodeAuth, AdditionalData: []byte("d")},
		&SASLOutcome{Code: SASLCodeOK},
	}
	for _, p := range tests {
		got := roundTripFrame(t, p)
		if !reflect.DeepEqual(got, p) {
			t.Errorf("%T round trip:\n got %#v\nwant %#v", p, got, p)
		}
	}
}

// TestPerformativeTrailingNulls checks the encoder omits trailing absent fields and
// writes nulls for absent fields before a present one.
func TestPerformativeTrailingNulls(t *testing.T) {
	tests := []struct {
		name string
		p    any
		want string
	}{
		{"attach receiver", &Attach{Name: "a", Handle: 0, Role: RoleReceiver},
			"00 53 12 c0 06 03 a1 01 61 43 41"},
		{"attach sender: initial-delivery-count after nulls", &Attach{Name: "a", Handle: 0, Role: RoleSender},
			"00 53 12 c0 0d 0a a1 01 61 43 42 40 40 40 40 40 40 43"},
		{"flow with handle", &Flow{IncomingWindow: 1, NextOutgoingID: 2, OutgoingWindow: 3, Handle: Ptr(uint32(0))},
			"00 53 13 c0 09 05 40 52 01 52 02 52 03 43"},
		{"transfer settled", &Transfer{Handle: 1, Settled: true},
			"00 53 14 c0 07 05 52 01 40 40 40 41"},
		{"disposition", &Disposition{Role: RoleReceiver, First: 7, Settled: true, State: &Accepted{}},
			"00 53 15 c0 0a 05 41 52 07 40 41 00 53 24 45"},
		{"detach", &Detach{Handle: 2}, "00 53 16 c0 03 01 52 02"},
		{"end", &End{}, "00 53 17 45"},
		{"rejected no error", &Rejected{}, "00 53 25 45"},
		{"modified undeliverable", &Modified{UndeliverableHere: true}, "00 53 27 c0 03 02 40 41"},
		// A header keeps its delivery-count 0: rhea reports an absent one as undefined.
		{"header durable", &Header{Durable: true}, "00 53 70 c0 06 05 41 40 40 40 43"},
		{"header empty", &Header{}, "00 53 70 c0 06 05 40 40 40 40 43"},
		{"properties message-id", &Properties{MessageID: "m"}, "00 53 73 c0 04 01 a1 01 6d"},
		{"properties correlation-id", &Properties{CorrelationID: uint64(1)}, "00 53 73 c0 08 06 40 40 40 40 40 53 01"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Marshal(tt.p)
			if err != nil {
				t.Fatal(err)
			}
			if want := hx(t, tt.want); !bytes.Equal(got, want) {
				t.Fatalf("\n got % x\nwant % x", got, want)
			}
		})
	}
}

// decodeBody decodes a performative from its hex body via ParseFrameBody.
func decodeBody(t *testing.T, typ uint8, body string) (Performative, error) {
	t.Helper()
	f, err := ParseFrameBody(typ, 0, hx(t, body))
	return f.Body, err
}

// TestPerformativeDecodeDefaults decodes lists that stop early, write nulls, use list32
// and symbolic descriptors: absent fields take their defaults.
func TestPerformativeDecodeDefaults(t *testing.T) {
	tests := []struct {
		name string
		typ  uint8
		body string
		want Performative
	}{
		{"open with only container-id", FrameTypeAMQP, "00 53 10 c0 03 01 a1 00", &Open{}},
		{"open list32 with nulls", FrameTypeAMQP, "00 53 10 d0 00 00 00 0c 00 00 00 05 a1 01 63 40 40 40 52 0a",
			&Open{ContainerID: "c", IdleTimeOut: Ptr(uint32(10))}},
		{"open symbolic descriptor", FrameTypeAMQP, "00 a3 0e 61 6d 71 70 3a 6f 70 65 6e 3a 6c 69 73 74 c0 03 01 a1 00", &Open{}},
		{"open single locale symbol", FrameTypeAMQP, "00 53 10 c0 0b 06 a1 00 40 40 40 40 a3 02 65 6e",
			&Open{OutgoingLocales: []Symbol{"en"}}},
		{"open locales array32", FrameTypeAMQP, "00 53 10" + l8(6, "a1 00 40 40 40 40 f0 00 00 00 08 00 00 00 01 a3 02 65 6e"),
			&Open{OutgoingLocales: []Symbol{"en"}}},
		{"open extra fields skipped", FrameTypeAMQP, "00 53 10" + l8(12, "a1 00 40 40 40 40 40 40 40 40 40 41 42"), &Open{}},
		{"flow mandatory only", FrameTypeAMQP, "00 53 13 c0 05 04 40 43 43 43", &Flow{}},
		{"transfer handle only", FrameTypeAMQP, "00 53 14 c0 02 01 43", &Transfer{}},
		{"transfer uint as 0x70", FrameTypeAMQP, "00 53 14" + l8(2, "70 00 00 00 01 70 00 00 00 02"),
			&Transfer{Handle: 1, DeliveryID: Ptr(uint32(2))}},
		{"transfer bool as 0x56", FrameTypeAMQP, "00 53 14 c0 09 06 43 40 40 40 56 01 56 00",
			&Transfer{Settled: true}},
		{"attach settle modes", FrameTypeAMQP, "00 53 12 c0 0a 05 a1 01 61 43 41 50 01 50 01",
			&Attach{Name: "a", Role: RoleReceiver, SndSettleMode: Ptr(SenderSettleSettled), RcvSettleMode: Ptr(ReceiverSettleSecond)}},
		{"attach source list0", FrameTypeAMQP, "00 53 12" + l8(6, "a1 01 61 43 42 40 40 00 53 28 45"),
			&Attach{Name: "a", Source: &Source{}}},
		{"attach max-message-size ulong", FrameTypeAMQP, "00 53 12" + l8(11, "a1 01 61 43 42 40 40 40 40 40 40 43 53 64"),
			&Attach{Name: "a", MaxMessageSize: 100}},
		{"detach error symbolic", FrameTypeAMQP, "00 53 16" + l8(3, "43 41 00 a3 0f 61 6d 71 70 3a 65 72 72 6f 72 3a 6c 69 73 74"+l8(1, "a3 01 78")),
			&Detach{Closed: true, Error: &Error{Condition: "x"}}},
		{"disposition received", FrameTypeAMQP, "00 53 15" + l8(5, "41 43 40 40 00 53 23"+l8(2, "43 44")),
			&Disposition{Role: RoleReceiver, State: &Received{}}},
		{"close list0", FrameTypeAMQP, "00 53 18 45", &Close{}},
		{"close list8 empty", FrameTypeAMQP, "00 53 18 c0 01 00", &Close{}},
		{"close null error", FrameTypeAMQP, "00 53 18 c0 02 01 40", &Close{}},
		{"sasl init", FrameTypeSASL, "00 53 41" + l8(1, "a3 09 41 4e 4f 4e 59 4d 4f 55 53"), &SASLInit{Mechanism: "ANONYMOUS"}},
		{"sasl mechanisms single symbol", FrameTypeSASL, "00 53 40 c0 04 01 a3 01 78", &SASLMechanisms{Mechanisms: []Symbol{"x"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := decodeBody(t, tt.typ, tt.body)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("\n got %#v\nwant %#v", got, tt.want)
			}
		})
	}
}

// TestPerformativeDecodeErrors: missing mandatory fields, wrong field types, bad values.
func TestPerformativeDecodeErrors(t *testing.T) {
	tests := []struct {
		name, body, wantMsg string
		typ                 uint8
	}{
		{"open without container-id", "00 53 10 45", "container-id", FrameTypeAMQP},
		{"open null container-id", "00 53 10 c0 02 01 40", "container-id", FrameTypeAMQP},
		{"open container-id as symbol", "00 53 10 c0 03 01 a3 00", "want string", FrameTypeAMQP},
		{"open max-frame-size as ulong", "00 53 10 c0 06 03 a1 00 40 53 01", "want uint", FrameTypeAMQP},
		{"open channel-max as uint", "00 53 10 c0 07 04 a1 00 40 40 52 01", "want ushort", FrameTypeAMQP},
		{"open properties as list", "00 53 10 c0 0c 0a a1 00 40 40 40 40 40 40 40 40 45", "want map", FrameTypeAMQP},
		{"open locales array of strings", "00 53 10 c0 0d 06 a1 00 40 40 40 40 e0 04 01 a1 01 61", "want symbol", FrameTypeAMQP},
		{"begin missing windows", "00 53 11 c0 03 02 40 43", "incoming-window", FrameTypeAMQP},
		{"attach missing role", "00 53 12" + l8(2, "a1 00 43"), "role", FrameTypeAMQP},
		{"attach snd-settle-mode 3", "00 53 12 c0 07 04 a1 00 43 41 50 03", "snd-settle-mode", FrameTypeAMQP},
		{"attach source wrong descriptor", "00 53 12 c0 0b 06 a1 00 43 41 40 40 00 53 29 45", "want source", FrameTypeAMQP},
		{"attach source not described", "00 53 12 c0 08 06 a1 00 43 41 40 40 45", "described", FrameTypeAMQP},
		{"flow missing outgoing-window", "00 53 13 c0 04 03 40 43 43", "outgoing-window", FrameTypeAMQP},
		{"transfer missing handle", "00 53 14 45", "handle", FrameTypeAMQP},
		{"transfer handle as int", "00 53 14 c0 03 01 54 01", "want uint", FrameTypeAMQP},
		{"transfer delivery-tag 33 bytes", "00 53 14 c0 26 03 43 40 a0 21" + strings.Repeat("00", 33), "delivery-tag", FrameTypeAMQP},
		{"transfer unknown state", "00 53 14 c0 0c 08 43 40 40 40 40 40 40 00 53 30 45", "delivery state", FrameTypeAMQP},
		{"disposition missing first", "00 53 15 c0 02 01 41", "first", FrameTypeAMQP},
		{"disposition state error", "00 53 15" + l8(5, "41 43 40 40 00 53 1d 45"), "delivery state", FrameTypeAMQP},
		{"detach error missing condition", "00 53 16 c0 07 03 43 40 00 53 1d 45", "condition", FrameTypeAMQP},
		{"received missing offset", "00 53 15" + l8(5, "41 43 40 40 00 53 23"+l8(1, "43")), "section-offset", FrameTypeAMQP},
		{"close error list", "00 53 18 c0 02 01 45", "described", FrameTypeAMQP},
		{"performative body not a list", "00 53 18 a1 00", "list", FrameTypeAMQP},
		{"performative list truncated", "00 53 18 c0 05 01", "exceeds", FrameTypeAMQP},
		{"unknown symbolic descriptor", "00 a3 01 78 45", "unknown", FrameTypeAMQP},
		{"sasl mechanisms missing", "00 53 40 45", "sasl-server-mechanisms", FrameTypeSASL},
		{"sasl init missing mechanism", "00 53 41 45", "mechanism", FrameTypeSASL},
		{"sasl challenge missing", "00 53 42 45", "challenge", FrameTypeSASL},
		{"sasl response missing", "00 53 43 45", "response", FrameTypeSASL},
		{"sasl outcome missing code", "00 53 44 45", "code", FrameTypeSASL},
		{"sasl outcome code as uint", "00 53 44 c0 03 01 52 00", "want ubyte", FrameTypeSASL},
		{"extra field malformed", "00 53 18 c0 03 02 40 ff", "constructor", FrameTypeAMQP},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := decodeBody(t, tt.typ, tt.body)
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("decoded %#v, err %v; want ErrMalformed", p, err)
			}
			if !strings.Contains(err.Error(), tt.wantMsg) {
				t.Fatalf("error %q does not mention %q", err, tt.wantMsg)
			}
		})
	}
}

func TestErrorString(t *testing.T) {
	if got := (&Error{Condition: "amqp:not-found"}).Error(); got != "amqp:not-found" {
		t.Errorf("got %q", got)
	}
	if got := (&Error{Condition: "a", Description: "b"}).Error(); got != "a: b" {
		t.Errorf("got %q", got)
	}
}

// l8 returns the hex of a list8 with count elements whose encoding is body (hex).
func l8(count int, body string) string {
	n := len(strings.ReplaceAll(body, " ", "")) / 2
	return fmt.Sprintf(" c0 %02x %02x %s", n+1, count, body)
}
