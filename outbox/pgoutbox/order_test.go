package pgoutbox_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/sbkit/sbkit"
	"github.com/sbkit/sbkit/outbox/pgoutbox"
	"github.com/sbkit/sbkit/sbtest"
	"github.com/sbkit/sbkit/sender"
)

// addOrdered commits n transactions of m messages each to "q", alternating messages of
// session "A" and messages without a session (see sessionOf), tagged for checkOrder.
func (e *env) addOrdered(prefix string, n, m int) {
	e.t.Helper()
	for tx := range n {
		var msgs []*azservicebus.Message
		for i := range m {
			msgs = append(msgs, &azservicebus.Message{MessageID: ptr(idOf(prefix, tx, i)), SessionID: sessionOf(tx, i),
				ApplicationProperties: map[string]any{"tx": tx, "i": i}})
		}
		e.add("q", msgs...)
	}
}

// TestOrder: the messages of one transaction, and those of one session across
// transactions, are stored by the broker in the order they were added, although
// transient failures make the sender retry (a relay that let a later message go while
// an earlier one waited for its retry would reorder them).
func TestOrder(t *testing.T) {
	e := newEnv(t)
	e.ns.SetLatency(sbtest.Latency{RoundTrip: time.Millisecond})
	q := e.queue("q", nil)
	e.addOrdered("o", 20, 10)
	// Every third request fails: its rows are retried by the relay, which must hold
	// back the rest of their order meanwhile.
	flaky := func(name string) (sbkit.MessageSender, error) {
		s, err := e.ns.NewSender(name, nil)
		return &flakySender{Sender: s, every: 3}, err
	}
	r, err := pgoutbox.NewRelay(e.ob, flaky, &pgoutbox.RelayOptions{PollInterval: 20 * time.Millisecond,
		Retry: fastRetry, ClaimBatch: 50, Sender: &sender.Options{Retry: noRetry, Linger: time.Millisecond, MaxBatchMessages: 3}})
	if err != nil {
		t.Fatal(err)
	}
	runRelay(t, r)
	e.drained(r)
	if st, active := r.Stats(), q.Counts().Active; st.Sent != 200 || st.SendRetries == 0 || active != 200 {
		t.Fatalf("relay %+v, broker holds %d", st, active)
	}
	checkOrder(t, q.Active())
}

// flakySender fails every every-th request with a transient error, without storing it.
type flakySender struct {
	*sbtest.Sender
	every int64
	n     atomic.Int64
}

func (f *flakySender) fail() bool { return f.n.Add(1)%f.every == 0 }

func (f *flakySender) SendMessage(ctx context.Context, m *azservicebus.Message, o *azservicebus.SendMessageOptions) error {
	if f.fail() {
		return sbtest.TransientError
	}
	return f.Sender.SendMessage(ctx, m, o)
}

func (f *flakySender) SendBatch(ctx context.Context, b sbkit.Batch, o *azservicebus.SendMessageBatchOptions) error {
	if f.fail() {
		return sbtest.TransientError
	}
	return f.Sender.SendBatch(ctx, b, o)
}

// runRelay runs r until the test ends.
func runRelay(t *testing.T, r *pgoutbox.Relay) {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- r.Run(context.Background()) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := r.Close(ctx); err != nil {
			t.Errorf("Close: %v", err)
		}
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
}

