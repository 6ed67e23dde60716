package pgoutbox_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
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

// TestReadyOrderNotStarvedByClaims: when the sender is the bottleneck, the rows of an
// order that waited for its earlier rows go once those have their outcomes, before the
// rows of later claims, and are not retried. Before, every claim's rows were counted in
// the sender's window as they were dispatched, before the sender took them, so the
// window never had room for the waiting rows: they waited until their claim's lease
// ended and came back as retries (attempt charged, backoff), in 3 of 3 runs.
func TestReadyOrderNotStarvedByClaims(t *testing.T) {
	for _, shape := range []string{"transaction", "session"} {
		t.Run(shape, func(t *testing.T) {
			e := newEnv(t)
			e.ns.SetLatency(sbtest.Latency{RoundTrip: 20 * time.Millisecond})
			q := e.queue("q", nil)
			single := func(prefix string, n int) {
				for i := range n {
					e.add("q", msg(fmt.Sprintf("%s%d", prefix, i), "x"))
				}
			}
			single("a", 25)
			var ordered []*azservicebus.Message
			for i := range 12 {
				m := msg(fmt.Sprintf("T%02d", i), "x")
				if shape == "session" {
					m.SessionID = ptr("S")
				}
				ordered = append(ordered, m)
			}
			e.add("q", ordered...)
			single("b", 400)
			var mu sync.Mutex
			var bad []string
			hook := pgoutbox.RelayResultHookFunc(func(_ context.Context, r pgoutbox.RelayResult) {
				if r.Outcome != pgoutbox.OutcomeSent {
					mu.Lock()
					bad = append(bad, fmt.Sprintf("%s: outcome %v attempts %d err %v", r.MessageID, r.Outcome, r.Attempts, r.Err))
					mu.Unlock()
				}
			})
			r, _ := e.relay(&pgoutbox.RelayOptions{ClaimBatch: 10, MaxInFlight: 40, Lease: 4 * time.Second,
				Hooks:  []pgoutbox.Hook{hook},
				Sender: &sender.Options{MaxInFlightMessages: 4, MaxBatchMessages: 2}})
			e.drained(r)
			mu.Lock()
			defer mu.Unlock()
			if len(bad) > 0 {
				t.Errorf("%d rows not sent at their first attempt, e.g. %v", len(bad), bad[:min(3, len(bad))])
			}
			var got []string
			for _, m := range sortedActive(q) {
				if strings.HasPrefix(m.MessageID, "T") {
					got = append(got, m.MessageID)
				}
			}
			if !slices.IsSorted(got) || len(got) != 12 {
				t.Errorf("stored %v, want T00 to T11 in order", got)
			}
		})
	}
}

// sortedActive returns q's active messages in the order the broker stored them.
func sortedActive(q *sbtest.Entity) []*azservicebus.ReceivedMessage {
	active := q.Active()
	slices.SortFunc(active, func(a, b *azservicebus.ReceivedMessage) int { return int(*a.SequenceNumber - *b.SequenceNumber) })
	return active
}

// TestRowNeverGivenIsReleased: a row that waits in the relay for room in the sender's
// window when its claim's lease ends was never sent: it is released, with no attempt
// charged and no backoff. The broker takes 1.5 s to answer m1 (window 1); m2's claim
// ends its sends at 1 s (half the Lease). Before, m2 was blocked in the sender's
// SendAsync, which then failed with the lease's end, and it came back as a retry at
// attempt 1.
func TestRowNeverGivenIsReleased(t *testing.T) {
	e := newEnv(t)
	e.ns.SetLatency(sbtest.Latency{RoundTrip: 1500 * time.Millisecond})
	e.queue("q", nil)
	e.add("q", msg("m1", "x"))
	e.add("q", msg("m2", "x"))
	var mu sync.Mutex
	first := map[string]pgoutbox.RelayResult{}
	hook := pgoutbox.RelayResultHookFunc(func(_ context.Context, r pgoutbox.RelayResult) {
		mu.Lock()
		defer mu.Unlock()
		if _, ok := first[r.MessageID]; !ok {
			first[r.MessageID] = r
		}
	})
	r, _ := e.relay(&pgoutbox.RelayOptions{Lease: 2 * time.Second, Hooks: []pgoutbox.Hook{hook},
		Sender: &sender.Options{MaxInFlightMessages: 1, AttemptTimeout: 10 * time.Second}})
	e.drained(r)
	mu.Lock()
	defer mu.Unlock()
	if m2 := first["m2"]; m2.Outcome != pgoutbox.OutcomeReleased || m2.Attempts != 0 {
		t.Errorf("m2 (never given to the sender): %v attempts %d err %v, want released at attempt 0", m2.Outcome, m2.Attempts, m2.Err)
	}
}
