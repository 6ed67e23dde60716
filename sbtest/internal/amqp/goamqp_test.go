package amqp

// Cross-check against github.com/Azure/go-amqp, the AMQP library inside the Service Bus
// SDK: messages encoded by its public API decode here with the expected AMQP types, and
// messages encoded here decode there. Test-only import.

import (
	"bytes"
	"reflect"
	"testing"
	"time"

	goamqp "github.com/Azure/go-amqp"
)

// sdkLikeMessage is a go-amqp message shaped like the ones azservicebus sends and
// receives (see the SDK's message.go and amqp_message.go).
func sdkLikeMessage() *goamqp.Message {
	now := time.UnixMilli(1700000000123).UTC()
	str := func(s string) *string { return &s }
	seq := uint32(5)
	return &goamqp.Message{
		Header: &goamqp.MessageHeader{Durable: true, Priority: 4, TTL: 90 * time.Second, DeliveryCount: 3},
		DeliveryAnnotations: goamqp.Annotations{
			"x-opt-delivery": "d",
		},
		Annotations: goamqp.Annotations{
			"x-opt-scheduled-enqueue-time": now,
			"x-opt-partition-key":          "pk",
			"x-opt-sequence-number":        int64(1234567890123),
			"x-opt-locked-until":           now.Add(time.Minute),
			"x-opt-message-state":          int32(2),
			int64(7):                       "numeric key",
		},
		Properties: &goamqp.MessageProperties{
			MessageID:          "0f8fad5b-d9cb-469f-a165-70867728950e",
			UserID:             []byte("user"),
			To:                 str("queue"),
			Subject:            str("label"),
			ReplyTo:            str("replies"),
			CorrelationID:      "corr",
			ContentType:        str("application/json"),
			ContentEncoding:    str("utf-8"),
			AbsoluteExpiryTime: &now,
			CreationTime:       &now,
			GroupID:            str("session-1"),
			GroupSequence:      &seq,
			ReplyToGroupID:     str("reply-session"),
		},
		ApplicationProperties: map[string]any{
			"string": "v", "int64": int64(-5), "int32": int32(7), "bool": true, "float64": 2.5,
			"time": now, "bytes": []byte{1, 2}, "uint8": uint8(1), "int16": int16(-2),
		},
		Data:   [][]byte{[]byte(`{"hello":"world"}`)},
		Footer: goamqp.Annotations{"f": "footer"},
	}
}

// TestGoAMQPMessageDecodes encodes with go-amqp and checks the AMQP types this package sees.
func TestGoAMQPMessageDecodes(t *testing.T) {
	src := sdkLikeMessage()
	b, err := src.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	var m Message
	if err := m.UnmarshalBinary(b); err != nil {
		t.Fatalf("UnmarshalBinary(go-amqp bytes): %v\n% x", err, b)
	}
	now := time.UnixMilli(1700000000123).UTC()
	wantHeader := &Header{Durable: true, TTL: Ptr(uint32(90000)), DeliveryCount: 3}
	if !reflect.DeepEqual(m.Header, wantHeader) {
		t.Errorf("Header = %+v, want %+v", m.Header, wantHeader)
	}
	checkMap := func(name string, got Map, want map[any]any) {
		t.Helper()
		if len(got) != len(want) {
			t.Errorf("%s has %d entries, want %d: %#v", name, len(got), len(want), got)
		}
		for k, v := range want {
			g, ok := got.Get(k)
			if !ok {
				t.Errorf("%s: key %#v missing (keys: %#v)", name, k, got)
				continue
			}
			if !reflect.DeepEqual(g, v) {
				t.Errorf("%s[%#v] = %#v (%T), want %#v (%T)", name, k, g, g, v, v)
			}
		}
	}
	// go-amqp writes string annotation keys as symbols and int keys as long.
	checkMap("MessageAnnotations", m.MessageAnnotations, map[any]any{
		Symbol("x-opt-scheduled-enqueue-time"): now,
		Symbol("x-opt-partition-key"):          "pk",
		Symbol("x-opt-sequence-number"):        int64(1234567890123),
		Symbol("x-opt-locked-until"):           now.Add(time.Minute),
		Symbol("x-opt-message-state"):          int32(2),
		int64(7):                               "numeric key",
	})
	checkMap("DeliveryAnnotations", m.DeliveryAnnotations, map[any]any{Symbol("x-opt-delivery"): "d"})
	checkMap("Footer", m.Footer, map[any]any{Symbol("f"): "footer"})
	// Application properties have string keys.
	checkMap("ApplicationProperties", m.ApplicationProperties, map[any]any{
		"string": "v", "int64": int64(-5), "int32": int32(7), "bool": true, "float64": 2.5,
		"time": now, "bytes": []byte{1, 2}, "uint8": uint8(1), "int16": int16(-2),
	})
	wantProps := &Properties{
		MessageID: "0f8fad5b-d9cb-469f-a165-70867728950e", UserID: []byte("user"), To: Ptr("queue"),
		Subject: Ptr("label"), ReplyTo: Ptr("replies"), CorrelationID: "corr",
		ContentType: Ptr(Symbol("application/json")), ContentEncoding: Ptr(Symbol("utf-8")),
		AbsoluteExpiryTime: &now, CreationTime: &now, GroupID: Ptr("session-1"), GroupSequence: Ptr(uint32(5)),
		ReplyToGroupID: Ptr("reply-session"),
	}
	if !reflect.DeepEqual(m.Properties, wantProps) {
		t.Errorf("Properties =\n%#v\nwant\n%#v", m.Properties, wantProps)
	}
	if len(m.Data) != 1 || string(m.Data[0]) != `{"hello":"world"}` {
		t.Errorf("Data = %q", m.Data)
	}

	// Re-encoded here, go-amqp reads back the same message.
	ours, err := m.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	var back goamqp.Message
	if err := back.UnmarshalBinary(ours); err != nil {
		t.Fatalf("go-amqp UnmarshalBinary(ours): %v\n% x", err, ours)
	}
	if !reflect.DeepEqual(back.Header, src.Header) || !reflect.DeepEqual(utcProps(back.Properties), src.Properties) ||
		!reflect.DeepEqual(utc(back.ApplicationProperties), src.ApplicationProperties) ||
		!reflect.DeepEqual(utc(back.Annotations), src.Annotations) || !reflect.DeepEqual(utc(back.DeliveryAnnotations), src.DeliveryAnnotations) ||
		!reflect.DeepEqual(utc(back.Footer), src.Footer) || !reflect.DeepEqual(back.Data, src.Data) {
		t.Errorf("go-amqp decoded our re-encoding as\n%#v\nwant\n%#v", back, src)
	}
}

