package pgoutbox_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/sbkit/sbkit/dedupe/pgdedupe/pgtest"
	"github.com/sbkit/sbkit/outbox/pgoutbox"
)

// onLoad is a pgx tracer that calls do for the first read of a claim's messages (the
// relay's load statement), before the statement goes out, with the statement's context
// and connection.
type onLoad struct {
	do   func(ctx context.Context, conn *pgx.Conn)
	once sync.Once
}

func (l *onLoad) TraceQueryStart(ctx context.Context, conn *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	if strings.HasPrefix(d.SQL, "SELECT id, message_id") {
		l.once.Do(func() { l.do(ctx, conn) })
	}
	return ctx
}

func (l *onLoad) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// killOnLoad terminates the backend of the first read of a claim's messages, before it
// goes out: that read fails as when the connection breaks between the claim and it.
func killOnLoad(t testing.TB) *onLoad {
	return &onLoad{do: func(ctx context.Context, conn *pgx.Conn) {
		admin, err := pgx.Connect(ctx, pgtest.DSN())
		if err != nil {
			t.Error(err)
			return
		}
		defer admin.Close(ctx)
		// With a timeout, pg_terminate_backend waits until the backend is gone.
		if _, err := admin.Exec(ctx, `SELECT pg_terminate_backend($1, 10000)`, conn.PgConn().PID()); err != nil {
			t.Error(err)
		}
	}}
}

// TestLoadFails: when reading a claim's messages fails (its connection broke after the
// claim), its rows are released unsent, with no attempt counted, the failure is
// reported as a claim's, and a later claim sends them: every message is accepted once.
func TestLoadFails(t *testing.T) {
	e := newEnv(t)
	q := e.queue("q", nil)
	e.traced(killOnLoad(t))
	var res results
	var mu sync.Mutex
	var errs []*pgoutbox.RelayError
	errHook := pgoutbox.RelayErrorHookFunc(func(_ context.Context, err *pgoutbox.RelayError) {
		mu.Lock()
		errs = append(errs, err)
		mu.Unlock()
	})
	r, _ := e.relay(&pgoutbox.RelayOptions{Hooks: []pgoutbox.Hook{&res, errHook}})
	e.add("q", msg("a", "x"), msg("b", "y"))
	e.drained(r)
	for _, id := range []string{"a", "b"} {
		if got := res.of(id); len(got) != 2 || got[0] != pgoutbox.OutcomeReleased || got[1] != pgoutbox.OutcomeSent {
			t.Errorf("%s: outcomes %v, want released, then sent", id, got)
		}
	}
	res.mu.Lock()
	for _, e := range res.all {
		if e.Outcome == pgoutbox.OutcomeSent && e.Attempts != 1 {
			t.Errorf("%s sent at attempt %d, want 1 (a release counts none)", e.MessageID, e.Attempts)
		}
	}
	res.mu.Unlock()
	mu.Lock()
	if len(errs) == 0 || errs[0].Op != "claim" || errs[0].Rows != 2 {
		t.Errorf("relay errors %v, want first a claim's of 2 rows", errs)
	}
	mu.Unlock()
	if n := q.Counts().Active; n != 2 {
		t.Errorf("queue holds %d messages, want 2", n)
	}
}

// slowLoad holds the first read of a claim's messages before it goes out, until the
// statement's context ends or wait passed: a read that the database answers late.
func slowLoad(wait time.Duration) *onLoad {
	return &onLoad{do: func(ctx context.Context, _ *pgx.Conn) {
		select {
		case <-ctx.Done():
		case <-time.After(wait):
		}
	}}
}

// TestSlowLoadEndsWithTheLease: reading a claim's messages is bounded by the claim's
// context, which ends at half the Lease, as its sends are. A read still unanswered then
// fails, and its rows are released with no attempt counted; a later claim sends them.
// (Bounded by the run's context instead, the read went on, and the rows, read after
// their claim's time, failed their send and were charged an attempt.)
func TestSlowLoadEndsWithTheLease(t *testing.T) {
	const lease = 2 * time.Second
	e := newEnv(t)
	q := e.queue("q", nil)
	e.traced(slowLoad(lease/2 + lease/4)) // past the claim's end, before the server's
	var res results
	r, _ := e.relay(&pgoutbox.RelayOptions{Lease: lease, Hooks: []pgoutbox.Hook{&res}})
	e.add("q", msg("a", "x"))
	e.drained(r)
	res.mu.Lock()
	// The released row's message was never read: its result has no MessageID.
	if got := res.all; len(got) != 2 || got[0].Outcome != pgoutbox.OutcomeReleased || got[0].Attempts != 0 ||
		got[1].Outcome != pgoutbox.OutcomeSent || got[1].Attempts != 1 {
		t.Errorf("results %+v, want released (no attempt), then sent at attempt 1", got)
	}
	res.mu.Unlock()
	if n := q.Counts().Active; n != 1 {
		t.Errorf("queue holds %d messages, want 1", n)
	}
}

// traced makes e's outbox use a pool of its own whose connections, the relay's
// included (made from the pool's configuration), report to tracer.
func (e *env) traced(tracer pgx.QueryTracer) {
	e.t.Helper()
	cfg := e.pool.Config()
	cfg.ConnConfig.Tracer = tracer
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(pool.Close)
	if e.ob, err = pgoutbox.New(pool, &pgoutbox.Options{Schema: e.schema}); err != nil {
		e.t.Fatal(err)
	}
}
