package pgoutbox_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/sbkit/sbkit/outbox/pgoutbox"
	"github.com/sbkit/sbkit/sbtest"
	"github.com/sbkit/sbkit/sender"
)

// TestCrashAfterCommitBeforeSend: messages committed while no relay runs (the process
// died after the commit) are sent when a relay starts, once each.
func TestCrashAfterCommitBeforeSend(t *testing.T) {
	e := newEnv(t)
	q := e.queue("q", nil)
	e.add("q", msg("a", "1"), msg("b", "2"))
	e.add("q", msg("c", "3"))
	r, _ := e.relay(nil)
	e.drained(r)
	if got := q.Counts().Active; got != 3 {
		t.Fatalf("%d messages at the broker, want 3", got)
	}
	if st := r.Stats(); st.Sent != 3 || st.Claimed != 3 || q.Stats().DuplicatesDropped != 0 {
		t.Fatalf("relay %+v, queue %+v", st, q.Stats())
	}
}

// TestRollbackSendsNothing: messages added in a transaction that rolls back are never
// sent; a later committed message is.
func TestRollbackSendsNothing(t *testing.T) {
	e := newEnv(t)
	q := e.queue("q", nil)
	e.relay(nil)
	ctx := context.Background()
	tx, err := e.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.ob.Add(ctx, tx, "q", msg("ghost", "never")); err != nil {
		t.Fatal(err)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	e.add("q", msg("real", "sent"))
	eventually(t, "the committed message", func() bool { return q.Counts().Active == 1 })
	e.drained()
	if got := q.Active(); len(got) != 1 || got[0].MessageID != "real" {
		t.Fatalf("broker holds %d messages, want only %q", len(got), "real")
	}
}

// claimBackend returns the process id of the database session in which relay r holds
// an open claim (its connection idle in a transaction), or 0 when there is none.
func (e *env) claimBackend(r *pgoutbox.Relay) int {
	e.t.Helper()
	var pid int
	err := e.pool.QueryRow(context.Background(), `SELECT pid FROM pg_stat_activity
		WHERE application_name = $1 AND state = 'idle in transaction'`, r.Owner()).Scan(&pid)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0
	}
	if err != nil {
		e.t.Fatal(err)
	}
	return pid
}

