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
// window of the given messages, and no handOver goroutine (the test gives the rows
// itself). Its senders are closed when the test ends.
func newGiveRun(t *testing.T, dst sbkit.MessageSender, window int) *run {
	t.Helper()
	r, err := NewRelay(&Outbox{}, func(string) (sbkit.MessageSender, error) { return dst, nil },
		&RelayOptions{Sender: &sender.Options{MaxInFlightMessages: window}})
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

// outcomesSoFar returns the outcomes c's rows have so far.
func (c *claim) outcomesSoFar() []outcome {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.outcomes)
}

// TestRowEndedAfterRoomIsReleased: a row whose context ends after it found room in the
// sender's window, but before the sender took it (its round waited for sendMu), is
// rejected by the sender with its context's error. It was never sent: it is released,
// with no attempt charged and no backoff, not retried.
func TestRowEndedAfterRoomIsReleased(t *testing.T) {
	u := newGiveRun(t, nopSender{}, 1)
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
	outcomes := rw.claim.outcomesSoFar()
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
		u := newGiveRun(t, dst, 1)
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

// holdSender is a destination whose sends wait until release is closed; entered
// receives each message's ID as its send starts.
type holdSender struct {
	entered chan string
	release chan struct{}
}

func (s *holdSender) SendMessage(ctx context.Context, m *azservicebus.Message, _ *azservicebus.SendMessageOptions) error {
	s.entered <- *m.MessageID
	select {
	case <-s.release:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// TestRowAcceptedNeverSentIsReleased: a row the sender accepted but never sent (it
// waited in its session's lane behind an earlier row) when its context ends has its
// outcome with no attempt: it is released, with no attempt charged and no backoff, as a
// row the sender rejected is. The sender counts an attempt before each request, so 0
// attempts means the message never reached the broker.
func TestRowAcceptedNeverSentIsReleased(t *testing.T) {
	dst := &holdSender{entered: make(chan string, 2), release: make(chan struct{})}
	u := newGiveRun(t, dst, 2)
	rows := newClaimRows(context.Background(), "s1", "s2")
	ctx, cancel := context.WithCancelCause(context.Background())
	rows[1].ctx = ctx
	u.lmu.Lock()
	for _, rw := range rows {
		rw.msg.SessionID = new("s")
		u.fitLocked(rw)
	}
	u.lmu.Unlock()
	u.sendRows(rows)
	if id := <-dst.entered; id != "s1" {
		t.Fatalf("sent %s first, want s1", id)
	}
	cancel(errLeaseEnding) // half the claim's lease is over while s2 waits in its lane
	close(dst.release)
	for _, d := range u.destList() {
		_ = d.s.Close(context.Background()) // every outcome is reported
	}
	outcomes := rows[0].claim.outcomesSoFar()
	if len(outcomes) != 2 {
		t.Fatalf("%d outcomes, want 2", len(outcomes))
	}
	for _, oc := range outcomes {
		want := outcomeSent
		if oc.row == rows[1] {
			want = outcomeReleased
		}
		if oc.kind != want || oc.delay != 0 {
			t.Errorf("%s: outcome %v (delay %v, err %v), want %v", *oc.row.msg.MessageID, oc.kind, oc.delay, oc.err, want)
		}
	}
}
