package receiver

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/sbkit/sbkit"
	"github.com/sbkit/sbkit/internal/retry"
)

const (
	// DefaultImmediateAttempts is [RedeliveryOptions.ImmediateAttempts]'s default: a
	// message (and each copy) is redelivered with a delay after its first failed delivery.
	DefaultImmediateAttempts = 1
	// DefaultMaxRedeliveries is [RedeliveryOptions.MaxRedeliveries]'s default, as
	// NServiceBus's delayed retries (three).
	DefaultMaxRedeliveries = 3
	// ExhaustedReason is the dead-letter reason of a message whose redeliveries the
	// policy spent.
	ExhaustedReason = "MaxRedeliveriesExceeded"
)

// ErrNoRedelivery is reported (SourceHandler) when a handler returned [sbkit.RetryAfter]
// to a processor without [Options.Redelivery], or to a SessionProcessor (which never
// redelivers through the broker: see [SessionOptions]), and, wrapped, when the policy
// would redeliver a message whose body is not one data section (an AMQP value or
// sequence body, which [azservicebus.Message] cannot carry): the message is abandoned
// instead.
var ErrNoRedelivery = errors.New("receiver: sbkit.RetryAfter needs Options.Redelivery (and a Processor: a session's copy would break its order); the message is abandoned")

// ErrSessionRedelivery is wrapped by NewSessionProcessor's error for Options.Redelivery.
// A session's messages are handled first in, first out ("Message sessions" on
// learn.microsoft.com: sessions give an ordered, first-in first-out handling of related
// messages), and a copy scheduled on the entity joins its session behind the messages sent
// before it is enqueued, so its session's order would be broken without a trace. A
// SessionProcessor abandons a failed message instead (it comes back first), and the
// entity's MaxDeliveryCount dead-letters it.
var ErrSessionRedelivery = errors.New("receiver: a redelivered copy would be handled after later messages of its session, breaking the session's first-in, first-out order")

// ErrScheduleFailed is reported (SourceSettle, Action abandon) when a redelivery's copy
// could not be scheduled (an error that is not transient, or SettleTimeout): the original
// message is abandoned instead, as without a redelivery policy.
var ErrScheduleFailed = errors.New("receiver: scheduling the redelivery failed; the message is abandoned")

// RedeliveryOptions configure delayed redelivery through the broker, the recoverability
// of NServiceBus's delayed retries and MassTransit's scheduled redelivery: a message
// whose handler failed (a plain error, or [sbkit.RetryAfter]) is not abandoned but
// copied, the copy scheduled on the message's entity at now + a delay, and the original
// completed once the broker accepted the copy. The copy is the message again (body,
// application properties, ContentType, CorrelationID, SessionID, PartitionKey, Subject,
// To, ReplyTo, ReplyToSessionID; its TimeToLive is what is left of the original's, so that
// it expires when the original would have), plus the properties
// [sbkit.RedeliveryAttemptProperty], [sbkit.RedeliveryFirstFailureProperty] and
// [sbkit.RedeliveryOriginalIDProperty], and the MessageID [sbkit.RedeliveryMessageID]
// of the original's and the attempt.
//
// Guarantees. Nothing is lost: a copy that cannot be scheduled leaves the original
// abandoned, as without the policy. A completion that fails after the copy was accepted
// leaves the original to come back (after its lock expires) and fail again: its second
// copy of the same attempt has the same MessageID, so an entity with duplicate detection
// drops it ("Duplicate detection" on learn.microsoft.com; scheduled messages are detected
// too), and without it two copies run, of which package dedupe's filter handles one and
// skips the other, as it keys on [sbkit.OriginalMessageID]. A message whose expiry
// comes before the copy would be enqueued is dead-lettered at once with reason
// [sbkit.TTLExpiredReason] (an entity that drops expired messages would have dropped it:
// the processor cannot read the entity's setting, so it keeps the message where it can
// be inspected). A message whose copies the policy spent is dead-lettered with reason
// ExhaustedReason and a description naming the attempts and the last error.
//
// The copy goes to Scheduler's entity: give a sender of the queue the processor receives
// from. A subscription's messages are copied to the topic, and so to every subscription
// whose rules match: process a queue the subscription forwards to instead.
type RedeliveryOptions struct {
	// Scheduler schedules the copies: an [*azservicebus.Sender] of the message's own
	// queue. Required.
	Scheduler sbkit.MessageScheduler
	// ImmediateAttempts is how many deliveries of a message (and of each copy, whose
	// DeliveryCount starts again) fail and are abandoned as usual (AbandonDelay applies)
	// before it is redelivered with a delay. Keep it below the entity's MaxDeliveryCount
	// (10 by default), or the broker dead-letters the message first. Default
	// DefaultImmediateAttempts (1); negative is an error. [sbkit.RetryAfter] skips them.
	ImmediateAttempts int
	// MaxRedeliveries is how many copies of one message are scheduled; the message is
	// dead-lettered (reason ExhaustedReason) when the last copy has spent its immediate
	// attempts. Default DefaultMaxRedeliveries (3); negative means no limit (the message's
	// TimeToLive then bounds its redeliveries).
	MaxRedeliveries int
	// Delay returns the delay before the attempt-th copy (1 for the first) is enqueued.
	// Default: 10 s × 2^(attempt−1), at most 5 min. A handler's [sbkit.RetryAfter] with a
	// positive delay overrides it.
	Delay func(attempt int) time.Duration
}

