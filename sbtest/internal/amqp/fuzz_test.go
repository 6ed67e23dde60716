package amqp

import (
	"bytes"
	"errors"
	"io"
	"testing"
	"time"
)

// Fuzz properties: decoding never panics, errors wrap ErrMalformed (or ErrFrameTooLarge /
// an io error for frames), and whatever decodes re-encodes, decodes again, and re-encodes
// to the same bytes (the encoding of a decoded value is canonical).

func FuzzUnmarshal(f *testing.F) {
	for _, v := range fuzzSeedValues() {
		b, err := Marshal(v)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		v, rest, err := Unmarshal(data)
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("error does not wrap ErrMalformed: %v", err)
			}
			return
		}
		if len(rest) > len(data) {
			t.Fatalf("rest longer than input")
		}
		enc, err := Marshal(v)
		if err != nil {
			t.Fatalf("decoded %#v but cannot encode it: %v", v, err)
		}
		v2, rest2, err := Unmarshal(enc)
		if err != nil || len(rest2) != 0 {
			t.Fatalf("re-decode of % x: %v (rest % x)", enc, err, rest2)
		}
		enc2, err := Marshal(v2)
		if err != nil || !bytes.Equal(enc, enc2) {
			t.Fatalf("encoding not stable:\n% x\n% x (%v)", enc, enc2, err)
		}
	})
}

func FuzzReadFrame(f *testing.F) {
	for _, fr := range fuzzSeedFrames() {
		b, err := AppendFrame(nil, fr)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		fr, err := ReadFrame(bytes.NewReader(data), 1<<16)
		if err != nil {
			if !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrFrameTooLarge) &&
				err != io.EOF && err != io.ErrUnexpectedEOF {
				t.Fatalf("unexpected error kind: %v", err)
			}
			return
		}
		enc, err := AppendFrame(nil, fr)
		if err != nil {
			t.Fatalf("decoded %#v but cannot encode it: %v", fr, err)
		}
		fr2, err := ReadFrame(bytes.NewReader(enc), uint32(len(enc)))
		if err != nil {
			t.Fatalf("re-decode of % x: %v", enc, err)
		}
		enc2, err := AppendFrame(nil, fr2)
		if err != nil || !bytes.Equal(enc, enc2) {
			t.Fatalf("encoding not stable:\n% x\n% x (%v)", enc, enc2, err)
		}
	})
}

func FuzzMessage(f *testing.F) {
	for _, m := range fuzzSeedMessages() {
		b, err := m.MarshalBinary()
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var m Message
		if err := m.UnmarshalBinary(data); err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("error does not wrap ErrMalformed: %v", err)
			}
			return
		}
		if len(m.Data) > 0 {
			if _, err := SplitBatch(&m); err != nil && !errors.Is(err, ErrMalformed) {
				t.Fatalf("SplitBatch error does not wrap ErrMalformed: %v", err)
			}
		}
		enc, err := m.MarshalBinary()
		if err != nil {
			t.Fatalf("decoded %#v but cannot encode it: %v", m, err)
		}
		var m2 Message
		if err := m2.UnmarshalBinary(enc); err != nil {
			t.Fatalf("re-decode of % x: %v", enc, err)
		}
		enc2, err := m2.MarshalBinary()
		if err != nil || !bytes.Equal(enc, enc2) {
			t.Fatalf("encoding not stable:\n% x\n% x (%v)", enc, enc2, err)
		}
	})
}

