package receiver

import (
	"context"
	"fmt"
	"runtime/debug"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/sbkit/sbkit"
	"github.com/sbkit/sbkit/internal/retry"
	"github.com/sbkit/sbkit/locks"
)

// settleJob is one settlement to make; its delivery is already claimed.
type settleJob struct {
	d      *delivery
	action sbkit.Action
	skip   bool               // complete because the handler returned sbkit.Skip
	marker *sbkit.SettleError // the handler's marker, for dead-letter and defer

	// Delayed redelivery (redelivery.go): a copy to schedule before the completion, and
	// whether this completion follows one.
	redeliver   *redelivery
	redelivered bool

	// Options given to a handler's Settler.
	abandon    *azservicebus.AbandonMessageOptions
	deadLetter *azservicebus.DeadLetterOptions
	deferOpts  *azservicebus.DeferMessageOptions
}

// settleQueued makes a queued settlement, on a settle goroutine.
func (r *run) settleQueued(job settleJob) {
	r.startSettling(job.d)
	_ = r.settle(context.Background(), job)
}

// startSettling counts d among the settlements in flight (run.settling, which the
// adaptive limit makes room for) from now until its end. A settlement still waiting in
// the queue is not counted: its handler goroutine or hold keeps the room it had, so
// that settlements slower than the handlers do not let the buffer grow.
func (r *run) startSettling(d *delivery) {
	d.settling.Store(true)
	r.settling.Add(1)
	r.places.wake()
}

// settle stops the renewal of job's message and settles it, retrying transient failures
// for up to SettleTimeout. It accounts for the outcome: the action's counter on success,
// LocksLost (or LeftLocked, at the shutdown's deadline) otherwise. ctx gives values only: its cancellation does not stop a settlement.
func (r *run) settle(ctx context.Context, job settleJob) error {
	if job.redeliver != nil {
		job = r.schedule(ctx, job) // the copy first, while the lock is renewed
	}
	d := job.d
	if d.lock != nil {
		if lostErr := d.lock.Release(); lostErr != nil {
			r.finishLost(d, SourceRenew, job.action, lostErr)
			return fmt.Errorf("%w: %w", ErrAlreadySettled, lostErr)
		}
	} else if !d.expires.IsZero() && !time.Now().Before(d.expires) {
		// Not renewed, and its lock ran out: the broker would only answer CodeLockLost.
		lostErr := &locks.LostError{Reason: locks.ReasonLimit, LockedUntil: d.expires}
		r.finishLost(d, SourceRenew, job.action, lostErr)
		return fmt.Errorf("%w: %w", ErrAlreadySettled, lostErr)
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.cfg.SettleTimeout)
	defer cancel()
	defer context.AfterFunc(r.settleBase, cancel)() // the shutdown's deadline
	if r.settleBase.Err() != nil {
		return r.finishLeft(d, job.action, r.settleBase.Err())
	}
	start, attempts := time.Now(), 0
	rs := r.cfg.settleRetry.Retries()
	var err error
	for {
		attempts++
		if err = r.call(ctx, job); err == nil {
			break
		}
		r.p.counters.settleErrors.Add(1)
		if !sbkit.IsTransient(err) || ctx.Err() != nil {
			break
		}
		r.report(d.hookContext(), &Error{Source: SourceSettle, Action: job.action, Message: d.msg, Err: err})
		wait, ok := rs.Next()
		if !ok {
			break
		}
		if !retry.Wait(ctx, wait) {
			err = fmt.Errorf("%w (last error: %w)", ctx.Err(), err)
			break
		}
		if ctx.Err() != nil { // ended as the wait did
			break
		}
	}
	r.cfg.hooks.onSettle(d.hookContext(), Settlement{Message: d.msg, Action: job.action, DeadLetterReason: job.deadLetterReason(),
		Redelivered: job.redelivered, Err: err, Attempts: attempts, Duration: time.Since(start)})
	switch {
	case err == nil:
		r.p.est.settle.add(time.Since(start))
		r.count(job)
		r.end(d, nil)
		r.cfg.Logger.Debug("receiver: settled", "messageID", d.msg.MessageID, "action", job.action.String())
		return nil
	case r.settleBase.Err() != nil:
		return r.finishLeft(d, job.action, err)
	}
	r.finishLost(d, SourceSettle, job.action, fmt.Errorf("%w: %w", ErrSettleFailed, err))
	return err
}