// defaultRedeliveryDelay is RedeliveryOptions.Delay's default.
func defaultRedeliveryDelay(attempt int) time.Duration {
	d := 10 * time.Second
	for i := 1; i < attempt && d < 5*time.Minute; i++ {
		d *= 2
	}
	return min(d, 5*time.Minute)
}

// redeliveryConfig resolves o: nil when o is nil.
func redeliveryConfig(o *RedeliveryOptions, peekLock bool) (*RedeliveryOptions, error) {
	if o == nil {
		return nil, nil
	}
	c := *o
	switch {
	case c.Scheduler == nil:
		return nil, fmt.Errorf("%w: Redelivery without a Scheduler", ErrInvalidOptions)
	case c.ImmediateAttempts < 0:
		return nil, fmt.Errorf("%w: negative Redelivery.ImmediateAttempts %d", ErrInvalidOptions, c.ImmediateAttempts)
	case !peekLock:
		return nil, fmt.Errorf("%w: Redelivery in ReceiveAndDelete mode, which settles nothing", ErrInvalidOptions)
	}
	if c.ImmediateAttempts == 0 {
		c.ImmediateAttempts = DefaultImmediateAttempts
	}
	if c.MaxRedeliveries == 0 {
		c.MaxRedeliveries = DefaultMaxRedeliveries
	}
	if c.Delay == nil {
		c.Delay = defaultRedeliveryDelay
	}
	return &c, nil
}

// RedeliveryHook observes every decision of the redelivery policy: a copy scheduled (or
// its schedule failed), or a message dead-lettered because its redeliveries are spent.
type RedeliveryHook interface {
	OnRedelivery(ctx context.Context, e Redelivery)
}

// RedeliveryHookFunc adapts a function to a [RedeliveryHook].
type RedeliveryHookFunc func(ctx context.Context, e Redelivery)

// OnRedelivery calls f(ctx, e).
func (f RedeliveryHookFunc) OnRedelivery(ctx context.Context, e Redelivery) { f(ctx, e) }

