package sbtest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"runtime"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
)

func wantSDKCode(t *testing.T, what string, err error, code azservicebus.Code) {
	t.Helper()
	var sbErr *azservicebus.Error
	if !errors.As(err, &sbErr) || sbErr.Code != code {
		t.Errorf("%s: %v, want code %q", what, err, code)
	}
}

// The service answers the $cbs put-token for a missing entity with 404, which the SDK
// reports as CodeNotFound (azure-sdk-for-go#24499); an existing topic's missing
// subscription and dead-letter queue too.
func TestServerMissingEntityNotFound(t *testing.T) {
	w := newWire(t, &ServerOptions{Topics: map[string]TopicOptions{"t": {Subscriptions: map[string]*EntityOptions{"s": nil}}}})
	ctx := wireCtx(t)
	r, err := w.client.NewReceiverForSubscription("t", "nope", nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = r.ReceiveMessages(ctx, 1, nil)
	wantSDKCode(t, "receive from a missing subscription", err, azservicebus.CodeNotFound)
	r, err = w.client.NewReceiverForQueue("nope", &azservicebus.ReceiverOptions{SubQueue: azservicebus.SubQueueDeadLetter})
	if err != nil {
		t.Fatal(err)
	}
	_, err = r.PeekMessages(ctx, 1, nil)
	wantSDKCode(t, "peek a missing queue's dead-letter queue", err, azservicebus.CodeNotFound)
	// The existing ones still work.
	if err := w.sender(t, "t").SendMessage(ctx, &azservicebus.Message{Body: []byte("x")}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := w.client.NewReceiverForSubscription("t", "s", nil); err != nil {
		t.Fatal(err)
	}
	w.oneConnection(t)
}

// Close(ctx) returns by ctx's end; a later Close waits for the rest and returns nil.
func TestServerCloseHonoursContext(t *testing.T) {
	base := runtime.NumGoroutine()
	srv, err := NewServer(nil)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := net.Dial("tcp", srv.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := srv.Close(ctx); err != nil && !errors.Is(err, context.Canceled) {
		t.Fatalf("Close with an ended context: %v, want nil or context.Canceled", err)
	}
	if err := srv.Close(context.Background()); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	noGoroutinesAbove(t, base)
}

// Raw AMQP messages come back as sent: value and sequence bodies, several data sections,
// message and delivery annotations, footer, priority (SDK live tests
// TestSender_SendAMQPMessageWithMultipleByteSlicesInData, ...WithValue, ...WithSequence),
// on one connection (a valid frame never costs the connection).
func TestServerRawAMQPFidelity(t *testing.T) {
	w := newWire(t, &ServerOptions{Queues: map[string]*EntityOptions{"q": nil}})
	ctx := wireCtx(t)
	s := w.sender(t, "q")
	bodies := []azservicebus.AMQPAnnotatedMessageBody{
		{Value: "a value"},
		{Sequence: [][]any{{"one", int64(2)}, {true}}},
		{Data: [][]byte{[]byte("part1"), []byte("part2")}},
	}
	for _, b := range bodies {
		m := &azservicebus.AMQPAnnotatedMessage{
			Body:                b,
			MessageAnnotations:  map[any]any{"custom-annotation": "kept"},
			DeliveryAnnotations: map[any]any{"custom-delivery": int64(7)},
			Footer:              map[any]any{"custom-footer": "f"},
			Header:              &azservicebus.AMQPAnnotatedMessageHeader{Priority: 9},
		}
		if err := s.SendAMQPAnnotatedMessage(ctx, m, nil); err != nil {
			t.Fatalf("send %+v: %v", b, err)
		}
	}
	r := w.receiver(t, "q", &azservicebus.ReceiverOptions{ReceiveMode: azservicebus.ReceiveModeReceiveAndDelete})
	got := receiveN(t, r, 3)
	for i, rm := range got {
		raw := rm.RawAMQPMessage
		want := bodies[i]
		if fmt.Sprint(raw.Body.Value) != fmt.Sprint(want.Value) || fmt.Sprint(raw.Body.Sequence) != fmt.Sprint(want.Sequence) ||
			(want.Data != nil && fmt.Sprint(raw.Body.Data) != fmt.Sprint(want.Data)) {
			t.Errorf("message %d: body %+v, want %+v", i, raw.Body, want)
		}
		if raw.MessageAnnotations["custom-annotation"] != "kept" || raw.MessageAnnotations["x-opt-sequence-number"] == nil {
			t.Errorf("message %d: annotations %v, want the client's and the broker's", i, raw.MessageAnnotations)
		}
		if raw.DeliveryAnnotations["custom-delivery"] != int64(7) || raw.Footer["custom-footer"] != "f" || raw.Header == nil || raw.Header.Priority != 9 {
			t.Errorf("message %d: delivery annotations %v, footer %v, header %+v", i, raw.DeliveryAnnotations, raw.Footer, raw.Header)
		}
	}
	w.oneConnection(t)
}