// TestGoAMQPDecodesOurs encodes here, in the shapes the emulator sends to the SDK, and
// checks go-amqp's view.
func TestGoAMQPDecodesOurs(t *testing.T) {
	now := time.UnixMilli(1700000000123).UTC()
	lockToken := UUID{0x5b, 0xad, 0x8f, 0x0f, 0xcb, 0xd9, 0x9f, 0x46, 0xa1, 0x65, 0x70, 0x86, 0x77, 0x28, 0x95, 0x0e}
	tests := []struct {
		name  string
		m     *Message
		check func(t *testing.T, g *goamqp.Message)
	}{
		{"received message", &Message{
			Header: &Header{DeliveryCount: 1, TTL: Ptr(uint32(60000))},
			MessageAnnotations: Map{
				{Symbol("x-opt-sequence-number"), int64(42)},
				{Symbol("x-opt-enqueued-time"), now},
				{Symbol("x-opt-locked-until"), now.Add(30 * time.Second)},
				{Symbol("x-opt-lock-token"), lockToken},
				{Symbol("x-opt-deadletter-source"), "q"},
			},
			Properties: &Properties{MessageID: "m1", ContentType: Ptr(Symbol("text/plain")), CreationTime: &now,
				CorrelationID: uint64(9)},
			ApplicationProperties: Map{{"DeadLetterReason", "r"}, {"n", int32(-1)}},
			Data:                  [][]byte{[]byte("body")},
		}, func(t *testing.T, g *goamqp.Message) {
			if g.Header == nil || g.Header.DeliveryCount != 1 || g.Header.TTL != time.Minute || g.Header.Priority != 4 {
				t.Errorf("Header = %+v", g.Header)
			}
			want := goamqp.Annotations{
				"x-opt-sequence-number":   int64(42),
				"x-opt-enqueued-time":     now,
				"x-opt-locked-until":      now.Add(30 * time.Second),
				"x-opt-lock-token":        goamqp.UUID(lockToken),
				"x-opt-deadletter-source": "q",
			}
			if !reflect.DeepEqual(utc(g.Annotations), want) {
				t.Errorf("Annotations = %#v\nwant %#v", g.Annotations, want)
			}
			if g.Properties.MessageID != "m1" || *g.Properties.ContentType != "text/plain" ||
				!g.Properties.CreationTime.Equal(now) || g.Properties.CorrelationID != uint64(9) {
				t.Errorf("Properties = %+v", g.Properties)
			}
			if g.ApplicationProperties["DeadLetterReason"] != "r" || g.ApplicationProperties["n"] != int32(-1) {
				t.Errorf("ApplicationProperties = %#v", g.ApplicationProperties)
			}
			if len(g.Data) != 1 || string(g.Data[0]) != "body" {
				t.Errorf("Data = %q", g.Data)
			}
		}},
		{"management response value", &Message{
			Properties:            &Properties{CorrelationID: "req-1"},
			ApplicationProperties: Map{{"statusCode", int32(200)}, {"statusDescription", "OK"}},
			Value:                 Map{{"expirations", Array{now}}, {"sequence-numbers", Array{int64(1), int64(2)}}},
			HasValue:              true,
		}, func(t *testing.T, g *goamqp.Message) {
			if g.ApplicationProperties["statusCode"] != int32(200) {
				t.Errorf("statusCode = %#v", g.ApplicationProperties["statusCode"])
			}
			v, ok := g.Value.(map[string]any)
			if !ok {
				t.Fatalf("Value = %#v (%T)", g.Value, g.Value)
			}
			if exp, ok := v["expirations"].([]time.Time); !ok || len(exp) != 1 || !exp[0].Equal(now) {
				t.Errorf("expirations = %#v", v["expirations"])
			}
			if seq, ok := v["sequence-numbers"].([]int64); !ok || !reflect.DeepEqual(seq, []int64{1, 2}) {
				t.Errorf("sequence-numbers = %#v", v["sequence-numbers"])
			}
		}},
		{"empty header", &Message{Header: &Header{}, Data: [][]byte{{}}}, func(t *testing.T, g *goamqp.Message) {
			if g.Header == nil || g.Header.Durable || g.Header.Priority != 4 {
				t.Errorf("Header = %+v", g.Header)
			}
		}},
		{"sequence", &Message{Sequence: [][]any{{"a", int64(1)}}}, func(t *testing.T, g *goamqp.Message) {
			if !reflect.DeepEqual(g.Sequence, [][]any{{"a", int64(1)}}) {
				t.Errorf("Sequence = %#v", g.Sequence)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := tt.m.MarshalBinary()
			if err != nil {
				t.Fatal(err)
			}
			var g goamqp.Message
			if err := g.UnmarshalBinary(b); err != nil {
				t.Fatalf("go-amqp UnmarshalBinary: %v\n% x", err, b)
			}
			tt.check(t, &g)
		})
	}
}

// TestGoAMQPBatch splits a batch built the way azservicebus builds MessageBatch: the first
// message's properties as the envelope, one data section per go-amqp-encoded message.
func TestGoAMQPBatch(t *testing.T) {
	var data [][]byte
	for _, id := range []string{"a", "b", "c"} {
		m := &goamqp.Message{Properties: &goamqp.MessageProperties{MessageID: id},
			ApplicationProperties: map[string]any{"id": id}, Data: [][]byte{[]byte("body-" + id)}}
		b, err := m.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		data = append(data, b)
	}
	env := &goamqp.Message{Properties: &goamqp.MessageProperties{MessageID: "a"}, Data: data, Format: MessageFormatBatch}
	b, err := env.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	var m Message
	if err := m.UnmarshalBinary(b); err != nil {
		t.Fatal(err)
	}
	msgs, err := SplitBatch(&m)
	if err != nil {
		t.Fatal(err)
	}
	if len(msgs) != 3 {
		t.Fatalf("%d messages", len(msgs))
	}
	for i, id := range []string{"a", "b", "c"} {
		got := msgs[i]
		if got.Properties.MessageID != id || !bytes.Equal(got.Data[0], []byte("body-"+id)) {
			t.Errorf("message %d = %+v", i, got)
		}
		if v, _ := got.ApplicationProperties.Get("id"); v != id {
			t.Errorf("message %d id property = %#v", i, v)
		}
	}
}

// utc returns v with every time.Time (go-amqp decodes timestamps in time.Local) in UTC,
// for comparisons with reflect.DeepEqual.
func utc(v any) any {
	switch v := v.(type) {
	case time.Time:
		return v.UTC()
	case goamqp.Annotations:
		out := goamqp.Annotations{}
		for k, e := range v {
			out[k] = utc(e)
		}
		return out
	case map[string]any:
		out := map[string]any{}
		for k, e := range v {
			out[k] = utc(e)
		}
		return out
	}
	return v
}

// utcProps returns a copy of p with its timestamps in UTC.
func utcProps(p *goamqp.MessageProperties) *goamqp.MessageProperties {
	if p == nil {
		return nil
	}
	c := *p
	for _, tp := range []**time.Time{&c.AbsoluteExpiryTime, &c.CreationTime} {
		if *tp != nil {
			t := (*tp).UTC()
			*tp = &t
		}
	}
	return &c
}
