package pgdedupe

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync/atomic"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/sbkit/sbkit"
	"github.com/sbkit/sbkit/dedupe"
	"github.com/sbkit/sbkit/dedupe/pgdedupe/internal/hooks"
	"github.com/sbkit/sbkit/dedupe/pgdedupe/internal/retry"
)

// defaultTxRetry is the default of TxOptions.Retry.
var defaultTxRetry = retry.Policy{MaxRetries: 5, RetryDelay: 200 * time.Millisecond, MaxRetryDelay: 5 * time.Second}

// TxOptions configures a TxFilter. nil options, and zero fields, mean the defaults.
type TxOptions struct {
	// Entity namespaces the default key: "<Entity>:<MessageId>", as in
	// [dedupe.Options.Entity]. It must not contain ':'. Default: "".
	Entity string
	// Key returns a message's key; "" means the message has none: its handler then runs
	// in a transaction without a done mark (counted in TxStats.Unprotected). Default:
	// [dedupe.MessageIDKey](Entity), the key a [dedupe.Filter] uses: Entity + ":" +
	// MessageID, or "" when MessageID is empty.
	Key func(message *azservicebus.ReceivedMessage) string
	// Window is how long a done mark lives (see [dedupe.Options.Window]). Default:
	// [dedupe.DefaultWindow] (1 h); negative is an error.
	Window time.Duration
	// TxOptions are the transaction's options (isolation level, ...). Default: the
	// database's default isolation (read committed), read-write.
	TxOptions pgx.TxOptions
	// Retry bounds the retries of a transaction whose own statements (begin, the done
	// mark, commit) failed for a reason a retry can fix: the database unreachable
	// (connection refused, reset, timed out, shutting down) or a serialization failure
	// or deadlock (SQLSTATE 40001, 40P01). The delivery is held meanwhile (no abandon,
	// no delivery count); when the retries run out the Filter returns a *TxError and the
	// message is abandoned. A handler's error is never retried, whatever it wraps.
	// Default: MaxRetries 5, RetryDelay 200 ms, MaxRetryDelay 5 s (about 6 s of delays,
	// at most 9 s with jitter).
	Retry sbkit.RetryOptions
	// Hooks observe the filter: each implements any of [TxResultHook] and [TxErrorHook]
	// (one that implements neither is an error). They run synchronously on the handler's goroutine, must be fast, and
	// may be called concurrently; a panic in a hook is recovered and logged. Default:
	// none.
	Hooks []Hook
	// Logger receives warnings about database errors (keys, never payloads). Default:
	// nil, which discards.
	Logger *slog.Logger
}

// Hook is an observer of a TxFilter: a value implementing any of [TxResultHook] and
// [TxErrorHook]. [NewTxFilter] refuses a value that implements neither (an error wrapping
// [ErrInvalidOptions]), so that a misspelt method is not silently ignored.
type Hook any

// isHook reports whether x implements TxResultHook or TxErrorHook.
func isHook(x any) bool {
	switch x.(type) {
	case TxResultHook, TxErrorHook:
		return true
	}
	return false
}

// TxResultHook is told the outcome of every delivery the filter handled.
type TxResultHook interface {
	OnTxResult(ctx context.Context, e TxResult)
}

// TxResultHookFunc adapts a function to a [TxResultHook].
type TxResultHookFunc func(ctx context.Context, e TxResult)

// OnTxResult calls f.
func (f TxResultHookFunc) OnTxResult(ctx context.Context, e TxResult) { f(ctx, e) }

// TxErrorHook is told every failed statement of the filter's own (begin, the done mark,
// commit), before the filter decides to retry. Handler errors are not database errors
// of the filter's: they are reported by TxResultHook (OutcomeRolledBack).
type TxErrorHook interface {
	OnTxError(ctx context.Context, err *TxError)
}

// TxErrorHookFunc adapts a function to a [TxErrorHook].
type TxErrorHookFunc func(ctx context.Context, err *TxError)

// OnTxError calls f.
func (f TxErrorHookFunc) OnTxError(ctx context.Context, err *TxError) { f(ctx, err) }

// Outcome is what a TxFilter did with a delivery.
type Outcome int

const (
	// OutcomeCommitted: the handler succeeded, its work and the done mark committed.
	OutcomeCommitted Outcome = iota + 1
	// OutcomeDuplicate: the key was already done; the handler did not run.
	OutcomeDuplicate
	// OutcomeRolledBack: the handler returned an error; nothing was committed.
	OutcomeRolledBack
	// OutcomeFailed: the database failed (after the retries) or the context ended.
	OutcomeFailed
)

