package receiver

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/sbkit/sbkit"
	"github.com/sbkit/sbkit/locks"
)

// delivery is one received message on its way through the processor. Exactly one party
// claims it (the handler's own settlement, the processor after the handler, a shutdown, or
// the lock's loss) and that party accounts for its end.
type delivery struct {
	r       *run
	msg     *azservicebus.ReceivedMessage
	lock    *locks.Lock // nil without renewal
	expires time.Time   // lock expiry when not renewed; zero if unknown
	claimed atomic.Bool

	mu        sync.Mutex
	cancel    context.CancelCauseFunc // the handler's context, once it runs
	lostCause error
}

func (d *delivery) claim() bool { return d.claimed.CompareAndSwap(false, true) }

// newDelivery registers a received message: its lock is tracked from now on.
func (r *run) newDelivery(m *azservicebus.ReceivedMessage) *delivery {
	r.p.counters.received.Add(1)
	d := &delivery{r: r, msg: m}
	if !r.cfg.peekLock {
		return d
	}
	r.mu.Lock()
	r.live[d] = struct{}{}
	r.mu.Unlock()
	if r.engine == nil {
		if m.LockedUntil != nil {
			d.expires = *m.LockedUntil
		}
		return d
	}
	lock, err := r.engine.Add(m, d.lost)
	if err != nil {
		// A message without a lock in peek-lock mode: settle it as usual and let the
		// broker answer.
		r.report(&Error{Source: SourceRenew, Message: m, Err: err})
		return d
	}
	d.lock = lock
	return d
}

// lost is the engine's callback for d's lock.
func (d *delivery) lost(cause error) {
	d.mu.Lock()
	d.lostCause = cause
	cancel := d.cancel
	d.mu.Unlock()
	if cancel != nil {
		cancel(cause)
	}
	if d.claim() {
		d.r.finishLost(d, SourceRenew, sbkit.ActionComplete, cause)
	}
}

// finishLost accounts for a claimed delivery whose message could not be settled.
func (r *run) finishLost(d *delivery, source ErrorSource, action sbkit.Action, err error) {
	r.p.counters.lockLost.Add(1)
	r.forget(d)
	r.report(&Error{Source: source, Action: action, Message: d.msg, Err: err})
}

func (r *run) forget(d *delivery) {
	r.mu.Lock()
	delete(r.live, d)
	r.mu.Unlock()
}

// handlerWorker runs handlers on messages from buf until it is closed.
func (r *run) handlerWorker() {
	defer r.workers.Done()
	for d := range r.buf {
		r.process(d)
		r.release(1)
	}
}

func (r *run) process(d *delivery) {
	r.mu.Lock()
	draining := r.draining
	r.mu.Unlock()
	if draining {
		if r.cfg.peekLock {
			r.abandonNow(d)
			return
		}
		if r.handlerBase.Err() != nil {
			r.p.counters.dropped.Add(1)
			r.report(&Error{Source: SourceHandler, Message: d.msg, Err: ErrDropped})
			return
		}
	}
	if d.claimed.Load() {
		return // lock lost while waiting
	}

	ctx, cancel := context.WithCancelCause(r.handlerBase)
	defer cancel(nil)
	if !d.expires.IsZero() {
		var cancelDeadline context.CancelFunc
		ctx, cancelDeadline = context.WithDeadlineCause(ctx, d.expires,
			&locks.LostError{Reason: locks.ReasonLimit, LockedUntil: d.expires})
		defer cancelDeadline()
	}
	ctx = context.WithValue(ctx, settlerKey{}, &handlerSettler{d: d})
	d.mu.Lock()
	d.cancel = cancel
	lost := d.lostCause
	d.mu.Unlock()
	if lost != nil {
		return // lost between the check and now; accounted for by lost
	}

	r.p.counters.inFlight.Add(1)
	err := r.callHandler(ctx, d.msg)
	r.p.counters.inFlight.Add(-1)
	r.p.counters.handled.Add(1)
	r.afterHandler(d, err)
}

// callHandler runs the handler, turning a panic into a *PanicError.
func (r *run) callHandler(ctx context.Context, m *azservicebus.ReceivedMessage) (err error) {
	defer func() {
		if v := recover(); v != nil {
			r.p.counters.panics.Add(1)
			err = &PanicError{Value: v, Stack: stack()}
		}
	}()
	return r.p.handler(ctx, m)
}

