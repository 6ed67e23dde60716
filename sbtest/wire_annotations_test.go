package sbtest

import (
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	goamqp "github.com/Azure/go-amqp"
	"github.com/sbkit/sbkit/sbtest/internal/amqp"
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

// A delivered message never has a key twice in its annotations (AMQP 1.0 part 1.6.23:
// a map's keys are unique), whatever the stored raw sections hold, string or symbol.
func TestFromReceivedUniqueAnnotationKeys(t *testing.T) {
	seq, now, token := int64(5), time.Now(), [16]byte{1}
	rm := &azservicebus.ReceivedMessage{SequenceNumber: &seq, EnqueuedTime: &now, LockedUntil: &now, LockToken: token,
		RawAMQPMessage: &azservicebus.AMQPAnnotatedMessage{
			MessageAnnotations:  map[any]any{"x-opt-sequence-number": int64(1), amqp.Symbol("x-opt-locked-until"): now, "other": 1},
			DeliveryAnnotations: map[any]any{"x-opt-lock-token": amqp.UUID{9}, amqp.Symbol("x-opt-lock-token"): amqp.UUID{8}},
		}}
	m := fromReceived(rm, true)
	for name, mp := range map[string]amqp.Map{"message": m.MessageAnnotations, "delivery": m.DeliveryAnnotations} {
		seen := map[string]bool{}
		for _, e := range mp {
			k, _ := keyString(e.Key)
			if seen[k] {
				t.Errorf("%s annotations have %q twice: %v", name, k, mp)
			}
			seen[k] = true
		}
	}
	if v, _ := m.DeliveryAnnotations.Get(annLockToken); v != amqp.UUID(token) {
		t.Errorf("x-opt-lock-token %v, want the broker's %x", v, token)
	}
}