// terminate ends the database session pid, as the server does when the relay that
// owns it dies, and waits until it is gone.
func (e *env) terminate(pid int) {
	e.t.Helper()
	if _, err := e.pool.Exec(context.Background(), `SELECT pg_terminate_backend($1)`, pid); err != nil {
		e.t.Fatal(err)
	}
	eventually(e.t, "the session to end", func() bool {
		var n int
		err := e.pool.QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_activity WHERE pid = $1`, pid).Scan(&n)
		return err == nil && n == 0
	})
}

// TestCrashedRelayTakenOver: a relay that dies while it sends (its send hangs, then its
// database session ends with it) gives its row up at once, long before its Lease: a
// running relay sends it, once.
func TestCrashedRelayTakenOver(t *testing.T) {
	e := newEnv(t)
	leakCheck(t)
	q := e.queue("q", nil)
	var hung atomic.Bool
	a, err := pgoutbox.NewRelay(e.ob, e.destinations, &pgoutbox.RelayOptions{DisableListen: true, Lease: time.Hour,
		Sender: hangOnce(q, &hung)})
	if err != nil {
		t.Fatal(err)
	}
	ranA := make(chan error, 1)
	go func() { ranA <- a.Run(context.Background()) }()
	e.add("q", msg("m1", "once"))
	eventually(t, "relay A to send", hung.Load)
	pid := e.claimBackend(a)
	if pid == 0 {
		t.Fatal("relay A holds no claim")
	}
	claims := e.watchClaims() // relay B's
	b, _ := e.relay(nil)
	claims.wait(e, 2, "relay B to look for rows twice")
	if st := b.Stats(); st.Claimed != 0 {
		t.Fatalf("relay B claimed a row relay A holds: %+v", st)
	}
	e.terminate(pid) // relay A "dies": its session ends, and its claim with it
	eventually(t, "relay B to send the row", func() bool { return b.Stats().Sent == 1 })
	e.drained(b)
	// Relay A's process ends: its hung send is cut, and the mark of its claim fails.
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if err := a.Close(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Close = %v, want the context's error", err)
	}
	if err := <-ranA; err != nil {
		t.Fatal(err)
	}
	if st := a.Stats(); st.Sent != 0 || st.Abandoned != 1 {
		t.Fatalf("relay A %+v", st)
	}
	if active, st := q.Counts().Active, q.Stats(); active != 1 || st.DuplicatesDropped != 0 {
		t.Fatalf("broker: %d messages, %+v", active, st)
	}
}

// blockResult is a sender hook that blocks the result of the message with id until
// release is closed: a relay stuck after the broker accepted the message.
type blockResult struct {
	id      string
	blocked chan struct{}
	release chan struct{}
}

func (h *blockResult) OnSendResult(_ context.Context, ev sender.SendResult) {
	if ev.MessageID == h.id && ev.Err == nil {
		close(h.blocked)
		<-h.release
	}
}

// TestStuckRelayTakenOverAfterLease: a relay that is alive but stuck (it sent the
// message and never comes back to mark it) keeps its claim for a Lease, then
// PostgreSQL ends the claim's transaction and another relay sends the row again; the
// broker drops the copy. The stuck relay's late mark fails and changes nothing.
func TestStuckRelayTakenOverAfterLease(t *testing.T) {
	e := newEnv(t)
	leakCheck(t)
	q := e.queue("q", nil)
	const lease = time.Second
	hook := &blockResult{id: "m1", blocked: make(chan struct{}), release: make(chan struct{})}
	a, err := pgoutbox.NewRelay(e.ob, e.destinations, &pgoutbox.RelayOptions{DisableListen: true, Lease: lease,
		Sender: &sender.Options{Hooks: []sender.Hook{hook}}})
	if err != nil {
		t.Fatal(err)
	}
	ranA := make(chan error, 1)
	go func() { ranA <- a.Run(context.Background()) }()
	e.add("q", msg("m1", "once"))
	<-hook.blocked
	stuck := time.Now()
	b, _ := e.relay(nil)
	eventually(t, "relay B to send the row again", func() bool { return b.Stats().Sent == 1 })
	if took := time.Since(stuck); took < lease/2 {
		t.Fatalf("relay B took the row over %v after relay A got stuck, within half the lease (%v)", took, lease)
	}
	e.drained(b)
	close(hook.release)
	if err := a.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := <-ranA; err != nil {
		t.Fatal(err)
	}
	if st := a.Stats(); st.Sent != 0 || st.Abandoned != 1 || st.DBErrors == 0 {
		t.Fatalf("relay A %+v, want its mark abandoned", st)
	}
	if got, dups := q.Counts().Active, q.Stats().DuplicatesDropped; got != 1 || dups != 1 {
		t.Fatalf("broker holds %d messages and dropped %d duplicates; want 1 and 1", got, dups)
	}
}

// killOnSend is a sender hook that, when the broker accepted the message with id,
// ends the database session of the relay's claim (as a relay crash, or a broken
// connection, would) before the relay learns the outcome.
type killOnSend struct {
	e     *env
	r     *pgoutbox.Relay
	id    string
	fired atomic.Bool
}

func (h *killOnSend) OnSendResult(_ context.Context, ev sender.SendResult) {
	if ev.Err == nil && ev.MessageID == h.id && h.fired.CompareAndSwap(false, true) {
		h.e.terminate(h.e.claimBackend(h.r))
	}
}

// TestCrashAfterSendBeforeMark: the broker accepted the message, then the claim's
// transaction ended before the relay deleted the row (the relay died, or its connection
// broke). The row is back at once; it is sent again with the same MessageID and the
// broker's duplicate detection drops the copy: one message delivered.
func TestCrashAfterSendBeforeMark(t *testing.T) {
	e := newEnv(t)
	q := e.queue("q", nil)
	hook := &killOnSend{e: e, id: "m1"}
	r, _ := e.relay(&pgoutbox.RelayOptions{Sender: &sender.Options{Hooks: []sender.Hook{hook}}})
	hook.r = r
	e.add("q", msg("m1", "once"))
	e.drained(r)
	if st := r.Stats(); st.Sent != 1 || st.Abandoned != 1 {
		t.Fatalf("relay %+v, want one abandoned mark, then sent", st)
	}
	if got, dups := q.Counts().Active, q.Stats().DuplicatesDropped; got != 1 || dups != 1 {
		t.Fatalf("broker holds %d messages and dropped %d duplicates; want 1 and 1", got, dups)
	}
}

// TestReplyLost: the broker stores the message but the client sees an error (the
// documentation's lost reply); the retry carries the same MessageID and is dropped as a
// duplicate.
func TestReplyLost(t *testing.T) {
	e := newEnv(t)
	q := e.queue("q", nil)
	q.InjectFault(sbtest.Fault{Op: sbtest.OpSend, Count: 1, After: true})
	e.add("q", msg("m1", "once"))
	r, _ := e.relay(&pgoutbox.RelayOptions{Sender: &sender.Options{Retry: noRetry}, Retry: fastRetry})
	e.drained(r)
	if got, dups := q.Counts().Active, q.Stats().DuplicatesDropped; got != 1 || dups != 1 {
		t.Fatalf("broker holds %d messages and dropped %d duplicates; want 1 and 1", got, dups)
	}
	if st := r.Stats(); st.SendRetries != 1 || st.Sent != 1 {
		t.Fatalf("relay %+v, want one retry then sent", st)
	}
}
