package wire

import (
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/sbkit/sbkit/sbtest/internal/amqp"
)

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
