package pgoutbox

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/sbkit/sbkit"
	ihooks "github.com/sbkit/sbkit/outbox/pgoutbox/internal/hooks"
	"github.com/sbkit/sbkit/outbox/pgoutbox/internal/retry"
	"github.com/sbkit/sbkit/sender"
)

// Destinations returns the sender for one destination (a queue or topic name, as given
// to [Outbox.Add]): for example a client's NewSender ([ClientDestinations]), or sbtest's
// Namespace.NewSender. The relay calls it once per destination per Run, and again when
// that destination's sender failed for good: it was closed (CodeClosed), or the broker
// detached its link for a reason the SDK does not recover from (the entity deleted or
// disabled, the rights revoked: an [*azservicebus.Error] with CodeNotFound or
// CodeUnauthorizedAccess, or the bare amqp:not-found the SDK returns for such a detach),
// so that an entity deleted and re-created is sent to again. It should return a new
// sender each time: the relay wraps the result in a [sender.Sender] and closes it when
// Run returns, or when it replaces it, if it has a Close(context.Context) error method
// (as [*azservicebus.Sender] and sbtest's sender do). An error is the send error of
// that destination's rows (an [*azservicebus.Error] with CodeNotFound dead-letters
// them).
type Destinations func(destination string) (sbkit.MessageSender, error)

// ClientDestinations returns [Destinations] that make a new sender of client for each
// destination, with opts (nil for the SDK's defaults). client must not be nil.
func ClientDestinations(client *azservicebus.Client, opts *azservicebus.NewSenderOptions) Destinations {
	return func(destination string) (sbkit.MessageSender, error) {
		return client.NewSender(destination, opts)
	}
}

// ErrNilOutbox is returned by NewRelay for a nil outbox.
var ErrNilOutbox = errors.New("pgoutbox: nil outbox")

// ErrNilDestinations is returned by NewRelay for nil Destinations.
var ErrNilDestinations = errors.New("pgoutbox: nil destinations")

// ErrClosed is returned by Run after Close.
var ErrClosed = errors.New("pgoutbox: relay closed")

// ErrDeadLetterIDTaken is the error of a row the relay could not move to the
// dead-letter table because a dead-letter row already has its id: the outbox's ids
// restarted (TRUNCATE ... RESTART IDENTITY, or the outbox table re-created while the
// dead-letter table kept its rows). The row stays in the outbox with this error (and
// the send's) as its last_error, and is retried like a failed send (RelayResult's
// Outcome is OutcomeRetry), so nothing is lost: move the identity past the dead-letter
// table's ids (ALTER TABLE ... ALTER COLUMN id RESTART WITH ...) to let it go.
var ErrDeadLetterIDTaken = errors.New("pgoutbox: the dead-letter table already holds a row with this id (the outbox's ids restarted)")

// ErrRunning is returned by Run while another Run of the same Relay is active.
var ErrRunning = errors.New("pgoutbox: relay already running")

// errBlocked is the cause of a row not sent because an earlier row of its order failed.
var errBlocked = errors.New("pgoutbox: an earlier message of the same order was not sent")

// errLeaseEnding is the cause of a row not sent within half its claim's Lease.
var errLeaseEnding = errors.New("pgoutbox: claim's lease ending")

// errClosing is the cause of a row not sent because the relay was closing.
var errClosing = errors.New("pgoutbox: relay closing")

// dbRetry paces the relay's retries of failed database calls.
var dbRetry = retry.Policy{MaxRetries: retry.Unlimited, RetryDelay: 100 * time.Millisecond, MaxRetryDelay: 5 * time.Second}

