package sbtest

import (
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	goamqp "github.com/Azure/go-amqp"
)

// A client's annotations named like the broker's own (x-opt-lock-token,
// x-opt-sequence-number, x-opt-locked-until, ...) are replaced by the broker's: the
// consumer's lock token is the one the broker issued, so renewing and completing work
// ("AMQP 1.0 in Azure Service Bus and Event Hubs protocol guide", message annotations),
// as for an application that re-sends a RawAMQPMessage it received.
func TestServerBrokerAnnotationsReplaceClients(t *testing.T) {
	t.Parallel()
	w := newWire(t, &ServerOptions{Queues: map[string]*EntityOptions{"q": nil}})
	ctx := wireCtx(t)
	forged := [16]byte{0xde, 0xad, 0xbe, 0xef, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}
	m := &azservicebus.AMQPAnnotatedMessage{
		Body:                azservicebus.AMQPAnnotatedMessageBody{Data: [][]byte{[]byte("x")}},
		DeliveryAnnotations: map[any]any{"x-opt-lock-token": goamqp.UUID(forged), "custom-delivery": "kept"},
		MessageAnnotations: map[any]any{"x-opt-sequence-number": int64(999999), "x-opt-locked-until": time.Unix(4e9, 0),
			"x-opt-enqueued-time": time.Unix(0, 0), "custom": "kept"},
	}
	if err := w.sender(t, "q").SendAMQPAnnotatedMessage(ctx, m, nil); err != nil {
		t.Fatal(err)
	}
	r := w.receiver(t, "q", nil)
	got := receiveN(t, r, 1)[0]
	if got.LockToken == forged {
		t.Fatalf("the consumer sees the sender's forged lock token %x", forged)
	}
	if got.SequenceNumber == nil || *got.SequenceNumber == 999999 || got.LockedUntil == nil || got.LockedUntil.Year() > 2100 ||
		got.EnqueuedTime == nil || got.EnqueuedTime.Year() < 2000 {
		t.Errorf("sequence number %v, locked until %v, enqueued %v: want the broker's", got.SequenceNumber, got.LockedUntil, got.EnqueuedTime)
	}
	if got.RawAMQPMessage.DeliveryAnnotations["custom-delivery"] != "kept" || got.RawAMQPMessage.MessageAnnotations["custom"] != "kept" {
		t.Errorf("annotations %v, %v: want the client's others kept", got.RawAMQPMessage.DeliveryAnnotations, got.RawAMQPMessage.MessageAnnotations)
	}
	if err := r.RenewMessageLock(ctx, got, nil); err != nil {
		t.Fatalf("renewing the received lock: %v", err)
	}
	if err := r.CompleteMessage(ctx, got, nil); err != nil {
		t.Fatalf("completing: %v", err)
	}
	w.oneConnection(t)
}
