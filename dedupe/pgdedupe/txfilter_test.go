package pgdedupe_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/sbkit/sbkit"
	"github.com/sbkit/sbkit/dedupe/pgdedupe"
	"github.com/sbkit/sbkit/dedupe/pgdedupe/pgtest"
)

// errorHook records a TxFilter's database errors; it panics once to show that a
// panicking hook does not break the filter.
type errorHook struct {
	ops      []string
	panicked atomic.Bool
}

func (h *errorHook) OnTxError(_ context.Context, e *pgdedupe.TxError) {
	h.ops = append(h.ops, e.Op)
	if h.panicked.CompareAndSwap(false, true) {
		panic("hook bug")
	}
}

func wrap(t *testing.T, f *pgdedupe.TxFilter, h sbkit.Handler) sbkit.Handler {
	t.Helper()
	w, err := f.Wrap(h)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// TestSerializationFailureRetries: a serialization failure of the filter's own commit
// (here a deferred constraint trigger that raises SQLSTATE 40001 at the first COMMIT, as
// SERIALIZABLE transactions do) rolls the transaction back and runs it again, holding
// the delivery.
func TestSerializationFailureRetries(t *testing.T) {
	e := newE2E(t)
	if _, err := e.pool.Exec(context.Background(), `
CREATE SEQUENCE commits;
CREATE FUNCTION fail_first_commit() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	IF nextval('commits') = 1 THEN
		RAISE EXCEPTION 'conflict' USING ERRCODE = '40001';
	END IF;
	RETURN NULL;
END $$;
CREATE CONSTRAINT TRIGGER at_commit AFTER INSERT ON work DEFERRABLE INITIALLY DEFERRED
	FOR EACH ROW EXECUTE FUNCTION fail_first_commit();`); err != nil {
		t.Fatal(err)
	}
	hook := &errorHook{}
	f, err := pgdedupe.NewTxFilter(e.store, &pgdedupe.TxOptions{Entity: "orders", Hooks: []pgdedupe.Hook{hook},
		Retry: sbkit.RetryOptions{RetryDelay: -1}})
	if err != nil {
		t.Fatal(err)
	}
	h := wrap(t, f, e.work)
	if err := h(context.Background(), &azservicebus.ReceivedMessage{MessageID: "s1"}); err != nil {
		t.Fatal(err)
	}
	if work, marks := e.rows("s1"); e.runs.Load() != 2 || work != 1 || marks != 1 {
		t.Fatalf("handler ran %d times, %d rows, %d marks; want 2, 1, 1", e.runs.Load(), work, marks)
	}
	if st := f.Stats(); st.TxRetries != 1 || st.Committed != 1 || len(hook.ops) != 1 || hook.ops[0] != "commit" {
		t.Fatalf("stats %+v, hook saw %v", st, hook.ops)
	}
}

// unreachableStore returns a Store whose pool connects to a port where no database
// listens: every connection is refused at once.
func unreachableStore(t *testing.T) *pgdedupe.Store {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), "postgres://postgres@127.0.0.1:1/postgres?connect_timeout=1")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	s, err := pgdedupe.New(pool, nil)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestDatabaseDown: with the database unreachable the filter retries a bounded number of
// times, holding the delivery, then fails closed with a *TxError: the handler never runs.
func TestDatabaseDown(t *testing.T) {
	pgtest.Require(t)
	s := unreachableStore(t)
	f, err := pgdedupe.NewTxFilter(s, &pgdedupe.TxOptions{Retry: sbkit.RetryOptions{MaxRetries: 2, RetryDelay: -1}})
	if err != nil {
		t.Fatal(err)
	}
	var ran atomic.Bool
	h := wrap(t, f, func(context.Context, *azservicebus.ReceivedMessage) error { ran.Store(true); return nil })
	err = h(context.Background(), &azservicebus.ReceivedMessage{MessageID: "d1"})
	var te *pgdedupe.TxError
	if !errors.As(err, &te) || te.Op != "begin" || te.Attempts != 3 || !te.Retryable {
		t.Fatalf("err %v, want a retryable *TxError after 3 attempts to begin", err)
	}
	if a, _ := sbkit.SettlementOf(err); a != sbkit.ActionAbandon || ran.Load() {
		t.Fatalf("action %v, handler ran %v; want abandon without running", a, ran.Load())
	}
	if st := f.Stats(); st.TxRetries != 2 || st.Failed != 1 {
		t.Fatalf("stats %+v", st)
	}
}