// TestRelaysRacing: three relays on one outbox, small claims, rows of many transactions
// and one session: every message is accepted exactly once (no relay sends a row another
// one holds), nothing is dropped as a duplicate, and order holds.
func TestRelaysRacing(t *testing.T) {
	e := newEnv(t)
	e.ns.SetLatency(sbtest.Latency{RoundTrip: 2 * time.Millisecond})
	q := e.queue("q", nil)
	var acc acceptances
	var relays []*pgoutbox.Relay
	var res results
	for range 3 {
		r, _ := e.relay(&pgoutbox.RelayOptions{ClaimBatch: 7, MaxInFlight: 20, PollInterval: 10 * time.Millisecond,
			Sender: &sender.Options{Hooks: []sender.Hook{&acc}}, Hooks: []pgoutbox.Hook{&res}})
		relays = append(relays, r)
	}
	const txs, per = 60, 5
	ctx := context.Background()
	for tx := range txs { // committed while the relays run
		err := pgx.BeginFunc(ctx, e.pool, func(ptx pgx.Tx) error {
			var msgs []*azservicebus.Message
			for i := range per {
				msgs = append(msgs, &azservicebus.Message{MessageID: ptr(idOf("r", tx, i)), SessionID: sessionOf(tx, i),
					ApplicationProperties: map[string]any{"tx": tx, "i": i}})
			}
			return e.ob.Add(ctx, ptx, "q", msgs...)
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	start := time.Now()
	e.drained(relays...)
	if time.Since(start) > 2*time.Second {
		for _, r := range res.all {
			if r.Outcome != pgoutbox.OutcomeSent {
				t.Logf("%+v", r)
			}
		}
	}
	if twice := acc.twice(); len(twice) > 0 {
		t.Fatalf("accepted more than once: %v", twice)
	}
	var sent int64
	for i, r := range relays {
		st := r.Stats()
		sent += st.Sent
		t.Logf("relay %d: %+v", i, st)
	}
	if active, dups := q.Counts().Active, q.Stats().DuplicatesDropped; sent != txs*per || active != txs*per || dups != 0 {
		t.Fatalf("relays sent %d, broker holds %d and dropped %d duplicates; want %d, %d, 0",
			sent, active, dups, txs*per, txs*per)
	}
	checkOrder(t, q.Active())
}

// failOnce is a destination whose batch holding the message with id fails once, with a
// transient error, without being stored; before, when set, runs first.
type failOnce struct {
	*sbtest.Sender
	id     string
	before func()
	failed atomic.Bool
}

// idBatch is a batch that knows the MessageIDs it holds.
type idBatch struct {
	sbkit.Batch
	ids []string
}

func (b *idBatch) AddMessage(m *azservicebus.Message, o *azservicebus.AddMessageOptions) error {
	if err := b.Batch.AddMessage(m, o); err != nil {
		return err
	}
	b.ids = append(b.ids, *m.MessageID)
	return nil
}

func (f *failOnce) NewBatch(ctx context.Context, o *azservicebus.MessageBatchOptions) (sbkit.Batch, error) {
	b, err := f.Sender.NewBatch(ctx, o)
	if err != nil {
		return nil, err
	}
	return &idBatch{Batch: b}, nil
}

func (f *failOnce) SendBatch(ctx context.Context, b sbkit.Batch, o *azservicebus.SendMessageBatchOptions) error {
	ib := b.(*idBatch)
	if slices.Contains(ib.ids, f.id) && f.failed.CompareAndSwap(false, true) {
		if f.before != nil {
			f.before()
		}
		return sbtest.TransientError
	}
	return f.Sender.SendBatch(ctx, ib.Batch, o)
}

// TestSessionFailureAcrossClaims: a session spans many small claims, which the relay
// makes while the earlier ones are in flight (a claim takes the rows after the relay's
// own). When an early row fails, the session's rows of the later claims, already in the
// sender or not yet dispatched, are not sent: they are released and sent after the
// failed row's retry, so the broker stores the session in order.
func TestSessionFailureAcrossClaims(t *testing.T) {
	e := newEnv(t)
	e.ns.SetLatency(sbtest.Latency{RoundTrip: 20 * time.Millisecond})
	q := e.queue("q", nil)
	const n = 40
	var msgs []*azservicebus.Message
	for i := range n {
		msgs = append(msgs, &azservicebus.Message{MessageID: ptr(idOf("s", 0, i)), SessionID: ptr("S"),
			ApplicationProperties: map[string]any{"tx": 0, "i": i}})
	}
	e.add("q", msgs...)
	// The failure waits for the relay's second claim, so that it finds rows of two claims
	// in flight: on a busy machine a claim can take longer than the first request's round
	// trip, and the failure then found only the first claim's rows (2 released, not 7).
	var r *pgoutbox.Relay
	secondClaim := func() {
		for deadline := time.Now().Add(10 * time.Second); r.Stats().Claims < 2 && time.Now().Before(deadline); {
			time.Sleep(time.Millisecond)
		}
	}
	dest := func(name string) (sbkit.MessageSender, error) {
		s, err := e.ns.NewSender(name, nil)
		return &failOnce{Sender: s, id: idOf("s", 0, 2), before: secondClaim}, err
	}
	r, err := pgoutbox.NewRelay(e.ob, dest, &pgoutbox.RelayOptions{ClaimBatch: 5, MaxOpenClaims: 8, PollInterval: 20 * time.Millisecond,
		Retry: fastRetry, Sender: &sender.Options{Retry: noRetry, MaxBatchMessages: 2}})
	if err != nil {
		t.Fatal(err)
	}
	runRelay(t, r)
	e.drained(r)
	st := r.Stats()
	if active := q.Counts().Active; st.Sent != n || st.SendRetries == 0 || active != n {
		t.Fatalf("relay %+v, broker holds %d", st, active)
	}
	if st.Released < 7 { // rows 3 and 4 of the first claim, and 5 to 9 of the second
		t.Errorf("relay %+v: %d rows released, want the rows after the failed one in the two claims in flight (at least 7)", st, st.Released)
	}
	checkOrder(t, q.Active())
}

// TestContendedOrderLeftAlone: a session whose first row another relay holds is left
// to it. The relay's claim found the rows after it, but does not keep them locked while
// it sends its other rows (it rolls back to its savepoint and locks again only the rows
// it sends); once the other relay is done, the session's rows go, in order.
func TestContendedOrderLeftAlone(t *testing.T) {
	e := newEnv(t)
	q := e.queue("q", nil)
	ctx := context.Background()
	session := func(id string) *azservicebus.Message {
		return &azservicebus.Message{MessageID: ptr(id), SessionID: ptr("S")}
	}
	e.add("q", session("s1"), session("s2"), session("s3"))
	e.add("q", msg("t1", "x"))
	other, err := e.pool.Begin(ctx) // another relay's claim of s1
	if err != nil {
		t.Fatal(err)
	}
	defer other.Rollback(ctx)
	if _, err := other.Exec(ctx, `SELECT 1 FROM `+e.ob.Table()+` WHERE message_id = 's1' FOR UPDATE`); err != nil {
		t.Fatal(err)
	}
	hook := &blockResult{id: "t1", blocked: make(chan struct{}), release: make(chan struct{})}
	claims := e.watchClaims()
	r, _ := e.relay(&pgoutbox.RelayOptions{Sender: &sender.Options{Hooks: []sender.Hook{hook}}})
	<-hook.blocked // the claim that sent t1 is open
	release := sync.OnceFunc(func() { close(hook.release) })
	defer release() // a failure below still lets the relay stop
	// The relay goes on polling meanwhile: each of its looks for rows locks s2 and s3
	// until it found them blocked and rolled back. The claim that sent t1 must not keep
	// them: while it is open they come free (NOWAIT fails at once on a locked row).
	eventually(t, "s2 and s3 free while the relay's claim is open", func() bool {
		tx, err := e.pool.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = tx.Rollback(ctx) }()
		var n int
		err = tx.QueryRow(ctx, `SELECT count(*) FROM (SELECT 1 FROM `+e.ob.Table()+` WHERE message_id IN ('s2', 's3') FOR UPDATE NOWAIT) x`).Scan(&n)
		if pgErr := (*pgconn.PgError)(nil); errors.As(err, &pgErr) && pgErr.Code == "55P03" /* lock_not_available */ {
			return false
		}
		if err != nil || n != 2 {
			t.Fatalf("s2 and s3: %d unlocked, %v; want both", n, err)
		}
		return true
	})
	release()
	// Once t1's claim ended, the relay looks for rows again: it leaves s2 and s3 alone.
	eventually(t, "t1's claim to end", func() bool { return r.Stats().Sent == 1 && r.Stats().InFlight == 0 })
	claims.wait(e, claims.count()+2, "the relay to look for rows twice after t1's claim")
	if st := r.Stats(); st.Claimed != 1 {
		t.Fatalf("relay %+v: claimed %d rows while s1 is held elsewhere, want t1 only", st, st.Claimed)
	}
	if got := q.Counts().Active; got != 1 {
		t.Fatalf("broker holds %d messages while s1 is held elsewhere, want t1 only", got)
	}
	// The other relay sent s1 and deleted it.
	if _, err := other.Exec(ctx, `DELETE FROM `+e.ob.Table()+` WHERE message_id = 's1'`); err != nil {
		t.Fatal(err)
	}
	if err := other.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	e.drained(r)
	var ids []string
	for _, m := range q.Active() { // in the order the broker stored them
		ids = append(ids, m.MessageID)
	}
	if !slices.Equal(ids, []string{"t1", "s2", "s3"}) {
		t.Fatalf("broker holds %v, want t1, s2, s3", ids)
	}
}