// Relay sends the outbox's committed rows to their destinations through [sender.Sender]
// (pipelined and batched, one per destination), deletes each row once the broker
// accepted its message, and moves the rows the broker refuses for good to the
// dead-letter table. Make one with NewRelay, start it with Run, stop it with Close. Its
// methods are safe for concurrent use.
//
// Many relays, in one process or many, may run on one outbox. A relay claims rows in a
// transaction of its own that locks them (FOR UPDATE SKIP LOCKED: a row another relay
// holds is skipped) and keeps them locked while they are sent; once their outcomes are
// known it deletes the sent rows (moves the refused ones, reschedules the failed ones)
// in that transaction and commits. So a row is sent by one relay at a time, and deleted
// only after the broker accepted its message. A relay that crashed gives its rows up at
// once: its transactions end with its connections. A relay that is alive but stuck, or
// cut off from the database without its connections being closed, gives them up after
// [RelayOptions.Lease], when PostgreSQL ends a claim's transaction the relay stayed
// silent on for so long; the relay stops sending a claim's rows at half the Lease, so
// nothing of them is in flight by then. One case escapes this: when the connection of a
// live relay's claim is closed under it (the database restarts or fails over, a proxy
// or pooler in between restarts, an administrator terminates the session), its rows are
// free at once, and another relay may send them while the requests of the first one
// are still in flight (until it learns of the loss at its next use of the connection, at
// most half a Lease later). The copies carry the same MessageID. Because a row is deleted
// only after the broker accepted its message, a crash between the two makes a relay send
// it again with the same MessageID too: with duplicate detection on the destination
// (Service Bus's requiresDuplicateDetection) the broker accepts each message once.
//
// Order: a row is sent only after every earlier row of its order was sent (or
// dead-lettered). An order is a destination and a SessionID (or, without one, a
// PartitionKey), or a destination and a transaction for messages with neither. A claim
// takes a row when its predecessor is in the same claim, or is one the relay holds in
// an earlier claim of its own whose order has not failed: the relay claims the next rows
// of a session or a transaction while the earlier ones are in flight, up to about twice
// [RelayOptions.ClaimBatch] rows per order (see there). The rows of an order go through
// the ordered sender ([sender.Options.Ordered], with the transaction as
// [sender.Options.OrderKey] for messages without a key): batched together, one request
// at a time, in id order; the rows that wait for the order's request in flight wait in
// the relay (outside the sender's window) and go next, as many as the sender's window
// has room for (MaxBatchMessages may split them into several requests, sent one after
// another).
// When a row fails, the later rows of its order (in every claim of the relay) are not
// sent, and are retried after it; a row that is dead-lettered does not hold back the rows
// after it. A row whose predecessor another relay holds is left to that relay.
//
// The relay wakes when Add's transaction commits (LISTEN/NOTIFY) or [Outbox.Notify] is
// called, when its own rows finish, and every [RelayOptions.PollInterval]. It keeps database connections of its
// own, outside the outbox's pool: one per open claim ([RelayOptions.MaxOpenClaims]) and
// one for LISTEN. See [RelayOptions] for retries and dead-lettering.
type Relay struct {
	ob    *Outbox
	dests Destinations
	o     RelayOptions
	retry retry.Policy // MaxRetries of non-transient errors
	delay retry.Policy // the delays, unbounded

	window      int           // the senders' MaxInFlightMessages
	windowBytes int64         // the senders' MaxInFlightBytes
	defaultTTL  time.Duration // the senders' DefaultTTL

	resultHooks []RelayResultHook
	errorHooks  []RelayErrorHook
	stats       relayCounters

	beginSQL, claimSQL, relockSQL, loadSQL, sentSQL, deadSQL, deadTakenSQL, retrySQL string

	mu     sync.Mutex
	cur    *run
	closed bool
}

// NewRelay returns a relay for ob's rows that sends through dests. nil options mean
// defaults. It returns [ErrNilOutbox] for a nil ob, [ErrNilDestinations] for a nil
// dests, and an error wrapping [ErrInvalidOptions] for options it cannot use (Sender's
// included) or a hook that implements none of the relay's hook interfaces. NewRelay
// starts no goroutine and makes no connection.
func NewRelay(ob *Outbox, dests Destinations, opts *RelayOptions) (*Relay, error) {
	switch {
	case ob == nil:
		return nil, ErrNilOutbox
	case dests == nil:
		return nil, ErrNilDestinations
	}
	o, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	probe, err := sender.New(nopSender{}, o.Sender)
	if err != nil {
		return nil, fmt.Errorf("%w: Sender: %w", ErrInvalidOptions, err)
	}
	_ = probe.Close(context.Background())
	p := retry.Resolve(o.Retry, relayRetryDefaults)
	r := &Relay{ob: ob, dests: dests, o: o, retry: p,
		delay:       retry.Policy{MaxRetries: retry.Unlimited, RetryDelay: p.RetryDelay, MaxRetryDelay: p.MaxRetryDelay},
		resultHooks: ihooks.Select[RelayResultHook](o.Hooks), errorHooks: ihooks.Select[RelayErrorHook](o.Hooks)}
	r.window = o.Sender.MaxInFlightMessages
	if r.window == 0 {
		r.window = sender.DefaultMaxInFlightMessages
	}
	r.windowBytes = o.Sender.MaxInFlightBytes
	if r.windowBytes == 0 {
		r.windowBytes = sender.DefaultMaxInFlightBytes
	}
	r.defaultTTL = o.Sender.DefaultTTL
	r.buildSQL()
	return r, nil
}

