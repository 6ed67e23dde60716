package sbtest

import (
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
)

// TestServerReleasedOutcome: messages that arrive for the credits a ReceiveMessages call
// left open are released by azservicebus until the next call (receiver.go,
// newReleaserFunc); the released outcome gives them back without a delivery counted
// (AMQP 1.0 part 3.4.4; "Messages, payloads, and serialization" counts a delivery on an
// abandon or a lock's expiry only), and Stats().Released counts them.
func TestServerReleasedOutcome(t *testing.T) {
	t.Parallel()
	w := newWire(t, &ServerOptions{Queues: map[string]*EntityOptions{"q": nil}})
	ctx := wireCtx(t)
	q, _ := w.srv.Namespace().Entity("q")
	r := w.receiver(t, "q", nil)
	w.sendN(t, "q", 1)
	// Ask for 10: one is there, the call returns a millisecond after it, 9 credits open.
	got, err := r.ReceiveMessages(ctx, 10, &azservicebus.ReceiveMessagesOptions{TimeAfterFirstMessage: time.Millisecond})
	if err != nil || len(got) != 1 {
		t.Fatalf("first receive: %d messages, %v", len(got), err)
	}
	w.sendN(t, "q", 3) // sent for the open credits, then released by the SDK
	// A released message is available again at once, so it is sent again for the credits
	// still open and released again, until the 9 open credits are spent.
	eventually(t, "9 releases", func() bool { s := q.Stats(); return s.Released == 9 && s.Received == 10 })
	again := receiveN(t, r, 3)
	for _, m := range again {
		if m.DeliveryCount != 1 {
			t.Fatalf("a released message came back with delivery count %d, want 1", m.DeliveryCount)
		}
		if err := r.CompleteMessage(ctx, m, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.CompleteMessage(ctx, got[0], nil); err != nil {
		t.Fatal(err)
	}
	if s := q.Stats(); s.Released != 9 || s.Completed != 4 || s.Abandoned != 0 {
		t.Fatalf("stats %+v", s)
	}
}
