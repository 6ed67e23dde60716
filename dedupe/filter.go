package dedupe

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/sbkit/sbkit"
	"github.com/sbkit/sbkit/internal/retry"
)

// Filter skips duplicate deliveries around a handler (see the package documentation).
// Make one with [New] (the zero value is not usable); use [Filter.Middleware] or
// [Filter.Wrap]. It is safe for concurrent use. It owns no long-lived goroutine (lease
// refreshes run on timers that are stopped before the wrapped handler returns), so it
// needs no Close.
//
// Result of the wrapped handler, which decides the settlement:
//   - the key is done: [sbkit.Skip]([DuplicateReason]), the handler does not run;
//   - the key stays leased by another owner: an error wrapping [ErrLeaseHeld] (abandon);
//   - Acquire failed: under [FailClosed], a [*StoreError] (abandon) once [Options.Retry]
//     ran out; under [FailOpen] the handler runs unprotected and its result is returned;
//   - the handler's context ended while the delivery waited: an error wrapping
//     [context.Cause] (abandon);
//   - otherwise the handler's own result, except that a plain error (one that asks for
//     abandon) returned after the lease was lost is wrapped with the cause, which wraps
//     [ErrLeaseLost].
//
// Trade-off when the handler succeeded but MarkDone fails: the result is still nil, so
// the message is completed (returning an error would abandon it and have it processed a
// second time at once, which is what dedupe is for avoiding). The failure is reported to
// the [StoreErrorHook]s, counted and logged. The lease then stays until LeaseTTL, so if
// CompleteMessage also fails, the redelivery waits for the lease and, once it expires,
// is processed again: a duplicate is possible only when both the store and the broker
// fail for the same message.
type Filter struct {
	store Store
	o     Options
	h     hooks
	c     counters

	ownerPrefix  string
	ownerSeq     atomic.Uint64
	acquireRetry retry.Policy // Options.Retry resolved
	refreshRetry retry.Policy // the same, without a bound on retries
}

// New returns a Filter over store; use a [MemoryStore] for duplicates recognised within
// this process, a shared store (redisdedupe) for many workers. nil options mean
// defaults. It returns [ErrNilStore] for a nil store, and an error wrapping
// [ErrInvalidOptions] for negative durations, unknown policies, an Entity containing
// ':', or a hook of no hook interface.
func New(store Store, opts *Options) (*Filter, error) {
	if store == nil {
		return nil, ErrNilStore
	}
	o, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	f := &Filter{store: store, o: o, h: newHooks(o.Hooks), ownerPrefix: sbkit.NewMessageID() + "/"}
	f.acquireRetry = retry.Resolve(o.Retry, defaultRetry)
	f.refreshRetry = f.acquireRetry
	f.refreshRetry.MaxRetries = retry.Unlimited
	return f, nil
}

// Middleware returns the Filter as an [sbkit.Middleware]. The middleware panics with an
// error wrapping [sbkit.ErrNilHandler] when it is applied to a nil handler: that is a
// programming error, found when the chain is built rather than for every message.
func (f *Filter) Middleware() sbkit.Middleware {
	return func(next sbkit.Handler) sbkit.Handler {
		h, err := f.Wrap(next)
		if err != nil {
			panic(err)
		}
		return h
	}
}

// Wrap returns a handler that runs next at most once per key (see [Filter]). It returns
// an error wrapping [sbkit.ErrNilHandler] for a nil next.
func (f *Filter) Wrap(next sbkit.Handler) (sbkit.Handler, error) {
	if next == nil {
		return nil, fmt.Errorf("dedupe: Wrap: %w", sbkit.ErrNilHandler)
	}
	return func(ctx context.Context, m *azservicebus.ReceivedMessage) error {
		return f.handle(ctx, m, next)
	}, nil
}

// Stats returns a snapshot of the Filter's counters.
func (f *Filter) Stats() Stats { return f.c.snapshot() }

