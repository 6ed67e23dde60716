package pgoutbox_test

import (
	"slices"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/sbkit/sbkit/outbox/pgoutbox"
	"github.com/sbkit/sbkit/sbtest"
	"github.com/sbkit/sbkit/sender"
)

// TestWaitingRowsTakeNoSenderWindow: the rows of a session that wait for earlier rows of
// the session wait in the relay, outside the sender's window, which is left to what can
// go on the wire. Session s's first request hangs (until the sender's AttemptTimeout,
// then it is retried); s's next two rows, claimed meanwhile, wait for it; session t's
// rows, claimed after them, are sent at once and stored first. When s's waiting rows
// counted against the window (MaxInFlightMessages 4: s's two on the wire and two
// waiting), t's rows waited for room until s's retry, and were stored after s's first.
func TestWaitingRowsTakeNoSenderWindow(t *testing.T) {
	e := newEnv(t)
	q := e.queue("q", &sbtest.EntityOptions{RequiresSession: true})
	q.InjectFault(sbtest.Fault{Op: sbtest.OpSend, Count: 1, Hang: true})
	var want []string
	var msgs []*azservicebus.Message
	for _, m := range []struct{ id, session string }{{"s1", "s"}, {"s2", "s"}, {"s3", "s"}, {"s4", "s"}, {"t1", "t"}, {"t2", "t"}} {
		msgs = append(msgs, &azservicebus.Message{MessageID: ptr(m.id), SessionID: ptr(m.session), Body: []byte(m.id)})
		want = append(want, m.id)
	}
	e.add("q", msgs...) // committed before the relay starts: claims of 2 rows take s1-s2, s3-s4, t1-t2
	r, _ := e.relay(&pgoutbox.RelayOptions{ClaimBatch: 2,
		Sender: &sender.Options{MaxInFlightMessages: 4, AttemptTimeout: time.Second}})
	e.drained(r)
	active := q.Active()
	slices.SortFunc(active, func(a, b *azservicebus.ReceivedMessage) int { return int(*a.SequenceNumber - *b.SequenceNumber) })
	var got []string
	for _, m := range active {
		got = append(got, m.MessageID)
	}
	// t's rows first; each session's in its order.
	if !slices.Equal(got, []string{"t1", "t2", "s1", "s2", "s3", "s4"}) {
		t.Errorf("stored %v, want t1 t2 s1 s2 s3 s4 (added as %v)", got, want)
	}
}