// String returns the outcome's name.
func (o Outcome) String() string {
	switch o {
	case OutcomeCommitted:
		return "committed"
	case OutcomeDuplicate:
		return "duplicate"
	case OutcomeRolledBack:
		return "rolled back"
	case OutcomeFailed:
		return "failed"
	}
	return fmt.Sprintf("Outcome(%d)", int(o))
}

// TxResult is the event of TxResultHook.
type TxResult struct {
	Key      string                        // the message's key
	Message  *azservicebus.ReceivedMessage // the delivery
	Outcome  Outcome                       // what became of it
	Attempts int                           // transactions begun for the delivery
	Duration time.Duration                 // from the first Begin to the outcome
	Err      error                         // the handler's or the database's error; nil when committed or duplicate
}

// TxError is a failed statement of the filter's own. The [TxErrorHook]s receive one for
// every failed attempt; the filter returns the last one (and the message is abandoned)
// when the database could not be used: after the retries for errors a retry can fix, at
// once for the others. It wraps the database's error.
type TxError struct {
	Key       string // the message's key
	Op        string // the step that failed: "begin", "mark", "commit"
	Attempts  int    // attempts made, the failed one included
	Retryable bool   // a retry can fix it (retried while TxOptions.Retry allows)
	Err       error  // the database's error
}

// Error names the key, the step and the attempts, then the database error.
func (e *TxError) Error() string {
	return fmt.Sprintf("pgdedupe: key %q: %s failed after %d attempt(s): %v", e.Key, e.Op, e.Attempts, e.Err)
}

// Unwrap returns the database error.
func (e *TxError) Unwrap() error { return e.Err }

// TxStats is a snapshot of a TxFilter's counters.
type TxStats struct {
	Checked           int64 // deliveries with a key
	Committed         int64 // handler succeeded, work and mark committed
	DuplicatesSkipped int64 // skipped: the key was done
	RolledBack        int64 // handler returned an error
	TxRetries         int64 // transactions retried (database unreachable, serialization failure)
	Failed            int64 // deliveries abandoned for a database error
	Unprotected       int64 // deliveries without a key, run without a mark
}

// TxFilter runs a handler inside a PostgreSQL transaction and writes the message's
// done mark in that same transaction, so that the work and the mark commit together.
// Make one with NewTxFilter; wrap handlers with Wrap (or Middleware); a handler reads
// the transaction with [TxFrom]. It is safe for concurrent use and owns no goroutine.
//
// For each delivery with a key the filter begins a transaction and inserts the done
// mark first (an INSERT ... ON CONFLICT on the table's primary key):
//   - the key is already done (a committed mark, live): the transaction is rolled back
//     and the result is sbkit.Skip(dedupe.DuplicateReason): the message is completed
//     without running the handler (Complete was lost, or the process died after the
//     commit);
//   - another worker's transaction holds an uncommitted mark for the key (a concurrent
//     duplicate): the insert waits for it (holding a pool connection, bounded by the
//     handler's context); when it commits, this delivery is a duplicate; when it rolls
//     back, this one proceeds. Two deliveries of one key can never both commit;
//   - otherwise the handler runs with the transaction in its context. It returns nil:
//     the transaction commits (work and mark), then the processor completes the
//     message. It returns an error (or panics): the transaction is rolled back once and
//     the error returned as it is (counted RolledBack), so the message is abandoned or
//     dead-lettered as usual and its redelivery runs the work again. The filter never
//     runs the handler again within one delivery: its error, whatever it wraps (a
//     timeout or network error of another system, or a database error of the handler's
//     own statements, a serialization failure included), is the handler's to report.
//
// Failures of the filter's own statements: a database that cannot be reached, or a
// serialization failure or deadlock (SQLSTATE 40001, 40P01), in the begin, the mark or
// the commit, rolls the transaction back and retries it after a backoff
// (TxOptions.Retry), holding the delivery: a short outage costs no delivery count and
// causes no burst of abandons. When the retries run out, or for any other database
// error, the result is a *TxError and the message is abandoned (fail closed: the handler
// never runs without its mark). A commit whose outcome is unknown (the connection broke
// during COMMIT) is reported as a *TxError too; the redelivery finds the mark if the
// commit happened. A retried commit runs the handler again in the new transaction: only
// then does a handler run twice in one delivery.
//
// Handlers must do their database work through the transaction only; work outside it
// (calls to other systems) is not undone by a rollback.
type TxFilter struct {
	store *Store
	o     TxOptions
	retry retry.Policy
	mark  string

	resultHooks []TxResultHook
	errorHooks  []TxErrorHook

	checked, committed, duplicates, rolledBack, retried, failed, unprotected atomic.Int64
}