// Redelivery is one decision of the redelivery policy.
type Redelivery struct {
	// Message is the failed message.
	Message *azservicebus.ReceivedMessage
	// Attempt is the copy's redelivery number (1 for the first copy); when Exhausted,
	// the number of copies made.
	Attempt int
	// OriginalMessageID is the MessageID of the original message.
	OriginalMessageID string
	// FirstFailure is when the original failed the delivery that made its first copy.
	FirstFailure time.Time
	// Due is when the copy is enqueued; zero when Exhausted.
	Due time.Time
	// SequenceNumber is the copy's sequence number when it was scheduled (0 when the
	// entity's duplicate detection dropped it as a second copy of Attempt).
	SequenceNumber int64
	// Exhausted is true when the message is dead-lettered instead of redelivered:
	// MaxRedeliveries were made, or its expiry comes before Due; Reason says which.
	Exhausted bool
	// Reason is the dead-letter reason when Exhausted (ExhaustedReason or
	// [sbkit.TTLExpiredReason]).
	Reason string
	// Cause is the handler's error.
	Cause error
	// Err is the schedule's error (the message is then abandoned), nil otherwise.
	Err error
}

// redelivery is a copy to schedule before completing the original.
type redelivery struct {
	copy  *azservicebus.Message
	event Redelivery
}

// planRedelivery applies the redelivery policy to job, the abandonment of d after the
// handler failed with err: it returns job unchanged (abandon as usual), a completion
// after a copy is scheduled, or a dead-letter when the policy is spent. decided tells
// whether the policy took the message (AbandonDelay then does not apply).
func (r *run) planRedelivery(d *delivery, job settleJob, err error) (_ settleJob, decided bool) {
	_, se := sbkit.SettlementOf(err)
	explicit := se != nil && se.Redeliver
	pol := r.cfg.redelivery
	if pol == nil {
		if explicit {
			r.report(d.hookContext(), &Error{Source: SourceHandler, Message: d.msg, Err: ErrNoRedelivery})
		}
		return job, false
	}
	if !explicit && int(d.msg.DeliveryCount) < pol.ImmediateAttempts {
		return job, false
	}
	if err := copyable(d.msg); err != nil {
		r.report(d.hookContext(), &Error{Source: SourceHandler, Message: d.msg, Err: err})
		return job, false
	}
	now := time.Now()
	attempt, first := sbkit.RedeliveryOf(d.msg)
	if first.IsZero() {
		first = now.UTC()
	}
	ev := Redelivery{Message: d.msg, Attempt: attempt + 1, OriginalMessageID: sbkit.OriginalMessageID(d.msg),
		FirstFailure: first, Cause: err}
	if pol.MaxRedeliveries >= 0 && attempt >= pol.MaxRedeliveries {
		ev.Attempt, ev.Exhausted, ev.Reason = attempt, true, ExhaustedReason
		desc := fmt.Sprintf("%d redeliveries of %d immediate attempts each spent since %s; last error: %v",
			attempt, pol.ImmediateAttempts, first.Format(time.RFC3339), err)
		return r.exhausted(d, job, ev, desc), true
	}
	delay := pol.Delay(ev.Attempt)
	if explicit && se.Delay > 0 {
		delay = se.Delay
	}
	ev.Due = now.Add(max(delay, 0))
	var ttl *time.Duration
	if expiresAt, ok := sbkit.MessageExpiresAt(d.msg); ok {
		left := expiresAt.Sub(ev.Due)
		if left <= 0 {
			ev.Due, ev.Exhausted, ev.Reason = time.Time{}, true, sbkit.TTLExpiredReason
			desc := fmt.Sprintf("redelivery %d would be enqueued at %s, after the message expires at %s; last error: %v",
				ev.Attempt, now.Add(delay).Format(time.RFC3339), expiresAt.Format(time.RFC3339), err)
			return r.exhausted(d, job, ev, desc), true
		}
		ttl = &left
	}
	job.action = sbkit.ActionComplete
	job.redeliver = &redelivery{copy: copyForRedelivery(d.msg, ev, ttl), event: ev}
	return job, true
}

