package pgoutbox_test

import (
	"context"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/sbkit/sbkit/outbox/pgoutbox"
)

// claimWatch is a pgx tracer that counts the claim statements (a relay's search for
// rows to send) that completed on the connections it traces, so that a test waits until
// a relay has looked for rows instead of sleeping for its poll interval.
type claimWatch struct {
	mu   sync.Mutex
	n    int
	next chan struct{} // closed, and replaced, at every completed claim statement
}

// isClaim recognises the relay's claim statement by its first line (claim.go).
func isClaim(sql string) bool { return strings.HasPrefix(sql, "WITH c AS MATERIALIZED") }

// The relay sends its claim statement in a batch (pgx.BatchTracer); as a query of its
// own it would come through the QueryTracer, which pgx requires of every tracer.

type claimKey struct{}

func (w *claimWatch) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	if isClaim(d.SQL) {
		return context.WithValue(ctx, claimKey{}, true)
	}
	return ctx
}

func (w *claimWatch) TraceQueryEnd(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryEndData) {
	if ctx.Value(claimKey{}) != nil && d.Err == nil {
		w.done()
	}
}

func (w *claimWatch) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	return ctx
}

func (w *claimWatch) TraceBatchQuery(_ context.Context, _ *pgx.Conn, d pgx.TraceBatchQueryData) {
	if isClaim(d.SQL) && d.Err == nil {
		w.done()
	}
}

func (w *claimWatch) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}

// done counts a completed claim statement and wakes the waiters.
func (w *claimWatch) done() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.n++
	close(w.next)
	w.next = make(chan struct{})
}

// count returns the claim statements completed so far.
func (w *claimWatch) count() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.n
}

// wait waits until at least n claim statements completed, failing the test after 20 s.
func (w *claimWatch) wait(e *env, n int, what string) {
	e.t.Helper()
	deadline := time.After(20 * time.Second)
	for {
		w.mu.Lock()
		got, next := w.n, w.next
		w.mu.Unlock()
		if got >= n {
			return
		}
		select {
		case <-next:
		case <-deadline:
			e.t.Fatalf("timed out waiting for %s: %d claim statements of %d", what, got, n)
		}
	}
}

// watchClaims makes e's outbox one whose relays' claim statements the returned
// claimWatch counts: the same tables and notification channel, through a pool of its
// own with the watch as tracer (a relay's connections copy its outbox's pool's
// configuration). Relays made by e.relay afterwards are watched; earlier ones are not.
func (e *env) watchClaims() *claimWatch {
	e.t.Helper()
	w := &claimWatch{next: make(chan struct{})}
	cfg := e.pool.Config()
	cfg.ConnConfig.Tracer = w
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(pool.Close)
	ob, err := pgoutbox.New(pool, &pgoutbox.Options{Schema: cfg.ConnConfig.RuntimeParams["search_path"]})
	if err != nil {
		e.t.Fatal(err)
	}
	e.ob = ob
	return w
}