// NewTxFilter returns a TxFilter that writes its marks in store's table (use
// Store.CreateSchema first). nil options mean defaults. It returns [ErrNilStore] for a
// nil store, and an error wrapping ErrInvalidOptions for a negative Window, an Entity
// containing ':', or a hook of no hook interface.
func NewTxFilter(store *Store, opts *TxOptions) (*TxFilter, error) {
	if store == nil {
		return nil, ErrNilStore
	}
	var o TxOptions
	if opts != nil {
		o = *opts
	}
	switch {
	case o.Window < 0:
		return nil, fmt.Errorf("%w: negative Window %v", ErrInvalidOptions, o.Window)
	case strings.Contains(o.Entity, ":"):
		return nil, fmt.Errorf("%w: Entity %q contains ':'", ErrInvalidOptions, o.Entity)
	}
	if err := hooks.Check(o.Hooks, isHook, "TxResultHook, TxErrorHook"); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidOptions, err)
	}
	if o.Window == 0 {
		o.Window = dedupe.DefaultWindow
	}
	if o.Key == nil {
		o.Key = dedupe.MessageIDKey(o.Entity)
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	f := &TxFilter{store: store, o: o, retry: retry.Resolve(o.Retry, defaultTxRetry),
		resultHooks: hooks.Select[TxResultHook](o.Hooks), errorHooks: hooks.Select[TxErrorHook](o.Hooks)}
	// A live lease of the plain Store on the same key is replaced: a key is meant to be
	// handled by one mode only.
	f.mark = `INSERT INTO ` + store.table + ` AS d (key, owner, done, expires_at)
VALUES ($1, NULL, true, now() + $2 * interval '1 microsecond')
ON CONFLICT (key) DO UPDATE SET owner = NULL, done = true, expires_at = excluded.expires_at
WHERE d.expires_at <= now() OR NOT d.done
RETURNING true`
	return f, nil
}

type txKey struct{}

// TxFrom returns the transaction a TxFilter runs the handler in, or nil when ctx does not
// come from one.
func TxFrom(ctx context.Context) pgx.Tx {
	tx, _ := ctx.Value(txKey{}).(pgx.Tx)
	return tx
}

// Middleware returns the TxFilter as an [sbkit.Middleware]. The middleware panics with
// an error wrapping [sbkit.ErrNilHandler] when it is applied to a nil handler (a
// programming error, found when the chain is built), as [dedupe.Filter.Middleware] does.
func (f *TxFilter) Middleware() sbkit.Middleware {
	return func(next sbkit.Handler) sbkit.Handler {
		h, err := f.Wrap(next)
		if err != nil {
			panic(err)
		}
		return h
	}
}

// Wrap returns a handler that runs next in a transaction with the message's done mark
// (see [TxFilter]). It returns an error wrapping [sbkit.ErrNilHandler] for a nil next.
func (f *TxFilter) Wrap(next sbkit.Handler) (sbkit.Handler, error) {
	if next == nil {
		return nil, fmt.Errorf("pgdedupe: Wrap: %w", sbkit.ErrNilHandler)
	}
	return func(ctx context.Context, m *azservicebus.ReceivedMessage) error {
		return f.handle(ctx, m, next)
	}, nil
}

// Stats returns a snapshot of the filter's counters.
func (f *TxFilter) Stats() TxStats {
	return TxStats{
		Checked: f.checked.Load(), Committed: f.committed.Load(), DuplicatesSkipped: f.duplicates.Load(),
		RolledBack: f.rolledBack.Load(), TxRetries: f.retried.Load(), Failed: f.failed.Load(),
		Unprotected: f.unprotected.Load(),
	}
}