// Lease identifies the processing lease a handler runs under: the message's key and the
// owner token that holds it in the store. A store that can write a done mark inside the
// handler's own transaction uses it to commit the mark with the handler's work; the
// Filter's own MarkDone then finds the key done and leaves it.
type Lease struct {
	// Key is the message's key; Owner is the token that holds its lease.
	Key, Owner string
}

type leaseKey struct{}

// LeaseFrom returns the lease of the handler whose context ctx is (or derives
// from), and whether there is one: there is none when the handler runs unprotected.
func LeaseFrom(ctx context.Context) (Lease, bool) {
	l, ok := ctx.Value(leaseKey{}).(*lease)
	if !ok {
		return Lease{}, false
	}
	return Lease{Key: l.key, Owner: l.owner}, true
}

func (f *Filter) handle(ctx context.Context, m *azservicebus.ReceivedMessage, next sbkit.Handler) error {
	if m == nil {
		return fmt.Errorf("dedupe: %w", sbkit.ErrNilMessage)
	}
	key := f.o.Key(m)
	if key == "" {
		f.c.unkeyed.Add(1)
		if f.o.MissingKey == MissingKeyDeadLetter {
			return sbkit.DeadLetter(MissingKeyReason, ErrMissingKey.Error(), ErrMissingKey)
		}
		f.c.unprotected.Add(1)
		return next(ctx, m)
	}
	f.c.checked.Add(1)
	owner := f.ownerPrefix + strconv.FormatUint(f.ownerSeq.Add(1), 10)

	begin := time.Now()
	state, acquiredAt, err := f.acquire(ctx, m, key, owner)
	if err != nil {
		if ctx.Err() != nil { // our context ended: not the store's fault
			return fmt.Errorf("dedupe: key %q: %w", key, context.Cause(ctx))
		}
		if f.o.StoreFailure == FailOpen {
			f.c.unprotected.Add(1)
			return next(ctx, m)
		}
		return err
	}
	waited := acquiredAt.Sub(begin)
	switch state {
	case Done:
		f.c.duplicatesSkipped.Add(1)
		f.o.Logger.DebugContext(ctx, "dedupe: duplicate skipped", "key", key, "deliveryCount", m.DeliveryCount)
		callHooks(f, ctx, "DuplicateHook", f.h.duplicate, func(h DuplicateHook) {
			h.OnDuplicate(ctx, Duplicate{Key: key, Message: m, Waited: waited})
		})
		return sbkit.Skip(DuplicateReason)
	case InProgress:
		f.c.contendedAbandoned.Add(1)
		f.o.Logger.DebugContext(ctx, "dedupe: lease held by another worker, abandoning", "key", key)
		return fmt.Errorf("%w: key %q", ErrLeaseHeld, key)
	case Acquired:
		callHooks(f, ctx, "FreshHook", f.h.fresh, func(h FreshHook) {
			h.OnFresh(ctx, Fresh{Key: key, Message: m, Waited: waited})
		})
		return f.run(ctx, m, next, key, owner, acquiredAt)
	}
	return f.storeError(ctx, OpAcquire, key, 1, fmt.Errorf("unknown state %v", state))
}