// deadLetterReason is the reason job gives, for a dead-letter.
func (job settleJob) deadLetterReason() string {
	switch {
	case job.action != sbkit.ActionDeadLetter:
		return ""
	case job.deadLetter != nil:
		if job.deadLetter.Reason != nil {
			return *job.deadLetter.Reason
		}
		return ""
	case job.marker != nil:
		return job.marker.Reason
	}
	return ""
}

// finishLeft accounts for a claimed delivery whose settlement the shutdown's deadline
// cut short: its lock expires at the broker.
func (r *run) finishLeft(d *delivery, action sbkit.Action, err error) error {
	r.p.counters.leftLocked.Add(1)
	r.leftLocked.Add(1)
	err = fmt.Errorf("%w: %w", ErrLeftLocked, err)
	r.end(d, err)
	r.report(d.hookContext(), &Error{Source: SourceSettle, Action: action, Message: d.msg, Err: err})
	return err
}

func (r *run) call(ctx context.Context, job settleJob) error {
	src, m := job.d.src, job.d.msg
	var props map[string]any
	if job.marker != nil {
		props = job.marker.Properties
	}
	switch job.action {
	case sbkit.ActionComplete:
		return src.CompleteMessage(ctx, m, nil)
	case sbkit.ActionDeadLetter:
		o := job.deadLetter
		if o == nil {
			o = &azservicebus.DeadLetterOptions{PropertiesToModify: props}
			if job.marker != nil && job.marker.Reason != "" {
				o.Reason = &job.marker.Reason
			}
			if job.marker != nil && job.marker.Description != "" {
				o.ErrorDescription = &job.marker.Description
			}
		}
		return src.DeadLetterMessage(ctx, m, o)
	case sbkit.ActionDefer:
		o := job.deferOpts
		if o == nil && props != nil {
			o = &azservicebus.DeferMessageOptions{PropertiesToModify: props}
		}
		return src.DeferMessage(ctx, m, o)
	}
	o := job.abandon
	if o == nil && props != nil {
		o = &azservicebus.AbandonMessageOptions{PropertiesToModify: props}
	}
	return src.AbandonMessage(ctx, m, o)
}

func (r *run) count(job settleJob) {
	c := &r.p.counters
	switch job.action {
	case sbkit.ActionComplete:
		if job.redelivered {
			c.redelivered.Add(1)
			return
		}
		c.completed.Add(1)
		if job.skip {
			c.skipped.Add(1)
		}
	case sbkit.ActionDeadLetter:
		c.deadLettered.Add(1)
	case sbkit.ActionDefer:
		c.deferred.Add(1)
	default:
		c.abandoned.Add(1)
	}
}

// hold keeps job's message locked (its lock still renewed) for delay, then queues its
// abandonment. The message keeps its place (one of MaxConcurrency + PrefetchCount, or of
// the adaptive prefetch's ceiling) until its settlement is over, so that held messages
// cannot grow past the processor's capacity. It returns false during a shutdown, when
// the caller must queue it now.
func (r *run) hold(job settleJob, delay time.Duration) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.draining {
		return false
	}
	r.holdWG.Add(1)
	r.held.Add(1)
	r.holds[job.d] = time.AfterFunc(delay, func() {
		r.mu.Lock()
		delete(r.holds, job.d)
		r.held.Add(-1)
		r.mu.Unlock()
		r.queue(job)
		r.holdWG.Done()
	})
	return true
}

// flushHolds abandons every held message now. Called once draining is set.
func (r *run) flushHolds() {
	var jobs []settleJob
	r.mu.Lock()
	for d, t := range r.holds {
		if t.Stop() {
			delete(r.holds, d)
			r.held.Add(-1)
			jobs = append(jobs, settleJob{d: d, action: sbkit.ActionAbandon})
		}
	}
	r.mu.Unlock()
	for _, job := range jobs {
		r.queue(job)
		r.holdWG.Done()
	}
}

// queue hands job to a settle goroutine: an idle one, a new one while fewer than
// SettleConcurrency run, or the next one free. It does not block: the message keeps its
// place until its settlement is over, so the settlements waiting are as bounded as the
// places are.
func (r *run) queue(job settleJob) { r.settlers.Submit(job) }

func stack() []byte { return debug.Stack() }