func (f *TxFilter) handle(ctx context.Context, m *azservicebus.ReceivedMessage, next sbkit.Handler) error {
	if m == nil {
		return fmt.Errorf("pgdedupe: %w", sbkit.ErrNilMessage)
	}
	key := f.o.Key(m)
	if key == "" {
		f.unprotected.Add(1)
	} else {
		f.checked.Add(1)
	}
	start := time.Now()
	rs := f.retry.Retries()
	for attempt := 1; ; attempt++ {
		outcome, op, err := f.attempt(ctx, m, next, key)
		if outcome != 0 {
			f.count(outcome)
			f.result(ctx, TxResult{Key: key, Message: m, Outcome: outcome, Attempts: attempt, Duration: time.Since(start), Err: err})
			if outcome == OutcomeDuplicate {
				return sbkit.Skip(dedupe.DuplicateReason)
			}
			return err
		}
		// A database error (op names the step).
		retryable := ctx.Err() == nil && isRetryable(err)
		txErr := &TxError{Key: key, Op: op, Attempts: attempt, Retryable: retryable, Err: err}
		f.txError(ctx, txErr)
		wait, ok := time.Duration(0), false
		if retryable {
			wait, ok = rs.Next()
		}
		if !ok {
			var res error = txErr
			if ctx.Err() != nil {
				res = f.ended(ctx, key, err)
			}
			return f.fail(ctx, m, key, attempt, start, res)
		}
		f.retried.Add(1)
		f.o.Logger.WarnContext(ctx, "pgdedupe: transaction failed, retrying", "key", key, "op", op, "attempt", attempt, "retryIn", wait, "err", err)
		if !retry.Wait(ctx, wait) {
			// No transaction can begin on an ended context: fail with the error that
			// was being retried.
			return f.fail(ctx, m, key, attempt, start, f.ended(ctx, key, err))
		}
	}
}

// ended is the result of a delivery whose context ended: its cause, with the last
// database error.
func (f *TxFilter) ended(ctx context.Context, key string, err error) error {
	return fmt.Errorf("pgdedupe: key %q: %w (%w)", key, context.Cause(ctx), err)
}

// fail counts and reports a delivery that failed after attempts transactions, and
// returns res.
func (f *TxFilter) fail(ctx context.Context, m *azservicebus.ReceivedMessage, key string, attempts int, start time.Time, res error) error {
	f.failed.Add(1)
	f.result(ctx, TxResult{Key: key, Message: m, Outcome: OutcomeFailed, Attempts: attempts, Duration: time.Since(start), Err: res})
	return res
}

// attempt runs one transaction. It returns the outcome (with the handler's error for
// OutcomeRolledBack), or 0, the failed step and the database error.
func (f *TxFilter) attempt(ctx context.Context, m *azservicebus.ReceivedMessage, next sbkit.Handler, key string) (Outcome, string, error) {
	tx, err := f.store.pool.BeginTx(ctx, f.o.TxOptions)
	if err != nil {
		return 0, "begin", err
	}
	// Rolls back on every path but a commit (a no-op then), panics included; not bound
	// to ctx, which may have ended.
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	if key != "" {
		var ok bool
		err := tx.QueryRow(ctx, f.mark, key, f.o.Window.Microseconds()).Scan(&ok)
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			return OutcomeDuplicate, "", nil
		case err != nil:
			return 0, "mark", err
		}
	}
	if herr := next(context.WithValue(ctx, txKey{}, tx), m); herr != nil {
		return OutcomeRolledBack, "", herr // the handler's, never retried here
	}
	if err := tx.Commit(ctx); err != nil {
		return 0, "commit", err
	}
	return OutcomeCommitted, "", nil
}

func (f *TxFilter) count(o Outcome) {
	switch o {
	case OutcomeCommitted:
		f.committed.Add(1)
	case OutcomeDuplicate:
		f.duplicates.Add(1)
	case OutcomeRolledBack:
		f.rolledBack.Add(1)
	}
}

// isRetryable reports whether running the transaction again may succeed.
func isRetryable(err error) bool { return isSerialization(err) || isUnavailable(err) }

// isSerialization reports a serialization failure or a deadlock, which PostgreSQL asks
// the client to retry.
func isSerialization(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && (pe.Code == "40001" || pe.Code == "40P01")
}

// isUnavailable reports an error of reaching the database: a network error, a failed
// connection, a connection exception (class 08) or a server shutting down or starting
// (57P01-57P03).
func isUnavailable(err error) bool {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return strings.HasPrefix(pe.Code, "08") || pe.Code == "57P01" || pe.Code == "57P02" || pe.Code == "57P03"
	}
	var ce *pgconn.ConnectError
	var ne net.Error
	return errors.As(err, &ce) || errors.As(err, &ne) || pgconn.Timeout(err) || pgconn.SafeToRetry(err)
}

func (f *TxFilter) result(ctx context.Context, e TxResult) {
	hooks.Call(ctx, f.o.Logger, "pgdedupe", "TxResultHook", f.resultHooks, func(h TxResultHook) { h.OnTxResult(ctx, e) })
}

func (f *TxFilter) txError(ctx context.Context, e *TxError) {
	hooks.Call(ctx, f.o.Logger, "pgdedupe", "TxErrorHook", f.errorHooks, func(h TxErrorHook) { h.OnTxError(ctx, e) })
}
