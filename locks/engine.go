package locks

import (
	"container/heap"
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/cenkalti/backoff/v4"

	"github.com/sbkit/sbkit"
)

// Engine renews the locks of the messages added to it, with one scheduler goroutine and
// Options.Workers renewal goroutines, all started by New and stopped by Close. Its methods
// are safe for concurrent use.
type Engine struct {
	r   sbkit.LockRenewer
	cfg config

	ctx    context.Context // cancelled by Close: stops goroutines and in-flight renewals
	cancel context.CancelFunc
	wake   chan struct{} // the heap's head changed
	work   chan *Lock
	wg     sync.WaitGroup

	mu     sync.Mutex
	heap   lockHeap
	all    map[*Lock]struct{} // every lock not yet done
	closed bool

	renewed     atomic.Int64
	renewErrors atomic.Int64
	lost        atomic.Int64
}

// Stats are counters of an Engine since New.
type Stats struct {
	Tracked     int   // locks currently tracked
	Renewed     int64 // successful renewals
	RenewErrors int64 // failed renewal attempts (retried or not)
	Lost        int64 // locks reported lost
}

// New starts an engine that renews locks through r. A nil options means the defaults. It
// returns ErrNilRenewer for a nil r and an error wrapping ErrInvalidOptions for options out
// of range.
func New(r sbkit.LockRenewer, options *Options) (*Engine, error) {
	if r == nil {
		return nil, ErrNilRenewer
	}
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
		work:   make(chan *Lock),
		all:    make(map[*Lock]struct{}),
	}
	e.wg.Add(1 + cfg.workers)
	go e.schedule()
	for range cfg.workers {
		go e.renewWorker()
	}
	return e, nil
}

// Add starts tracking message's lock and schedules its renewal from message.LockedUntil.
// From now until Release, only the engine may touch message.LockedUntil. onLost, if not
// nil, is called at most once, on an engine goroutine, with a *LostError when the lock is
// lost; it must be fast and must not call Release. Add returns sbkit.ErrNilMessage,
// ErrNoLock for a message without LockedUntil, and ErrClosed after Close.
func (e *Engine) Add(message *azservicebus.ReceivedMessage, onLost func(cause error)) (*Lock, error) {
	if message == nil {
		return nil, sbkit.ErrNilMessage
	}
	if message.LockedUntil == nil {
		return nil, ErrNoLock
	}
	now := time.Now()
	l := &Lock{
		e:           e,
		msg:         message,
		onLost:      onLost,
		added:       now,
		done:        make(chan struct{}),
		index:       -1,
		lockedUntil: *message.LockedUntil,
		period:      message.LockedUntil.Sub(now),
	}
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
		Tracked:     tracked,
		Renewed:     e.renewed.Load(),
		RenewErrors: e.renewErrors.Load(),
		Lost:        e.lost.Load(),
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
		e.heap, e.all = nil, nil
	}
	e.mu.Unlock()
	e.cancel()
	stopped := make(chan struct{})
	go func() { e.wg.Wait(); close(stopped) }()
	select {
	case <-stopped:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
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
	heap.Push(&e.heap, l)
	if l.index == 0 {
		e.wakeUp()
	}
}

