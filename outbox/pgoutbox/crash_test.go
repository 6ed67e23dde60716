package pgoutbox_test

import (
	"context"
	"errors"
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
	if got := q.ActiveCount(); got != 3 {
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
	eventually(t, "the committed message", func() bool { return q.ActiveCount() == 1 })
	e.drained()
	if got := q.Active(); len(got) != 1 || got[0].MessageID != "real" {
		t.Fatalf("broker holds %d messages, want only %q", len(got), "real")
	}
}

// TestCrashedRelayLeaseTakenOver: rows leased by a relay that died are taken over once
// its lease has ended, not before.
func TestCrashedRelayLeaseTakenOver(t *testing.T) {
	e := newEnv(t)
	q := e.queue("q", nil)
	e.add("q", msg("expired", "1"))
	e.add("q", msg("live", "2"))
	e.add("q", msg("free", "3"))
	ctx := context.Background()
	if _, err := e.pool.Exec(ctx, `UPDATE `+e.ob.Table()+` SET lease_owner = 'crashed', lease_until = CASE message_id
		WHEN 'expired' THEN now() - interval '1 second' ELSE now() + interval '1 hour' END WHERE message_id <> 'free'`); err != nil {
		t.Fatal(err)
	}
	r, _ := e.relay(nil)
	eventually(t, "the free and the expired rows", func() bool { return r.Stats().Sent == 2 })
	// The relay's claims saw the live lease and left it: its row is still there.
	var owner string
	if err := e.pool.QueryRow(ctx, `SELECT lease_owner FROM `+e.ob.Table()+` WHERE message_id = 'live'`).Scan(&owner); err != nil || owner != "crashed" {
		t.Fatalf("live row: owner %q, %v", owner, err)
	}
	if _, err := e.pool.Exec(ctx, `UPDATE `+e.ob.Table()+` SET lease_until = now() WHERE message_id = 'live'`); err != nil {
		t.Fatal(err)
	}
	e.drained(r)
	if q.ActiveCount() != 3 || q.Stats().DuplicatesDropped != 0 {
		t.Fatalf("broker: %d messages, %+v", q.ActiveCount(), q.Stats())
	}
}

// lockOnSend is a sender hook that, when the broker accepted the message with id, locks
// that message's outbox row in a transaction of its own (before the relay's completer
// learns the outcome), so the relay cannot delete it: the relay is then killed between
// the send and the mark.
type lockOnSend struct {
	t      *testing.T
	e      *env
	id     string
	locked chan pgx.Tx
}

func (h *lockOnSend) OnSendResult(ctx context.Context, ev sender.SendResult) {
	if ev.Err != nil || ev.MessageID != h.id {
		return
	}
	tx, err := h.e.pool.Begin(context.Background())
	if err == nil {
		_, err = tx.Exec(context.Background(), `SELECT 1 FROM `+h.e.ob.Table()+` WHERE message_id = $1 FOR UPDATE`, h.id)
	}
	if err != nil {
		h.t.Error(err)
	}
	h.locked <- tx
}

// TestCrashAfterSendBeforeMark: the broker accepted the message, then the relay died
// before deleting its row. Once the lease ends another relay sends it again with the
// same MessageID; the broker's duplicate detection drops the copy: one message delivered.
func TestCrashAfterSendBeforeMark(t *testing.T) {
	e := newEnv(t)
	q := e.queue("q", nil)
	e.add("q", msg("m1", "once"))
	hook := &lockOnSend{t: t, e: e, id: "m1", locked: make(chan pgx.Tx, 1)}
	a, err := pgoutbox.NewRelay(e.ob, e.destinations, &pgoutbox.RelayOptions{Sender: &sender.Options{Hooks: []sender.Hook{hook}}})
	if err != nil {
		t.Fatal(err)
	}
	ranA := make(chan error, 1)
	go func() { ranA <- a.Run(context.Background()) }()
	lockTx := <-hook.locked
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if err := a.Close(ctx); !errors.Is(err, context.DeadlineExceeded) { // the "crash": the mark never lands
		t.Fatalf("Close = %v, want the context's error", err)
	}
	if err := <-ranA; err != nil {
		t.Fatal(err)
	}
	// The relay's last DELETE was cancelled when its context ended; wait until the
	// database has processed the cancel request (sent on a connection of its own), as
	// it would have ended the statement of a relay that died.
	eventually(t, "the relay's DELETE to end", func() bool {
		var n int
		err := e.pool.QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE 'DELETE FROM '||$1||'%'`, e.ob.Table()).Scan(&n)
		return err == nil && n == 0
	})
	if err := lockTx.Rollback(context.Background()); err != nil {
		t.Fatal(err)
	}
	if st := a.Stats(); st.Sent != 0 || st.Abandoned != 1 || q.ActiveCount() != 1 {
		t.Fatalf("relay A %+v, broker holds %d", st, q.ActiveCount())
	}
	if n, _ := e.count(); n != 1 {
		t.Fatalf("%d rows after the crash, want the unmarked one", n)
	}
	// A's lease runs out.
	if _, err := e.pool.Exec(context.Background(), `UPDATE `+e.ob.Table()+` SET lease_until = now()`); err != nil {
		t.Fatal(err)
	}
	b, _ := e.relay(nil)
	e.drained(b)
	if st := b.Stats(); st.Sent != 1 {
		t.Fatalf("relay B %+v", st)
	}
	if got, dups := q.ActiveCount(), q.Stats().DuplicatesDropped; got != 1 || dups != 1 {
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
	if got, dups := q.ActiveCount(), q.Stats().DuplicatesDropped; got != 1 || dups != 1 {
		t.Fatalf("broker holds %d messages and dropped %d duplicates; want 1 and 1", got, dups)
	}
	if st := r.Stats(); st.Retried != 1 || st.Sent != 1 {
		t.Fatalf("relay %+v, want one retry then sent", st)
	}
}
