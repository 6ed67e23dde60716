package pgoutbox

import (
	"context"
	"slices"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/sbkit/sbkit"
	"github.com/sbkit/sbkit/sender"
)

// recordSender is a destination that accepts every message and records the IDs of the
// messages it was given, in order.
type recordSender struct {
	mu  sync.Mutex
	ids []string
}

func (s *recordSender) SendMessage(_ context.Context, m *azservicebus.Message, _ *azservicebus.SendMessageOptions) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ids = append(s.ids, *m.MessageID)
	return nil
}

func (s *recordSender) sent() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.ids)
}

// newGiveRun returns a run, outside any Run, whose destinations all go to dst, with a
// window of one message, and no handOver goroutine (the test gives the rows itself).
// Its senders are closed when the test ends.
func newGiveRun(t *testing.T, dst sbkit.MessageSender) *run {
	t.Helper()
	r, err := NewRelay(&Outbox{}, func(string) (sbkit.MessageSender, error) { return dst, nil },
		&RelayOptions{Sender: &sender.Options{MaxInFlightMessages: 1}})
	if err != nil {
		t.Fatal(err)
	}
	u := &run{r: r, given: map[string]int{}, givenBytes: map[string]int64{}, dests: map[string]*dest{}}
	u.handing = true
	t.Cleanup(func() {
		for _, d := range u.destList() {
			_ = d.s.Close(context.Background())
		}
	})
	return u
}

// newClaimRows returns n rows for destination q of one claim whose other rows have no
// outcome yet, so that no outcome starts its mark.
func newClaimRows(ctx context.Context, ids ...string) []*row {
	c := &claim{rows: make([]*row, len(ids)+1)}
	for i, id := range ids {
		c.rows[i] = &row{id: int64(i + 1), destination: "q", ctx: ctx, claim: c,
			msg: &azservicebus.Message{MessageID: new(id), Body: []byte(id)}}
	}
	c.rows[len(ids)] = &row{}
	return c.rows[:len(ids)]
}

// TestRowEndedAfterRoomIsReleased: a row whose context ends after it found room in the
// sender's window, but before the sender took it (its round waited for sendMu), is
// rejected by the sender with its context's error. It was never sent: it is released,
// with no attempt charged and no backoff, not retried.
func TestRowEndedAfterRoomIsReleased(t *testing.T) {
	u := newGiveRun(t, nopSender{})
	ctx, cancel := context.WithCancelCause(context.Background())
	rw := newClaimRows(ctx, "m1")[0]
	u.lmu.Lock()
	fitted := u.fitLocked(rw)
	u.lmu.Unlock()
	if !fitted {
		t.Fatal("the row found no room in an empty window")
	}
	cancel(errLeaseEnding) // half the claim's lease is over while its round waits for sendMu
	u.sendRows([]*row{rw})
	rw.claim.mu.Lock()
	outcomes := slices.Clone(rw.claim.outcomes)
	rw.claim.mu.Unlock()
	if len(outcomes) != 1 {
		t.Fatalf("%d outcomes, want 1", len(outcomes))
	}
	if oc := outcomes[0]; oc.kind != outcomeReleased || oc.delay != 0 {
		t.Errorf("outcome %v (delay %v, err %v), want released: the sender never took the row, no attempt", oc.kind, oc.delay, oc.err)
	}
	if len(u.given) != 0 {
		t.Errorf("given %v after the row's outcome, want empty", u.given)
	}
}

// TestDispatcherGivesReadyOrdersFirst: when room frees in a full window, the dispatcher
// gives it to the order whose rows are ready before the rows of its claim, even when
// handOver does not run. Window 1: session s's first row is in the sender, its second
// waits for it; a claim's row for the same destination waits for room. s's first row's
// outcome frees the slot: s's second row goes, then the claim's.
func TestDispatcherGivesReadyOrdersFirst(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		dst := &recordSender{}
		u := newGiveRun(t, dst)
		o := &order{dest: "q", okey: "s:s"}
		s := newClaimRows(context.Background(), "s1", "s2")
		for _, rw := range s {
			rw.order = o
		}
		u.hold(s[:1]) // s1, claimed first, goes
		if now := u.hold(s[1:]); len(now) != 0 {
			t.Fatalf("hold gave s2 while s1 is in the sender")
		}
		u.lmu.Lock()
		u.fitLocked(s[0]) // in the sender: the window is full
		u.lmu.Unlock()
		claimRow := newClaimRows(context.Background(), "c1")
		done := make(chan struct{})
		go func() {
			defer close(done)
			u.give(claimRow)
		}()
		synctest.Wait() // the dispatcher waits for room
		if got := dst.sent(); len(got) != 0 {
			t.Fatalf("sent %v while the window was full", got)
		}
		u.left(s[0]) // s1's outcome: s2 is ready
		<-done
		synctest.Wait()
		if got := dst.sent(); !slices.Equal(got, []string{"s2", "c1"}) {
			t.Errorf("sent %v, want s2 (its order ready) then c1 (the claim's)", got)
		}
	})
}