// Stats returns a snapshot of the relay's counters, across its runs.
func (r *Relay) Stats() RelayStats { return r.stats.snapshot() }

// Owner returns the relay's name, the application_name of its connections
// ([RelayOptions.Owner]).
func (r *Relay) Owner() string { return r.o.Owner }

// Run relays until ctx ends or Close is called. It claims rows, sends them and marks
// them; database errors are reported to the [RelayErrorHook]s and retried with backoff,
// so Run does not return for them.
//
// When ctx ends, Run stops claiming and lets the rows in flight finish for
// [RelayOptions.ShutdownGrace], or until the context of a Close ends if that comes
// first (Close's context alone when Close is called instead of ctx ending); then it
// cancels the sends still running and ends their claims: the rows not sent are free for
// another relay at once, and the sent ones are deleted if the database answers within a
// second (otherwise they are sent again later, and dropped as duplicates). Then it
// closes its senders and connections and returns. No goroutine of the run remains.
//
// Run returns nil after Close, ctx's cause when ctx ended, ErrClosed when called after
// Close, or ErrRunning while another Run is active. It may be called again after it
// returned, unless Close was called.
func (r *Relay) Run(ctx context.Context) error {
	r.mu.Lock()
	switch {
	case r.closed:
		r.mu.Unlock()
		return ErrClosed
	case r.cur != nil:
		r.mu.Unlock()
		return ErrRunning
	}
	u := newRun(r)
	r.cur = u
	r.mu.Unlock()

	u.serve(ctx)

	r.mu.Lock()
	r.cur = nil
	closed := r.closed
	r.mu.Unlock()
	close(u.done)
	if closed {
		return nil
	}
	return context.Cause(ctx)
}

// Close stops the relay: it stops claiming, waits for the rows in flight to be sent and
// marked until ctx ends, then cancels the rest (see Run), and waits for Run to return.
// ctx's deadline holds whenever Close is called: after Run's context ended (its
// ShutdownGrace, even a negative one, does not outlast ctx) and during another Close
// (the earliest deadline of them all cuts the rows short). Close returns nil when every
// row in flight finished, and ctx's error when some were cut short, or when ctx ended
// before Run returned (Run then returns within about a second, once the marks of the
// cut rows are written or given up). Closing a relay that is not running, or closing
// twice, is safe.
func (r *Relay) Close(ctx context.Context) error {
	r.mu.Lock()
	r.closed = true
	u := r.cur
	r.mu.Unlock()
	if u == nil {
		return nil
	}
	u.stop(ctx)
	select {
	case <-u.done:
	case <-ctx.Done():
		// The abort is under way; the run ends within finalMarkTimeout of the database
		// answering, without the caller waiting for it.
		select {
		case <-u.done:
		default:
			return ctx.Err()
		}
	}
	if u.cutShort() {
		if err := ctx.Err(); err != nil {
			return err
		}
		return context.DeadlineExceeded
	}
	return nil
}

// dbError reports a failed database call.
func (r *Relay) dbError(ctx context.Context, op string, rows int, wait time.Duration, err error) {
	r.stats.dbErrors.Add(1)
	r.o.Logger.WarnContext(ctx, "pgoutbox: database call failed", "op", op, "rows", rows, "retryIn", wait, "err", err)
	e := &RelayError{Op: op, Rows: rows, Retry: wait, Err: err}
	ihooks.Call(ctx, r.o.Logger, "pgoutbox", "RelayErrorHook", r.errorHooks, func(h RelayErrorHook) { h.OnRelayError(ctx, e) })
}

// retryDB reports a failed database call of op and waits before the retry, pacing the
// retries with rs (dbRetry's, which never stop). It reports false, at once, when ctx
// ends first.
func (r *Relay) retryDB(ctx context.Context, rs *retry.Retries, op string, rows int, err error) bool {
	wait, _ := rs.Next()
	r.dbError(ctx, op, rows, wait, err)
	return retry.Wait(ctx, wait)
}

// result reports a row's outcome.
func (r *Relay) result(ctx context.Context, e RelayResult) {
	ihooks.Call(ctx, r.o.Logger, "pgoutbox", "RelayResultHook", r.resultHooks, func(h RelayResultHook) { h.OnRelayResult(ctx, e) })
}