// afterHandler decides the settlement of d from its handler's result and queues it.
func (r *run) afterHandler(d *delivery, err error) {
	action, se := sbkit.SettlementOf(err)
	skip := se != nil && se.Action == sbkit.ActionComplete
	if action == sbkit.ActionAbandon {
		r.p.counters.handlerErrors.Add(1)
		r.report(&Error{Source: SourceHandler, Message: d.msg, Err: err})
	}
	if !r.cfg.peekLock || !d.claim() {
		return // nothing to settle, or settled already (by the handler, a shutdown, a loss)
	}
	job := settleJob{d: d, action: action, skip: skip, marker: se}
	if err == nil && r.cfg.DisableAutoComplete {
		job.action = sbkit.ActionAbandon
		r.report(&Error{Source: SourceHandler, Message: d.msg, Err: ErrNotSettled})
	}
	if job.action == sbkit.ActionAbandon && err != nil && r.cfg.AbandonDelay != nil {
		if delay := r.cfg.AbandonDelay(d.msg, err); delay > 0 && r.hold(job, delay) {
			return
		}
	}
	r.settles <- job
}

type settlerKey struct{}

// SettlerFrom returns the sbkit.Settler of the message a handler is processing, for
// handlers that settle their message themselves (Options.DisableAutoComplete). Its calls
// accept only that message (else ErrWrongMessage), stop its lock renewal, retry transient
// failures like the processor does, and return ErrAlreadySettled when the message was
// settled before or its lock was lost. A context that is not a handler's gives a Settler
// whose calls return ErrNoSettler. The Settler is safe for concurrent use; only the first
// settlement is made.
func SettlerFrom(ctx context.Context) sbkit.Settler {
	if ctx != nil {
		if s, ok := ctx.Value(settlerKey{}).(*handlerSettler); ok && s.d.r.cfg.peekLock {
			return s
		}
	}
	return noSettler{}
}

// LockedUntil returns the current lock expiry of the message a handler is processing
// (handlers must not read message.LockedUntil, which renewals write). ok is false for a
// context that is not a handler's, or when the expiry is unknown.
func LockedUntil(ctx context.Context) (t time.Time, ok bool) {
	s, isHandler := ctx.Value(settlerKey{}).(*handlerSettler)
	switch {
	case !isHandler:
		return time.Time{}, false
	case s.d.lock != nil:
		return s.d.lock.LockedUntil(), true
	}
	return s.d.expires, !s.d.expires.IsZero()
}

type handlerSettler struct{ d *delivery }

func (s *handlerSettler) settle(ctx context.Context, m *azservicebus.ReceivedMessage, job settleJob) error {
	if m != s.d.msg {
		return ErrWrongMessage
	}
	if !s.d.claim() {
		s.d.mu.Lock()
		lost := s.d.lostCause
		s.d.mu.Unlock()
		if lost != nil {
			return fmt.Errorf("%w: %w", ErrAlreadySettled, lost)
		}
		return ErrAlreadySettled
	}
	job.d = s.d
	return s.d.r.settle(ctx, job)
}

func (s *handlerSettler) CompleteMessage(ctx context.Context, m *azservicebus.ReceivedMessage, _ *azservicebus.CompleteMessageOptions) error {
	return s.settle(ctx, m, settleJob{action: sbkit.ActionComplete})
}

func (s *handlerSettler) AbandonMessage(ctx context.Context, m *azservicebus.ReceivedMessage, o *azservicebus.AbandonMessageOptions) error {
	return s.settle(ctx, m, settleJob{action: sbkit.ActionAbandon, abandon: o})
}

func (s *handlerSettler) DeadLetterMessage(ctx context.Context, m *azservicebus.ReceivedMessage, o *azservicebus.DeadLetterOptions) error {
	return s.settle(ctx, m, settleJob{action: sbkit.ActionDeadLetter, deadLetter: o})
}

func (s *handlerSettler) DeferMessage(ctx context.Context, m *azservicebus.ReceivedMessage, o *azservicebus.DeferMessageOptions) error {
	return s.settle(ctx, m, settleJob{action: sbkit.ActionDefer, deferOpts: o})
}

type noSettler struct{}

func (noSettler) CompleteMessage(context.Context, *azservicebus.ReceivedMessage, *azservicebus.CompleteMessageOptions) error {
	return ErrNoSettler
}

func (noSettler) AbandonMessage(context.Context, *azservicebus.ReceivedMessage, *azservicebus.AbandonMessageOptions) error {
	return ErrNoSettler
}

func (noSettler) DeadLetterMessage(context.Context, *azservicebus.ReceivedMessage, *azservicebus.DeadLetterOptions) error {
	return ErrNoSettler
}

func (noSettler) DeferMessage(context.Context, *azservicebus.ReceivedMessage, *azservicebus.DeferMessageOptions) error {
	return ErrNoSettler
}
