package scenario

import (
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/sbkit/sbkit"
	"github.com/sbkit/sbkit/receiver"
)

// ttlExpiry: a message whose time-to-live ran out before anyone received it is never
// delivered, while messages without a TTL, or with a long one, are; and the Expiry
// middleware (dead-lettering expired messages) does not mistake either of those for
// expired, however the backend carries a missing TTL.
func ttlExpiry(t *testing.T, b Backend) {
	q := b.Queue(t, QueueOptions{})
	short, long := 300*time.Millisecond, time.Hour
	withTTL := func(m *azservicebus.Message, ttl time.Duration) *azservicebus.Message {
		if err := sbkit.SetTTL(m, ttl); err != nil {
			t.Fatal(err)
		}
		return m
	}
	sendAll(t, q.NewSender(t), withTTL(message("short", "x"), short), message("none", "y"), withTTL(message("long", "z"), long))
	time.Sleep(2 * short) // let the short TTL run out at the broker
	r := q.NewReceiver(t, azservicebus.ReceiveModePeekLock, false)
	rec := &recorder{}
	h := sbkit.Chain(rec.wrap(ok), receiver.Expiry(&receiver.ExpiryOptions{Policy: receiver.ExpiredDeadLetter}))
	pr := startProcessor(t, r, h, receiver.Options{})
	waitFor(t, "the live messages settled", func() bool {
		st := pr.p.Stats()
		return st.Completed+st.DeadLettered+st.Abandoned >= 2
	})
	st := pr.stop(t, waitTimeout)
	expectEmpty(t, q, r)
	if calls := rec.byID(); len(calls) != 2 || calls["none"] != 1 || calls["long"] != 1 {
		t.Errorf("handler calls by MessageID %v, want none and long once each", calls)
	}
	if st.Received != 2 || st.Completed != 2 || st.DeadLettered != 0 {
		t.Errorf("stats %+v, want 2 received and completed, none dead-lettered", st)
	}
	if q.Properties().Created {
		// The queue does not dead-letter on expiration: the expired message is gone.
		expectEmpty(t, q, q.NewReceiver(t, azservicebus.ReceiveModePeekLock, true))
	}
}
