package dedupe

import (
	"context"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/sbkit/sbkit"
)

// Filter skips duplicate deliveries around a handler (see the package documentation).
// Make one with New (the zero value is not usable); use Middleware or Wrap. It is safe
// for concurrent use. It owns no long-lived goroutine (lease refreshes run on timers
// that are stopped before the wrapped handler returns), so it needs no Close.
//
// Result of the wrapped handler, which decides the settlement:
//   - the key is done: sbkit.Skip(DuplicateReason), the handler does not run;
//   - the key stays leased by another owner: an error wrapping ErrLeaseHeld (abandon);
//   - Acquire failed: a *StoreError (abandon) under FailClosed; under FailOpen the
//     handler runs unprotected and its result is returned;
//   - otherwise the handler's own result, unchanged.
//
// Trade-off when the handler succeeded but MarkDone fails: the result is still nil, so
// the message is completed (returning an error would abandon it and have it processed a
// second time at once, which is what dedupe is for avoiding). The failure is reported to
// Hooks.OnStoreError, counted and logged. The lease then stays until LeaseTTL, so if
// CompleteMessage also fails, the redelivery waits for the lease and, once it expires,
// is processed again: a duplicate is possible only when both the store and the broker
// fail for the same message.
type Filter struct {
	store Store
	o     Options
	c     counters

	ownerPrefix string
	ownerSeq    atomic.Uint64
}

// New returns a Filter over store. A nil store means a MemoryStore with default options
// (duplicates recognised within this process only). nil options mean defaults. It returns
// an error wrapping ErrInvalidOptions for negative durations, unknown policies, or an
// Entity containing ':'.
func New(store Store, opts *Options) (*Filter, error) {
	o, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	if store == nil {
		if store, err = NewMemoryStore(nil); err != nil {
			return nil, err
		}
	}
	return &Filter{store: store, o: o, ownerPrefix: sbkit.NewMessageID() + "/"}, nil
}

// Middleware returns f.Wrap as an sbkit.Middleware.
func (f *Filter) Middleware() sbkit.Middleware { return f.Wrap }

// Wrap returns a handler that runs next at most once per key (see Filter). A nil next
// gives a handler that returns ErrNilHandler.
func (f *Filter) Wrap(next sbkit.Handler) sbkit.Handler {
	if next == nil {
		return func(context.Context, *azservicebus.ReceivedMessage) error { return ErrNilHandler }
	}
	return func(ctx context.Context, m *azservicebus.ReceivedMessage) error {
		return f.handle(ctx, m, next)
	}
}

// Stats returns a snapshot of the Filter's counters.
func (f *Filter) Stats() Stats { return f.c.snapshot() }

func (f *Filter) handle(ctx context.Context, m *azservicebus.ReceivedMessage, next sbkit.Handler) error {
	if m == nil {
		return fmt.Errorf("dedupe: %w", sbkit.ErrNilMessage)
	}
	key := f.o.Key(m)
	if key == "" {
		f.c.missingKey.Add(1)
		if f.o.MissingKey == MissingKeyDeadLetter {
			return sbkit.DeadLetter(MissingKeyReason, ErrMissingKey.Error(), ErrMissingKey)
		}
		f.c.unprotected.Add(1)
		return next(ctx, m)
	}
	f.c.checked.Add(1)
	owner := f.ownerPrefix + strconv.FormatUint(f.ownerSeq.Add(1), 10)

	state, err := f.acquire(ctx, m, key, owner)
	if err != nil {
		if ctx.Err() != nil { // our context ended: not the store's fault
			return fmt.Errorf("dedupe: key %q: %w", key, context.Cause(ctx))
		}
		serr := f.storeError(ctx, OpAcquire, key, err)
		if f.o.StoreFailure == FailOpen {
			f.c.unprotected.Add(1)
			return next(ctx, m)
		}
		return serr
	}
	switch state {
	case Done:
		f.c.duplicates.Add(1)
		f.o.Logger.DebugContext(ctx, "dedupe: duplicate skipped", "key", key, "deliveryCount", m.DeliveryCount)
		if h := f.o.Hooks.OnDuplicate; h != nil {
			h(ctx, key, m)
		}
		return sbkit.Skip(DuplicateReason)
	case InProgress:
		f.c.leaseHeld.Add(1)
		f.o.Logger.DebugContext(ctx, "dedupe: lease held by another worker, abandoning", "key", key)
		return fmt.Errorf("%w: key %q", ErrLeaseHeld, key)
	case Acquired:
		return f.run(ctx, m, next, key, owner)
	}
	return f.storeError(ctx, OpAcquire, key, fmt.Errorf("unknown state %v", state))
}

// acquire calls Store.Acquire and, under ContendedWait, polls while another owner holds
// the lease. An error is the store's, or context.Cause(ctx) when ctx ends while waiting.
func (f *Filter) acquire(ctx context.Context, m *azservicebus.ReceivedMessage, key, owner string) (State, error) {
	state, err := f.tryAcquire(ctx, key, owner)
	if err != nil || state != InProgress {
		return state, err
	}
	f.c.contended.Add(1)
	if h := f.o.Hooks.OnContended; h != nil {
		h(ctx, key, m)
	}
	if f.o.Contended == ContendedAbandon {
		return InProgress, nil
	}
	deadline := time.Now().Add(f.o.LeaseWait)
	for {
		wait := min(f.o.LeasePoll, time.Until(deadline))
		if wait <= 0 {
			return InProgress, nil
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return 0, context.Cause(ctx)
		case <-t.C:
		}
		state, err = f.tryAcquire(ctx, key, owner)
		if err != nil || state != InProgress {
			return state, err
		}
	}
}

func (f *Filter) tryAcquire(ctx context.Context, key, owner string) (State, error) {
	sctx, cancel := context.WithTimeout(ctx, f.o.StoreTimeout)
	defer cancel()
	return f.store.Acquire(sctx, key, owner, f.o.LeaseTTL)
}

// run runs next under the lease, then marks the key done (nil result) or releases the
// lease (any other result, or a panic, which continues after the release).
func (f *Filter) run(ctx context.Context, m *azservicebus.ReceivedMessage, next sbkit.Handler, key, owner string) error {
	f.c.processed.Add(1)
	var r *renewal
	if !f.o.DisableLeaseRenewal {
		r = f.startRenewal(ctx, key, owner)
	}
	succeeded := false
	defer func() {
		if !succeeded {
			r.stop()
			f.release(ctx, key, owner)
		}
	}()
	if err := next(ctx, m); err != nil {
		return err
	}
	succeeded = true
	r.stop()
	f.c.succeeded.Add(1)
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), f.o.StoreTimeout)
	defer cancel()
	if err := f.store.MarkDone(sctx, key, owner, f.o.Window); err != nil {
		f.c.markFailures.Add(1)
		f.storeError(ctx, OpMarkDone, key, err)
	}
	return nil
}

func (f *Filter) release(ctx context.Context, key, owner string) {
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), f.o.StoreTimeout)
	defer cancel()
	if err := f.store.Release(sctx, key, owner); err != nil {
		f.storeError(ctx, OpRelease, key, err)
	}
}

func (f *Filter) storeError(ctx context.Context, op Op, key string, err error) *StoreError {
	serr := &StoreError{Op: op, Key: key, Err: err}
	f.c.storeErrors.Add(1)
	f.o.Logger.WarnContext(ctx, "dedupe: store error", "op", string(op), "key", key, "err", err)
	if h := f.o.Hooks.OnStoreError; h != nil {
		h(ctx, serr)
	}
	return serr
}
