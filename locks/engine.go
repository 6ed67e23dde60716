package locks

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/cenkalti/backoff/v4"

	"github.com/sbkit/sbkit"
	"github.com/sbkit/sbkit/internal/heapq"
	"github.com/sbkit/sbkit/internal/workpool"
)

// Engine renews the locks of the messages added to it, with one scheduler goroutine,
// started by New, and renewal goroutines, started as renewals come due (at most
// Options.Workers at once) and ended once idle; Close stops them all. Its methods are
// safe for concurrent use.
type Engine struct {
	r   sbkit.LockRenewer
	cfg config

	ctx      context.Context // cancelled by Close: stops goroutines and in-flight renewals
	cancel   context.CancelFunc
	wake     chan struct{}         // the heap's head changed
	renewers *workpool.Pool[*Lock] // renewal calls in flight
	wg       sync.WaitGroup        // the scheduler

	mu     sync.Mutex
	heap   *heapq.Heap[*Lock] // by due time
	all    map[*Lock]struct{} // every lock not yet done
	closed bool

	renewed     atomic.Int64
	renewErrors atomic.Int64
	lost        atomic.Int64
}

// Stats are counters of an Engine since New.
type Stats struct {
	Tracked     int64 // gauge: locks currently tracked
	Renewed     int64 // successful renewals
	RenewErrors int64 // failed renewal attempts (retried or not)
	LocksLost   int64 // locks reported lost
}

// New starts an engine that renews locks through r. A nil options means the defaults. r
// may be nil for an engine that renews only session locks ([Engine.AddSession]); Add then
// returns ErrNilRenewer. New returns an error wrapping ErrInvalidOptions for options out
// of range.
func New(r sbkit.LockRenewer, options *Options) (*Engine, error) {
	cfg, err := newConfig(options)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	e := &Engine{
		r:      r,
		cfg:    cfg,
		ctx:    ctx,
		cancel: cancel,
		wake:   make(chan struct{}, 1),
		all:    make(map[*Lock]struct{}),
		heap:   newLockHeap(),
	}
	e.renewers = workpool.New(cfg.workers, e.renew)
	e.wg.Add(1)
	go e.schedule()
	return e, nil
}

// Add starts tracking message's lock and schedules its renewal from message.LockedUntil.
// From now until Release, only the engine may touch message.LockedUntil. ctx gives the
// values that the engine's hooks receive for this lock (a trace, the caller's own
// bookkeeping); its cancellation is ignored: Release ends the tracking. A lost lock is
// reported once, to the [LockLostHook]s and through [Lock.Done] and [Lock.Err]. Add
// returns [sbkit.ErrNilMessage], ErrNoLock for a message without LockedUntil, and
// ErrClosed after Close.
func (e *Engine) Add(ctx context.Context, message *azservicebus.ReceivedMessage) (*Lock, error) {
	if message == nil {
		return nil, sbkit.ErrNilMessage
	}
	if message.LockedUntil == nil {
		return nil, ErrNoLock
	}
	if e.r == nil {
		return nil, ErrNilRenewer
	}
	return e.track(&Lock{ctx: ctx, msg: message}, *message.LockedUntil)
}

// track starts tracking l, a message or session lock that expires at until.
func (e *Engine) track(l *Lock, until time.Time) (*Lock, error) {
	now := time.Now()
	l.e, l.added, l.done, l.index = e, now, make(chan struct{}), -1
	l.lockedUntil, l.period = until, until.Sub(now)
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return nil, ErrClosed
	}
	e.all[l] = struct{}{}
	e.scheduleLocked(l)
	return l, nil
}

// Stats returns the engine's counters.
func (e *Engine) Stats() Stats {
	e.mu.Lock()
	tracked := len(e.all)
	e.mu.Unlock()
	return Stats{
		Tracked:     int64(tracked),
		Renewed:     e.renewed.Load(),
		RenewErrors: e.renewErrors.Load(),
		LocksLost:   e.lost.Load(),
	}
}