// acquire calls Store.Acquire until it gives an answer to act on. While another owner
// holds the lease it polls every LeasePoll for up to LeaseWait (ContendedWait); while
// the store fails it retries with backoff (FailClosed). It returns the state and when
// the call that got it started, or the *StoreError of the last failed call, or
// context.Cause(ctx) when ctx ends while waiting.
func (f *Filter) acquire(ctx context.Context, m *azservicebus.ReceivedMessage, key, owner string) (State, time.Time, error) {
	var (
		contendedUntil time.Time // set once the key was found leased by another owner
		retries        = f.acquireRetry.Retries()
		attempt        int // failed calls in a row
		held           bool
	)
	defer func() {
		if held {
			f.c.held.Add(-1)
		}
	}()
	for {
		start := time.Now()
		state, err := f.tryAcquire(ctx, key, owner)
		var wait time.Duration
		switch {
		case err != nil && ctx.Err() != nil:
			return 0, start, context.Cause(ctx)
		case err != nil:
			attempt++
			serr := f.storeError(ctx, OpAcquire, key, attempt, err)
			if f.o.StoreFailure == FailOpen {
				return 0, start, serr
			}
			var ok bool
			if wait, ok = retries.Next(); !ok {
				f.c.storeDownAbandoned.Add(1)
				return 0, start, serr
			}
			f.c.acquireRetries.Add(1)
			f.o.Logger.DebugContext(ctx, "dedupe: holding the delivery until the store answers", "key", key, "retryIn", wait)
		case state != InProgress:
			return state, start, nil
		default:
			if contendedUntil.IsZero() {
				f.c.contended.Add(1)
				callHooks(f, ctx, "ContendedHook", f.h.contended, func(h ContendedHook) {
					h.OnContended(ctx, Contended{Key: key, Message: m, Policy: f.o.Contended})
				})
				if f.o.Contended == ContendedAbandon {
					return InProgress, start, nil
				}
				contendedUntil = start.Add(f.o.LeaseWait)
			}
			wait = f.o.LeasePoll
			if f.o.LeaseWait >= 0 {
				if wait = min(wait, time.Until(contendedUntil)); wait <= 0 {
					return InProgress, start, nil
				}
			}
		}
		if !held {
			held = true
			f.c.held.Add(1)
		}
		if !retry.Wait(ctx, wait) {
			return 0, start, context.Cause(ctx)
		}
	}
}

func (f *Filter) tryAcquire(ctx context.Context, key, owner string) (State, error) {
	sctx, cancel := context.WithTimeout(ctx, f.o.StoreTimeout)
	defer cancel()
	return f.store.Acquire(sctx, key, owner, f.o.LeaseTTL)
}

// run runs next under the lease, then marks the key done (nil result) or releases the
// lease (any other result, or a panic, which continues after the release). The handler's
// context is cancelled with a cause wrapping ErrLeaseLost when the lease is lost.
func (f *Filter) run(ctx context.Context, m *azservicebus.ReceivedMessage, next sbkit.Handler, key, owner string, acquiredAt time.Time) error {
	f.c.processed.Add(1)
	f.c.running.Add(1)
	defer f.c.running.Add(-1)
	l := f.newLease(ctx, m, key, owner, acquiredAt)
	hctx, cancel := context.WithCancelCause(context.WithValue(ctx, leaseKey{}, l))
	defer cancel(nil)
	l.begin(cancel)
	stopped := false
	defer func() {
		if !stopped { // a panic
			l.stop()
			f.release(ctx, key, owner)
		}
	}()
	err := next(hctx, m)
	lostCause := l.stop()
	stopped = true
	if err != nil {
		f.release(ctx, key, owner)
		if a, _ := sbkit.SettlementOf(err); lostCause != nil && a == sbkit.ActionAbandon && !errors.Is(err, ErrLeaseLost) {
			err = fmt.Errorf("%w: %w", err, lostCause)
		}
		return err
	}
	f.c.succeeded.Add(1)
	sctx, cancelStore := context.WithTimeout(context.WithoutCancel(ctx), f.o.StoreTimeout)
	defer cancelStore()
	if err := f.store.MarkDone(sctx, key, owner, f.o.Window); err != nil {
		f.c.markDoneErrors.Add(1)
		f.storeError(ctx, OpMarkDone, key, 1, err)
	}
	return nil
}

func (f *Filter) release(ctx context.Context, key, owner string) {
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), f.o.StoreTimeout)
	defer cancel()
	if err := f.store.Release(sctx, key, owner); err != nil {
		f.storeError(ctx, OpRelease, key, 1, err)
	}
}

func (f *Filter) storeError(ctx context.Context, op Op, key string, attempt int, err error) *StoreError {
	serr := &StoreError{Op: op, Key: key, Attempt: attempt, Err: err}
	f.c.storeErrors.Add(1)
	f.o.Logger.WarnContext(ctx, "dedupe: store error", "op", string(op), "key", key, "attempt", attempt, "err", err)
	callHooks(f, ctx, "StoreErrorHook", f.h.storeError, func(h StoreErrorHook) { h.OnStoreError(ctx, serr) })
	return serr
}
