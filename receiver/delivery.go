package receiver

import (
	"context"
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
//
// A delivery holds one of the run's places from its receipt until both its way through
// the buffer and a handler goroutine and (in peek-lock mode) its settlement are over:
// refs counts which of the two are not. So running, buffered, held and settling
// messages all count against the limit, whatever the number of settle goroutines.
type delivery struct {
	r       *run
	src     sbkit.MessageReceiver // the receiver msg came from, which settles it
	msg     *azservicebus.ReceivedMessage
	lock    *locks.Lock // nil without renewal
	expires time.Time   // lock expiry when not renewed; zero if unknown
	claimed atomic.Bool
	refs    atomic.Int32 // what still holds d's place: see above
	// settling: a settle goroutine took its settlement; it counts in run.settling until
	// its end.
	settling atomic.Bool
	// probe: a half-open circuit breaker let d through as a probe (breaker.go); only
	// its handler goroutine uses it.
	probe bool

	mu        sync.Mutex
	ctx       context.Context         // for hooks: Run's values, then the start hooks' context
	cancel    context.CancelCauseFunc // the handler's context, once it runs
	lostCause error
}

type deliveryKey struct{}

func (d *delivery) claim() bool { return d.claimed.CompareAndSwap(false, true) }

// hookContext is the context d's hooks and errors are reported with.
func (d *delivery) hookContext() context.Context {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.ctx
}

// newDelivery registers a received message: its lock is tracked from now on.
func (r *run) newDelivery(src sbkit.MessageReceiver, m *azservicebus.ReceivedMessage) *delivery {
	r.p.counters.received.Add(1)
	d := &delivery{r: r, src: src, msg: m}
	d.ctx = context.WithValue(r.values, deliveryKey{}, d)
	if !r.cfg.peekLock {
		d.refs.Store(1) // its way through a handler; nothing is settled
		return d
	}
	d.refs.Store(2) // its way through a handler, and its settlement
	r.mu.Lock()
	r.live[d] = struct{}{}
	r.mu.Unlock()
	if r.engine == nil {
		if m.LockedUntil != nil {
			d.expires = *m.LockedUntil
		}
		return d
	}
	if r.routes != nil {
		r.routes.add(m, src) // before the engine may renew it
	}
	lock, err := r.engine.Add(d.ctx, m)
	if err != nil {
		if r.routes != nil {
			r.routes.drop(m)
		}
		// A message without a lock in peek-lock mode: settle it as usual and let the
		// broker answer.
		r.report(d.ctx, &Error{Source: SourceRenew, Message: m, Err: err})
		return d
	}
	d.lock = lock
	return d
}

// lost handles the loss of d's lock, reported by the engine.
func (d *delivery) lost(cause error) {
	d.mu.Lock()
	d.lostCause = cause
	cancel := d.cancel
	d.mu.Unlock()
	if cancel != nil {
		cancel(cause)
	}
	if d.claim() {
		d.r.finishLost(d, SourceRenew, 0, cause)
	}
}

// finishLost accounts for a claimed delivery whose message could not be settled.
func (r *run) finishLost(d *delivery, source ErrorSource, action sbkit.Action, err error) {
	r.p.counters.locksLost.Add(1)
	r.end(d, err)
	r.report(d.hookContext(), &Error{Source: source, Action: action, Message: d.msg, Err: err})
}

// end records that the processor is done with d's lock, once it is accounted for:
// settled (err nil), or not (err says why). d's settlement no longer holds its place.
func (r *run) end(d *delivery, err error) {
	r.mu.Lock()
	delete(r.live, d)
	r.mu.Unlock()
	if r.routes != nil {
		r.routes.drop(d.msg)
	}
	if d.settling.Load() {
		r.settling.Add(-1) // before the place is freed: the adaptive limit never overshoots
	}
	if r.p.settled != nil {
		r.p.settled(d.msg, err) // before the place is freed: it may stop the next receive
	}
	r.unref(d)
}

// unref records that one of what holds d's place is over; the last one frees the place.
func (r *run) unref(d *delivery) {
	if d.refs.Add(-1) == 0 {
		r.release(1)
	}
}

// handlerWorker runs handlers on messages from buf until it is closed.
func (r *run) handlerWorker() {
	defer r.workers.Done()
	for d := range r.buf {
		if r.breakerAdmit(d) { // breaker.go
			r.process(d)
			r.breakerUnprobe(d)
		}
		r.unref(d)
	}
}

// process runs the handler on d and queues (or holds) its settlement.
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
			r.report(d.hookContext(), &Error{Source: SourceHandler, Message: d.msg, Err: ErrDropped})
			return
		}
	}
	if d.claimed.Load() {
		return // lock lost while waiting
	}
	if !d.expires.IsZero() && !time.Now().Before(d.expires) && d.claim() {
		// Not renewed, and its lock ran out while it waited: the handler would work on a
		// message that is no longer ours.
		r.finishLost(d, SourceRenew, 0, &locks.LostError{Reason: locks.ReasonLimit, LockedUntil: d.expires})
		return
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
	ctx = r.cfg.hooks.onHandlerStart(ctx, HandlerStart{Message: d.msg})
	d.mu.Lock()
	d.ctx = context.WithoutCancel(ctx)
	d.mu.Unlock()

	r.p.counters.inFlight.Add(1)
	start := time.Now()
	err := r.callHandler(ctx, d.msg)
	took := time.Since(start)
	r.p.est.handler.add(took)
	r.p.counters.inFlight.Add(-1)
	r.p.counters.handled.Add(1)
	action, _ := sbkit.SettlementOf(err)
	r.breakerRecord(d, err) // breaker.go
	r.cfg.hooks.onHandlerEnd(ctx, HandlerEnd{Message: d.msg, Err: err, Action: action, Duration: took})
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

// afterHandler decides the settlement of d from its handler's result and queues it, or
// holds it when AbandonDelay asks for a delay.
func (r *run) afterHandler(d *delivery, err error) {
	action, se := sbkit.SettlementOf(err)
	skip := se != nil && se.Action == sbkit.ActionComplete
	if action == sbkit.ActionAbandon {
		r.p.counters.handlerErrors.Add(1)
		r.report(d.hookContext(), &Error{Source: SourceHandler, Message: d.msg, Err: err})
	}
	if !r.cfg.peekLock || !d.claim() {
		return // nothing to settle, or settled already (by the handler, a shutdown, a loss)
	}
	job := settleJob{d: d, action: action, skip: skip, marker: se}
	if err == nil && r.cfg.DisableAutoComplete {
		job.action = sbkit.ActionAbandon
		r.report(d.hookContext(), &Error{Source: SourceHandler, Message: d.msg, Err: ErrNotSettled})
	}
	if job.action == sbkit.ActionAbandon && err != nil {
		var decided bool
		if job, decided = r.planRedelivery(d, job, err); decided { // redelivery.go
			r.queue(job)
			return
		}
	}
	if job.action == sbkit.ActionAbandon && err != nil && r.cfg.AbandonDelay != nil {
		if delay := r.cfg.AbandonDelay(d.msg, err); delay > 0 && r.hold(job, delay) {
			return
		}
	}
	r.queue(job)
}
