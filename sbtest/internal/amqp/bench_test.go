package amqp

import (
	"bytes"
	"testing"
	"time"
)

// serviceBusMessage is a typical received Service Bus message: 1 KiB body, the broker's
// annotations, a few application properties.
func serviceBusMessage() *Message {
	now := time.UnixMilli(1700000000123).UTC()
	return &Message{
		Header: &Header{DeliveryCount: 1},
		MessageAnnotations: Map{
			{Symbol("x-opt-sequence-number"), int64(123456)},
			{Symbol("x-opt-enqueued-time"), now},
			{Symbol("x-opt-locked-until"), now.Add(time.Minute)},
			{Symbol("x-opt-partition-key"), "customer-42"},
		},
		Properties: &Properties{MessageID: "0f8fad5b-d9cb-469f-a165-70867728950e",
			ContentType: Ptr(Symbol("application/json")), CorrelationID: "corr-1", Subject: Ptr("order.created")},
		ApplicationProperties: Map{{"tenant", "acme"}, {"attempt", int32(1)}, {"traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}},
		Data:                  [][]byte{bytes.Repeat([]byte("x"), 1024)},
	}
}

func BenchmarkMessageMarshal(b *testing.B) {
	m := serviceBusMessage()
	buf, _ := m.MarshalBinary()
	b.SetBytes(int64(len(buf)))
	b.ReportAllocs()
	for b.Loop() {
		var err error
		if buf, err = m.AppendBinary(buf[:0]); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkMessageUnmarshal(b *testing.B) {
	buf, err := serviceBusMessage().MarshalBinary()
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(buf)))
	b.ReportAllocs()
	for b.Loop() {
		var m Message
		if err := m.UnmarshalBinary(buf); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkTransferFrame encodes and decodes the transfer frame that carries the message.
func BenchmarkTransferFrame(b *testing.B) {
	payload, err := serviceBusMessage().MarshalBinary()
	if err != nil {
		b.Fatal(err)
	}
	f := Frame{Type: FrameTypeAMQP, Channel: 1, Body: &Transfer{Handle: 1, DeliveryID: Ptr(uint32(99)),
		DeliveryTag: make([]byte, 16), MessageFormat: Ptr(uint32(0))}, Payload: payload}
	var buf []byte
	r := bytes.NewReader(nil)
	b.SetBytes(int64(len(payload)))
	b.ReportAllocs()
	for b.Loop() {
		if buf, err = AppendFrame(buf[:0], f); err != nil {
			b.Fatal(err)
		}
		r.Reset(buf)
		if _, err := ReadFrame(r, 1<<16); err != nil {
			b.Fatal(err)
		}
	}
}
