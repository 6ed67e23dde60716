package dedupe

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/cenkalti/backoff/v4"
)

// minRefreshRetry is the shortest wait before a failed refresh is retried, so that a
// store that fails at once is not called in a tight loop near the lease's end.
const minRefreshRetry = 10 * time.Millisecond

// lease tracks a running handler's processing lease. It refreshes the lease every
// Options.LeaseRenewal, retries a failed refresh with backoff inside the lease's
// remaining time, and cancels the handler's context when the lease is lost: a refresh
// found the key taken, or no refresh succeeded before the lease ran out. Both run on
// timers (no goroutine while idle). stop waits for a refresh in flight, so no refresh
// can recreate a lease after it was released or marked done.
type lease struct {
	f          *Filter
	parent     context.Context // the handler's context, before the lease's cancellation
	cancel     context.CancelCauseFunc
	m          *azservicebus.ReceivedMessage
	key, owner string
	start      time.Time

	call sync.Mutex // held during a refresh's store call, and taken by stop

	mu         sync.Mutex
	stopped    bool
	cause      error     // non-nil once the lease is lost
	validUntil time.Time // when the lease may have expired in the store
	lastErr    error     // the last refresh error since the last success
	failures   int       // failed refreshes since the last success (under call)
	retries    backoff.BackOff
	renewT     *time.Timer // nil with DisableLeaseRenewal
	expiryT    *time.Timer
}

// newLease tracks the lease that owner acquired on key by a store call that started at
// acquiredAt, once begin is called.
func (f *Filter) newLease(ctx context.Context, m *azservicebus.ReceivedMessage, key, owner string, acquiredAt time.Time) *lease {
	return &lease{f: f, parent: ctx, m: m, key: key, owner: owner, start: acquiredAt}
}

// begin starts the timers; cancel cancels the handler's context.
func (l *lease) begin(cancel context.CancelCauseFunc) {
	f := l.f
	l.cancel = cancel
	l.mu.Lock()
	defer l.mu.Unlock()
	l.validUntil = l.start.Add(f.o.LeaseTTL)
	l.expiryT = time.AfterFunc(time.Until(l.validUntil), l.expire)
	if !f.o.DisableLeaseRenewal {
		l.renewT = time.AfterFunc(f.o.LeaseRenewal, l.renew)
	}
}

// ctx returns the handler's values without its cancellation, for store calls, logs and
// hooks after the handler's context may have ended. Made on demand: most handlers end
// before their first refresh.
func (l *lease) ctx() context.Context { return context.WithoutCancel(l.parent) }

// renew refreshes the lease once and schedules the next refresh.
func (l *lease) renew() {
	l.call.Lock()
	defer l.call.Unlock()
	f := l.f
	l.mu.Lock()
	if l.stopped || l.cause != nil {
		l.mu.Unlock()
		return
	}
	start := time.Now()
	remaining := l.validUntil.Sub(start)
	l.mu.Unlock()
	if remaining <= 0 {
		l.expire()
		return
	}
	// A refresh that outlives the lease is useless: bound the call by what is left.
	ctx := l.ctx()
	sctx, cancel := context.WithTimeout(ctx, min(f.o.StoreTimeout, remaining))
	state, err := f.store.Acquire(sctx, l.key, l.owner, f.o.LeaseTTL)
	cancel()
	switch {
	case err != nil:
		l.failures++ // only refreshes touch it, under l.call
		f.storeError(ctx, OpRenew, l.key, l.failures, err)
		l.mu.Lock()
		defer l.mu.Unlock()
		if l.stopped || l.cause != nil {
			return
		}
		l.lastErr = err
		if l.retries == nil {
			l.retries = f.refreshRetry.BackOff()
		}
		left := time.Until(l.validUntil)
		wait := max(min(l.retries.NextBackOff(), left/2), minRefreshRetry)
		if wait < left { // otherwise the expiry timer ends the lease
			l.renewT.Reset(wait)
		}
	case state != Acquired:
		l.lose(fmt.Errorf("%w: key %q: a refresh found it %s", ErrLeaseLost, l.key, state))
	default:
		l.mu.Lock()
		defer l.mu.Unlock()
		if l.stopped || l.cause != nil {
			return
		}
		f.c.leasesRenewed.Add(1)
		l.validUntil = start.Add(f.o.LeaseTTL)
		l.lastErr, l.failures = nil, 0
		if l.retries != nil {
			l.retries.Reset()
		}
		l.expiryT.Reset(time.Until(l.validUntil))
		l.renewT.Reset(f.o.LeaseRenewal)
	}
}

// expire runs when the lease may have run out: unless a refresh moved validUntil, the
// lease is lost.
func (l *lease) expire() {
	l.mu.Lock()
	if l.stopped || l.cause != nil {
		l.mu.Unlock()
		return
	}
	if left := time.Until(l.validUntil); left > 0 {
		l.expiryT.Reset(left)
		l.mu.Unlock()
		return
	}
	cause := fmt.Errorf("%w: key %q: no refresh succeeded within LeaseTTL %v", ErrLeaseLost, l.key, l.f.o.LeaseTTL)
	if l.lastErr != nil {
		cause = fmt.Errorf("%w (last error: %v)", cause, l.lastErr)
	}
	l.cause = cause
	l.stopTimers()
	l.mu.Unlock()
	l.lost(cause)
}

// lose records a loss found by a refresh, unless the lease ended or was lost already.
func (l *lease) lose(cause error) {
	l.mu.Lock()
	if l.stopped || l.cause != nil {
		l.mu.Unlock()
		return
	}
	l.cause = cause
	l.stopTimers()
	l.mu.Unlock()
	l.lost(cause)
}

// lost reports a loss (once: l.cause was just set) and cancels the handler's context.
func (l *lease) lost(cause error) {
	f := l.f
	f.c.leasesLost.Add(1)
	ctx := l.ctx()
	f.o.Logger.WarnContext(ctx, "dedupe: lease lost while the handler runs; cancelling it", "key", l.key, "cause", cause)
	e := LeaseLost{Key: l.key, Message: l.m, Cause: cause, Held: time.Since(l.start)}
	callHooks(f, ctx, "LeaseLostHook", f.h.leaseLost, func(h LeaseLostHook) { h.OnLeaseLost(ctx, e) })
	l.cancel(cause)
}

func (l *lease) stopTimers() {
	l.expiryT.Stop()
	if l.renewT != nil {
		l.renewT.Stop()
	}
}

// stop ends the tracking, waits for a refresh in flight, and returns the cause of the
// loss, or nil when the lease was held until now.
func (l *lease) stop() error {
	l.mu.Lock()
	l.stopped = true
	l.stopTimers()
	cause := l.cause
	l.mu.Unlock()
	l.call.Lock()
	//lint:ignore SA2001 an empty critical section: wait for a refresh in flight
	l.call.Unlock()
	return cause
}