// Close stops every renewal and the engine's goroutines, and waits for them until ctx
// ends (then it returns ctx.Err()). Locks still tracked are dropped without being reported
// lost: their Done channels close and their Err stays nil. Close is safe to call twice.
func (e *Engine) Close(ctx context.Context) error {
	e.mu.Lock()
	if !e.closed {
		e.closed = true
		for l := range e.all {
			l.index = -1
			l.state = stateDone
			close(l.done)
		}
		e.heap, e.all = newLockHeap(), nil
	}
	e.mu.Unlock()
	e.cancel()
	stopped := make(chan struct{})
	go func() {
		e.wg.Wait() // the scheduler, which hands out renewals, first
		e.renewers.Close()
		e.renewers.Wait()
		close(stopped)
	}()
	select {
	case <-stopped:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// newLockHeap orders locks by due time; each lock keeps its index so that Release
// removes it in O(log n).
func newLockHeap() *heapq.Heap[*Lock] {
	return heapq.New(func(a, b *Lock) bool { return a.due.Before(b.due) }, func(l *Lock, i int) { l.index = i })
}

// scheduleLocked pushes l for its next renewal, or for its expiry when no renewal will be
// made because of the renewal limit.
func (e *Engine) scheduleLocked(l *Lock) {
	l.kind = dueRenew
	l.due = l.lockedUntil.Add(-e.cfg.margin(l.period))
	if limit := e.cfg.limit; limit >= 0 && !l.due.Before(l.added.Add(limit)) {
		l.kind, l.due, l.expired = dueExpire, l.lockedUntil, ReasonLimit
	}
	e.pushLocked(l)
}

func (e *Engine) pushLocked(l *Lock) {
	l.state = stateWaiting
	e.heap.Push(l)
	if l.index == 0 {
		e.wakeUp()
	}
}

// doneLocked ends the tracking of l.
func (e *Engine) doneLocked(l *Lock) {
	if l.index >= 0 {
		e.heap.Remove(l.index)
	}
	l.state = stateDone
	delete(e.all, l)
	close(l.done)
}

func (e *Engine) wakeUp() {
	select {
	case e.wake <- struct{}{}:
	default:
	}
}

// schedule is the single scheduler goroutine: it hands due locks to renewal goroutines
// and sleeps on one timer until the next one is due. Handing out never blocks: every due
// lock's renewal starts at once while fewer than Options.Workers are in flight.
func (e *Engine) schedule() {
	defer e.wg.Done()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	var due []*Lock
	for {
		e.mu.Lock()
		now := time.Now()
		due = due[:0]
		for head, ok := e.heap.Peek(); ok && !head.due.After(now); head, ok = e.heap.Peek() {
			due = append(due, e.heap.Pop())
		}
		wait := time.Duration(-1)
		if head, ok := e.heap.Peek(); ok {
			wait = head.due.Sub(now)
		}
		e.mu.Unlock()

		for i, l := range due {
			e.renewers.Submit(l)
			due[i] = nil
		}
		if wait >= 0 {
			timer.Reset(wait)
		} else {
			timer.Stop()
		}
		select {
		case <-timer.C:
		case <-e.wake:
		case <-e.ctx.Done():
			return
		}
	}
}

// renew handles one due lock: it reports it lost when it ran out, or renews it once and
// schedules what comes next.
func (e *Engine) renew(l *Lock) {
	e.mu.Lock()
	if l.state != stateWaiting || l.index >= 0 {
		e.mu.Unlock() // released (or re-pushed) since it was popped
		return
	}
	if l.kind == dueExpire || !time.Now().Before(l.lockedUntil) {
		reason := ReasonExpired
		if l.kind == dueExpire {
			reason = l.expired
		}
		e.loseLocked(l, reason, l.lastErr, nil)
		return // loseLocked unlocked
	}
	ctx, cancel := context.WithDeadline(e.ctx, l.lockedUntil)
	l.state, l.cancelRenew, l.renewDone = stateRenewing, cancel, make(chan struct{})
	e.mu.Unlock()

	start := time.Now()
	until, err := l.renewOnce(ctx)
	cancel()
	took := time.Since(start)

	e.mu.Lock()
	close(l.renewDone)
	if l.state != stateRenewing || e.closed {
		e.mu.Unlock() // released while renewing (Release is waiting), or closing
		return
	}
	if err == nil {
		e.renewed.Add(1)
		l.renewals++
		l.period = max(l.period, until.Sub(start))
		l.lockedUntil, l.bo, l.lastErr, l.attempts = until, nil, nil, 0
		renewals := l.renewals
		e.scheduleLocked(l)
		e.mu.Unlock()
		k, id := l.logID()
		e.cfg.logger.Debug("locks: renewed", k, id, "lockedUntil", until)
		e.cfg.hooks.onRenew(l.ctx, Renewal{Message: l.msg, SessionID: l.SessionID(), LockedUntil: until, Renewals: renewals, Duration: took})
		return
	}
	e.renewErrors.Add(1)
	l.attempts++
	failure := &RenewError{Message: l.msg, SessionID: l.SessionID(), Err: err, Attempt: l.attempts, Duration: took}
	var lost Reason
	switch {
	case sbkit.IsLockLost(err):
		lost = ReasonLockLost
	case errors.Is(err, context.DeadlineExceeded) && !time.Now().Before(l.lockedUntil):
		lost = ReasonExpired
	case sbkit.IsPermanent(err) && !errors.Is(err, context.DeadlineExceeded):
		lost = ReasonRenewFailed
	}
	if lost != 0 {
		e.loseLocked(l, lost, err, failure)
		return
	}
	// Retry: the error may be transient, and a renewal is harmless to repeat.
	l.lastErr = err
	if l.bo == nil {
		l.bo = e.cfg.retry.BackOff()
	}
	next := l.bo.NextBackOff()
	retryAt := time.Now().Add(next)
	if next == backoff.Stop || !retryAt.Before(l.lockedUntil) {
		l.kind, l.due, l.expired = dueExpire, l.lockedUntil, ReasonExpired
	} else {
		l.kind, l.due = dueRenew, retryAt
		failure.WillRetry = true
	}
	e.pushLocked(l)
	e.mu.Unlock()
	k, id := l.logID()
	e.cfg.logger.Debug("locks: renewal failed", k, id, "error", err, "willRetry", failure.WillRetry)
	e.cfg.hooks.onRenewError(l.ctx, failure)
}

// loseLocked marks l lost for reason, unlocks e.mu, and reports the loss once, after the
// failed attempt that caused it (failure), if any. A lock that expired or was found lost
// after an attempt that found the connection dropped (l.lastErr) is reported lost with
// ReasonConnectionLost: locks do not survive their connection, so that is what lost it
// (an expiry's error, a deadline, then names the connection's loss too).
func (e *Engine) loseLocked(l *Lock, reason Reason, err error, failure *RenewError) {
	if (reason == ReasonExpired || reason == ReasonLockLost) && isConnectionLost(l.lastErr) {
		if reason == ReasonExpired && err != l.lastErr {
			err = fmt.Errorf("%w (after: %w)", err, l.lastErr)
		}
		reason = ReasonConnectionLost
	}
	cause := &LostError{Reason: reason, SessionID: l.SessionID(), LockedUntil: l.lockedUntil, Err: err}
	l.lostErr = cause
	e.doneLocked(l)
	e.mu.Unlock()
	e.lost.Add(1)
	k, id := l.logID()
	e.cfg.logger.Warn("locks: lock lost", k, id, "reason", reason.String(), "error", err)
	if failure != nil {
		e.cfg.hooks.onRenewError(l.ctx, failure)
	}
	e.cfg.hooks.onLockLost(l.ctx, LockLoss{Message: l.msg, SessionID: l.SessionID(), Cause: cause})
}

func isConnectionLost(err error) bool {
	var sbErr *azservicebus.Error
	return errors.As(err, &sbErr) && sbErr.Code == azservicebus.CodeConnectionLost
}