// exhausted turns job into the dead-letter of a message the policy gives up on.
func (r *run) exhausted(d *delivery, job settleJob, ev Redelivery, desc string) settleJob {
	r.p.counters.exhausted.Add(1)
	r.cfg.hooks.onRedelivery(d.hookContext(), ev)
	job.action = sbkit.ActionDeadLetter
	job.marker = &sbkit.SettleError{Action: sbkit.ActionDeadLetter, Reason: ev.Reason, Description: desc, Err: ev.Cause}
	return job
}

// copyable reports ErrNoRedelivery when a copy of m would lose its body: the SDK gives
// a message's body as Body only when it is one data section (ReceivedMessage.Body in
// azservicebus), so a body of AMQP value or sequence sections, or of several data
// sections, is abandoned as without a policy rather than redelivered empty.
func copyable(m *azservicebus.ReceivedMessage) error {
	raw := m.RawAMQPMessage
	if raw == nil || (raw.Body.Value == nil && len(raw.Body.Sequence) == 0 && len(raw.Body.Data) <= 1) {
		return nil
	}
	return fmt.Errorf("%w (its body is not one data section, which a copy would lose)", ErrNoRedelivery)
}

// copyForRedelivery returns the message that redelivers m as ev says, with ttl (nil: m's
// expiry is unknown, and the entity's default applies).
func copyForRedelivery(m *azservicebus.ReceivedMessage, ev Redelivery, ttl *time.Duration) *azservicebus.Message {
	props := make(map[string]any, len(m.ApplicationProperties)+3)
	maps.Copy(props, m.ApplicationProperties)
	props[sbkit.RedeliveryAttemptProperty] = int64(ev.Attempt)
	props[sbkit.RedeliveryFirstFailureProperty] = ev.FirstFailure.UTC()
	props[sbkit.RedeliveryOriginalIDProperty] = ev.OriginalMessageID
	id := sbkit.RedeliveryMessageID(ev.OriginalMessageID, ev.Attempt)
	c := m.Message() // every property a sender sets; the body is shared
	c.ApplicationProperties = props
	c.MessageID = &id
	c.ScheduledEnqueueTime = nil
	c.TimeToLive = ttl
	return c
}

// schedule schedules job's copy, retrying transient failures for up to SettleTimeout and
// never past the shutdown's deadline, while the original's lock is still renewed. It
// returns job (the original's completion) when the broker accepted the copy, else the
// original's abandonment.
func (r *run) schedule(ctx context.Context, job settleJob) settleJob {
	rd, d := job.redeliver, job.d
	job.redeliver = nil
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.cfg.SettleTimeout)
	defer cancel()
	defer context.AfterFunc(r.settleBase, cancel)()
	rs := r.cfg.settleRetry.Retries()
	var err error
	for {
		if err = r.settleBase.Err(); err != nil { // the shutdown's deadline passed: no copy
			break
		}
		var seqs []int64
		seqs, err = r.cfg.redelivery.Scheduler.ScheduleMessages(ctx, []*azservicebus.Message{rd.copy}, rd.event.Due, nil)
		if err == nil {
			if len(seqs) > 0 {
				rd.event.SequenceNumber = seqs[0]
			}
			break
		}
		r.p.counters.scheduleErrors.Add(1)
		if !sbkit.IsTransient(err) || ctx.Err() != nil {
			break
		}
		r.report(d.hookContext(), &Error{Source: SourceSettle, Action: sbkit.ActionAbandon, Message: d.msg, Err: err})
		if wait, ok := rs.Next(); !ok || !retry.Wait(ctx, wait) {
			break
		}
	}
	rd.event.Err = err
	r.cfg.hooks.onRedelivery(d.hookContext(), rd.event)
	if err != nil {
		r.report(d.hookContext(), &Error{Source: SourceSettle, Action: sbkit.ActionAbandon, Message: d.msg,
			Err: fmt.Errorf("%w: %w", ErrScheduleFailed, err)})
		return settleJob{d: d, action: sbkit.ActionAbandon}
	}
	r.p.counters.scheduled.Add(1)
	job.redelivered = true
	return job
}