// doneLocked ends the tracking of l.
func (e *Engine) doneLocked(l *Lock) {
	if l.index >= 0 {
		heap.Remove(&e.heap, l.index)
		l.index = -1
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

// schedule is the single scheduler goroutine: it hands due locks to the workers and sleeps
// on one timer until the next one is due.
func (e *Engine) schedule() {
	defer e.wg.Done()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	var due []*Lock
	for {
		e.mu.Lock()
		now := time.Now()
		due = due[:0]
		for len(e.heap) > 0 && !e.heap[0].due.After(now) {
			due = append(due, heap.Pop(&e.heap).(*Lock))
		}
		wait := time.Duration(-1)
		if len(e.heap) > 0 {
			wait = e.heap[0].due.Sub(now)
		}
		e.mu.Unlock()

		for i, l := range due {
			select {
			case e.work <- l:
				due[i] = nil
			case <-e.ctx.Done():
				return
			}
		}
		if len(due) > 0 {
			continue // time went by while handing out: look again
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

func (e *Engine) renewWorker() {
	defer e.wg.Done()
	for {
		select {
		case l := <-e.work:
			e.renew(l)
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
		if reason == ReasonExpired && isConnectionLost(l.lastErr) {
			reason = ReasonConnectionLost
		}
		e.loseLocked(l, reason, l.lastErr)
		return // loseLocked unlocked
	}
	ctx, cancel := context.WithDeadline(e.ctx, l.lockedUntil)
	l.state, l.cancelRenew, l.renewDone = stateRenewing, cancel, make(chan struct{})
	e.mu.Unlock()

	start := time.Now()
	err := e.r.RenewMessageLock(ctx, l.msg, nil)
	var until time.Time
	if err == nil {
		if l.msg.LockedUntil == nil {
			err = ErrNoLock
		} else {
			until = *l.msg.LockedUntil
		}
	}
	cancel()

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
		l.lockedUntil, l.bo, l.lastErr = until, nil, nil
		e.scheduleLocked(l)
		e.mu.Unlock()
		e.cfg.logger.Debug("locks: renewed", "messageID", l.msg.MessageID, "lockedUntil", until)
		return
	}
	e.renewErrors.Add(1)
	switch {
	case sbkit.IsLockLost(err):
		reason := ReasonLockLost
		if isConnectionLost(l.lastErr) {
			reason = ReasonConnectionLost
		}
		e.loseLocked(l, reason, err)
		return
	case errors.Is(err, context.DeadlineExceeded) && !time.Now().Before(l.lockedUntil):
		reason := ReasonExpired
		if isConnectionLost(l.lastErr) {
			reason, err = ReasonConnectionLost, fmt.Errorf("%w (after: %w)", err, l.lastErr)
		}
		e.loseLocked(l, reason, err)
		return
	case sbkit.IsPermanent(err) && !errors.Is(err, context.DeadlineExceeded):
		e.loseLocked(l, ReasonRenewFailed, err)
		return
	}
	// Retry: the error may be transient, and a renewal is harmless to repeat.
	l.lastErr = err
	if l.bo == nil {
		l.bo = e.cfg.newBackOff()
	}
	next := l.bo.NextBackOff()
	retryAt := time.Now().Add(next)
	if next == backoff.Stop || !retryAt.Before(l.lockedUntil) {
		reason := ReasonExpired
		if isConnectionLost(err) {
			reason = ReasonConnectionLost
		}
		l.kind, l.due, l.expired = dueExpire, l.lockedUntil, reason
	} else {
		l.kind, l.due = dueRenew, retryAt
	}
	e.pushLocked(l)
	e.mu.Unlock()
	e.cfg.logger.Debug("locks: renewal failed, will retry", "messageID", l.msg.MessageID, "error", err)
	if e.cfg.onRenewError != nil {
		e.cfg.onRenewError(l.msg, err)
	}
}

// loseLocked marks l lost, unlocks e.mu, and reports the loss once.
func (e *Engine) loseLocked(l *Lock, reason Reason, err error) {
	cause := &LostError{Reason: reason, LockedUntil: l.lockedUntil, Err: err}
	l.lostErr = cause
	e.doneLocked(l)
	e.mu.Unlock()
	e.lost.Add(1)
	e.cfg.logger.Warn("locks: lock lost", "messageID", l.msg.MessageID, "reason", reason.String(), "error", err)
	if l.onLost != nil {
		l.onLost(cause)
	}
}

func isConnectionLost(err error) bool {
	var sbErr *azservicebus.Error
	return errors.As(err, &sbErr) && sbErr.Code == azservicebus.CodeConnectionLost
}