func fuzzSeedValues() []any {
	now := time.UnixMilli(1700000000123).UTC()
	return []any{
		nil, true, uint8(1), uint16(2), uint32(300), uint64(1 << 40), int8(-1), int16(-300), int32(-70000),
		int64(-1 << 40), float32(1.5), 2.5, Decimal32{1}, Decimal64{2}, Decimal128{3}, Char('x'), now, UUID{1},
		[]byte("bin"), "str", Symbol("sym"), []any{uint32(1), "a", []any{}}, Map{{Symbol("k"), int64(1)}},
		Array{Symbol("a"), Symbol("b")}, Array{[]any{true}}, Array{Map{}}, Array{Array{uint8(1)}},
		Array{&Described{uint64(1), "x"}}, &Described{Symbol("d"), Map{{"k", []any{nil}}}},
		&Source{Address: "q", Filter: Map{{Symbol("f"), &Described{Symbol("apache.org:selector-filter:string"), "1=1"}}}},
	}
}

func fuzzSeedFrames() []Frame {
	m := fullMessage()
	payload, _ := m.MarshalBinary()
	var frames []Frame
	for _, p := range []Performative{
		&Open{ContainerID: "c", MaxFrameSize: Ptr(uint32(65536)), ChannelMax: Ptr(uint16(10)), IdleTimeOut: Ptr(uint32(60000)),
			Properties: Map{{Symbol("product"), "sbtest"}}},
		&Begin{RemoteChannel: Ptr(uint16(0)), NextOutgoingID: 1, IncomingWindow: 5000, OutgoingWindow: 5000, HandleMax: Ptr(uint32(255))},
		&Attach{Name: "n", Handle: 1, Role: RoleReceiver, SndSettleMode: Ptr(SenderSettleUnsettled),
			RcvSettleMode: Ptr(ReceiverSettleSecond), Source: &Source{Address: "q", Filter: Map{{Symbol("f"), &Described{uint64(1), "x"}}}},
			Target: &Target{Address: "c"}, MaxMessageSize: 1 << 20, Properties: Map{{Symbol("com.microsoft:timeout"), uint32(60000)}}},
		&Flow{IncomingWindow: 1, NextOutgoingID: 2, OutgoingWindow: 3, Handle: Ptr(uint32(1)), LinkCredit: Ptr(uint32(100)), Drain: true},
		&Disposition{Role: RoleReceiver, First: 1, Last: Ptr(uint32(3)), Settled: true,
			State: &Rejected{Error: &Error{Condition: "com.microsoft:dead-letter", Info: Map{{Symbol("DeadLetterReason"), "r"}}}}},
		&Disposition{Role: RoleReceiver, First: 1, State: &Modified{UndeliverableHere: true, MessageAnnotations: Map{}}},
		&Detach{Handle: 1, Closed: true, Error: &Error{Condition: "amqp:not-found", Description: "no"}},
		&End{}, &Close{Error: &Error{Condition: "amqp:internal-error"}},
	} {
		frames = append(frames, Frame{Type: FrameTypeAMQP, Channel: 1, Body: p})
	}
	frames = append(frames,
		Frame{Type: FrameTypeAMQP},
		Frame{Type: FrameTypeAMQP, Body: &Transfer{Handle: 1, DeliveryID: Ptr(uint32(7)), DeliveryTag: make([]byte, 16),
			MessageFormat: Ptr(MessageFormatBatch), State: &Accepted{}}, Payload: payload},
		Frame{Type: FrameTypeSASL, Body: &SASLMechanisms{Mechanisms: []Symbol{"ANONYMOUS"}}},
		Frame{Type: FrameTypeSASL, Body: &SASLInit{Mechanism: "ANONYMOUS", Hostname: "h"}},
		Frame{Type: FrameTypeSASL, Body: &SASLOutcome{Code: SASLCodeOK}},
	)
	return frames
}

func fuzzSeedMessages() []*Message {
	batch, _ := MakeBatch([]*Message{fullMessage(), {Data: [][]byte{[]byte("x")}}})
	return []*Message{
		fullMessage(), {}, batch,
		{Sequence: [][]any{{"a"}, {}}},
		{Value: Map{{"k", Array{int64(1)}}}, HasValue: true},
		{Properties: &Properties{MessageID: uint64(1), CorrelationID: UUID{1}}},
	}
}