// TestContextEndsWhileHeld: when the handler's context ends while the filter waits to
// retry, the result wraps the context's cause and still names the database error that
// was being retried; no further transaction is begun.
func TestContextEndsWhileHeld(t *testing.T) {
	pgtest.Require(t)
	s := unreachableStore(t)
	var hook errorHook
	var results []pgdedupe.TxResult
	f, err := pgdedupe.NewTxFilter(s, &pgdedupe.TxOptions{
		Retry: sbkit.RetryOptions{RetryDelay: time.Minute},
		Hooks: []pgdedupe.Hook{&hook, txResultFunc(func(e pgdedupe.TxResult) { results = append(results, e) })},
	})
	if err != nil {
		t.Fatal(err)
	}
	h := wrap(t, f, func(context.Context, *azservicebus.ReceivedMessage) error { return nil })
	ctx, cancel := context.WithTimeout(context.Background(), time.Second) // the refused connection takes far less
	defer cancel()
	err = h(ctx, &azservicebus.ReceivedMessage{MessageID: "c1"})
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "127.0.0.1") {
		t.Fatalf("err %v, want the context's cause and the database error", err)
	}
	if len(hook.ops) != 1 || len(results) != 1 || results[0].Outcome != pgdedupe.OutcomeFailed || results[0].Attempts != 1 {
		t.Fatalf("hook saw errors %v and results %+v; want one error and one failed result after 1 attempt", hook.ops, results)
	}
	if st := f.Stats(); st.TxRetries != 1 || st.Failed != 1 {
		t.Fatalf("stats %+v", st)
	}
}

// txResultFunc is a TxResultHook made of a function.
type txResultFunc func(e pgdedupe.TxResult)

func (fn txResultFunc) OnTxResult(_ context.Context, e pgdedupe.TxResult) { fn(e) }

// TestNonRetryableDatabaseError: an error a retry cannot fix (here the table is
// missing) fails at once.
func TestNonRetryableDatabaseError(t *testing.T) {
	pool := newPool(t)
	s, err := pgdedupe.New(pool, &pgdedupe.Options{Table: "missing"})
	if err != nil {
		t.Fatal(err)
	}
	f, err := pgdedupe.NewTxFilter(s, nil)
	if err != nil {
		t.Fatal(err)
	}
	h := wrap(t, f, func(context.Context, *azservicebus.ReceivedMessage) error { return nil })
	err = h(context.Background(), &azservicebus.ReceivedMessage{MessageID: "n1"})
	var te *pgdedupe.TxError
	if !errors.As(err, &te) || te.Op != "mark" || te.Attempts != 1 || !strings.Contains(err.Error(), "missing") {
		t.Fatalf("err %v, want a *TxError on the mark after one attempt", err)
	}
}

// TestMiddlewareAndNoKey: Wrap refuses a nil handler, Middleware panics on one; a
// message without a MessageId runs in a transaction without a mark.
func TestMiddlewareAndNoKey(t *testing.T) {
	e := newE2E(t)
	f, err := pgdedupe.NewTxFilter(e.store, &pgdedupe.TxOptions{Entity: "orders"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Wrap(nil); !errors.Is(err, sbkit.ErrNilHandler) {
		t.Fatalf("Wrap(nil) = %v", err)
	}
	func() {
		defer func() {
			if p := recover(); p == nil {
				t.Fatal("Middleware()(nil) did not panic")
			}
		}()
		f.Middleware()(nil)
	}()
	if _, err := pgdedupe.NewTxFilter(e.store, &pgdedupe.TxOptions{Entity: "a:b"}); !errors.Is(err, pgdedupe.ErrInvalidOptions) {
		t.Fatalf("Entity with ':' = %v", err)
	}
	if _, err := pgdedupe.NewTxFilter(e.store, &pgdedupe.TxOptions{Hooks: []pgdedupe.Hook{struct{}{}}}); !errors.Is(err, pgdedupe.ErrInvalidOptions) {
		t.Fatalf("a hook of no interface = %v", err)
	}
	h := f.Middleware()(e.work)
	for range 2 {
		if err := h(context.Background(), &azservicebus.ReceivedMessage{}); err != nil {
			t.Fatal(err)
		}
	}
	if work, _ := e.rows(""); work != 2 || f.Stats().Unprotected != 2 {
		t.Fatalf("%d rows, stats %+v; want 2 unprotected runs", work, f.Stats())
	}
}
