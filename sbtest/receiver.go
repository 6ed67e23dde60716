package sbtest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/sbkit/sbkit"
)

// ReceiverOptions configures a Receiver. The zero value (and nil) means a peek-lock
// receiver of the main queue.
type ReceiverOptions struct {
	// ReceiveMode is [azservicebus.ReceiveModePeekLock] (default) or
	// [azservicebus.ReceiveModeReceiveAndDelete].
	ReceiveMode azservicebus.ReceiveMode
	// SubQueue selects the dead-letter queue with [azservicebus.SubQueueDeadLetter]; 0 is
	// the main queue. SubQueueTransfer is not modelled: its queue is always empty.
	SubQueue azservicebus.SubQueue
}

// Receiver receives from a queue or subscription, like [*azservicebus.Receiver]. It
// satisfies [sbkit.LockingReceiver] and has the SDK receiver's ReceiveDeferredMessages and
// PeekMessages, with the same signatures.
// ReceiveMessages must not be called from two goroutines at once (as in the SDK); every
// other method is safe for concurrent use.
//
// Errors: settling or renewing a message whose lock this receiver no longer holds returns
// [*azservicebus.Error] with CodeLockLost; any call after Close returns CodeClosed; nil
// messages return [sbkit.ErrNilMessage]; a context that ends returns ctx.Err().
type Receiver struct {
	ns   *Namespace
	e    *Entity
	sq   *subqueue
	mode azservicebus.ReceiveMode

	closeOnce sync.Once
	done      chan struct{}

	// guarded by e.mu
	closed     bool
	lastPeeked int64
	sess       *session // the session a session receiver holds (see SessionReceiver)
	session    bool     // r belongs to a SessionReceiver; set before r is used
	sessLost   bool     // the session lock expired or was released
}

var _ sbkit.LockingReceiver = (*Receiver)(nil) // and see sdkshape_test.go

// NewReceiverForQueue returns a receiver for a queue, or CodeNotFound when there is none.
// nil options mean defaults.
func (ns *Namespace) NewReceiverForQueue(queue string, opts *ReceiverOptions) (*Receiver, error) {
	e, ok := ns.Entity(queue)
	if !ok || e.topic != nil {
		return nil, errNotFound()
	}
	return newReceiver(ns, e, opts)
}

// NewReceiverForSubscription returns a receiver for a subscription, or CodeNotFound when
// there is none. nil options mean defaults.
func (ns *Namespace) NewReceiverForSubscription(topic, sub string, opts *ReceiverOptions) (*Receiver, error) {
	e, ok := ns.Entity(subscriptionPath(topic, sub))
	if !ok {
		return nil, errNotFound()
	}
	return newReceiver(ns, e, opts)
}

func newReceiver(ns *Namespace, e *Entity, opts *ReceiverOptions) (*Receiver, error) {
	var o ReceiverOptions
	if opts != nil {
		o = *opts
	}
	r := &Receiver{ns: ns, e: e, mode: o.ReceiveMode, done: make(chan struct{})}
	switch o.ReceiveMode {
	case azservicebus.ReceiveModePeekLock, azservicebus.ReceiveModeReceiveAndDelete:
	default:
		return nil, fmt.Errorf("%w: receive mode %d", ErrInvalidOptions, o.ReceiveMode)
	}
	switch o.SubQueue {
	case 0:
		r.sq = &e.main
	case azservicebus.SubQueueDeadLetter:
		r.sq = &e.dlq
	case azservicebus.SubQueueTransfer:
		r.sq = &subqueue{}
		r.sq.init(true)
	default:
		return nil, fmt.Errorf("%w: sub-queue %d", ErrInvalidOptions, o.SubQueue)
	}
	return r, nil
}

// Entity returns the queue or subscription the receiver reads.
func (r *Receiver) Entity() *Entity { return r.e }

// Close closes the receiver. As on the service, the locks it holds are kept until their
// LockedUntil: another receiver of the entity can renew and settle those messages by lock
// token meanwhile, and once a lock expires the message is available again with its
// DeliveryCount unchanged ("Message transfers, locks, and settlement", "Messages,
// payloads, and serialization"; SDK live test TestReceiver_SettleWithOnlyLockToken). A
// receiver on a session releases its session and its messages at once. A ReceiveMessages
// blocked in another goroutine returns CodeClosed. Safe to call twice.
func (r *Receiver) Close(ctx context.Context) error {
	r.closeOnce.Do(func() {
		r.e.mu.Lock()
		r.closed = true
		r.e.tick(time.Now())
		if r.sess != nil {
			r.e.unlockSession(r, false)
		} else {
			r.e.orphanLocks(r)
		}
		r.e.mu.Unlock()
		close(r.done)
	})
	return nil
}

// DropConnection drops the receiver's connection as the network would: the link its
// messages came on is gone, so settling them through r returns CodeLockLost, while the
// broker keeps their locks until LockedUntil, as after Close: renewing works (the SDK
// renews on $management), another receiver can settle them by lock token, and once a
// lock expires the message is available again with its DeliveryCount unchanged (seeds
// 000 and 004). The receiver keeps working for new receives.
func (r *Receiver) DropConnection() {
	r.e.mu.Lock()
	defer r.e.mu.Unlock()
	r.e.tick(time.Now())
	r.e.orphanLocks(r)
}

// begin is the common start of an operation: closed and context checks, admit, the
// fault for op, one round trip. A non-nil error means the operation must not be
// applied. after is the error to return once it has been applied (an After fault), or
// nil.
func (r *Receiver) begin(ctx context.Context, op Op) (after error, err error) {
	return r.beginWith(ctx, op, true)
}

// beginWith is begin, with the round trip slept only when roundTrip is set.
func (r *Receiver) beginWith(ctx context.Context, op Op, roundTrip bool) (after error, err error) {
	if r.isClosed() {
		return nil, errClosed()
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := r.admit(); err != nil {
		return nil, err
	}
	f, faulty := r.e.faults.take(op)
	if roundTrip {
		if err := r.ns.latency.roundTrip(ctx); err != nil {
			return nil, err
		}
	}
	return f.run(ctx, faulty)
}

// admit reports why r may not run an operation now: closed, its entity deleted
// (CodeNotFound), or a session entity read without a session.
func (r *Receiver) admit() error {
	if r.isClosed() {
		return errClosed()
	}
	if r.e.life.ended() {
		return errNotFound()
	}
	if r.e.sessions != nil && r.sq == &r.e.main && !r.isSession() {
		return errNonSessionReceiver()
	}
	return nil
}

func (r *Receiver) isClosed() bool {
	select {
	case <-r.done:
		return true
	default:
		return false
	}
}

// ReceiveMessages waits until at least one message is available, then returns up to
// maxMessages of them at once (after one RoundTrip of latency), locked in peek-lock mode
// and removed in receive-and-delete mode. When ctx ends first it returns ctx.Err() and
// no message is locked or lost. maxMessages <= 0 returns ErrInvalidArgument. options
// (TimeAfterFirstMessage) is ignored: what is available is returned at once. An OpReceive
// fault with After set locks the messages and then returns the fault's error instead of
// them, as when a reply is lost: they come back once their locks expire.
func (r *Receiver) ReceiveMessages(ctx context.Context, maxMessages int, options *azservicebus.ReceiveMessagesOptions) ([]*azservicebus.ReceivedMessage, error) {
	if maxMessages <= 0 {
		return nil, fmt.Errorf("%w: maxMessages %d", ErrInvalidArgument, maxMessages)
	}
	return r.receive(ctx, maxMessages, true)
}

// receive is ReceiveMessages for maxMessages > 0, with the latency model's round trip
// slept first only when roundTrip is set.
func (r *Receiver) receive(ctx context.Context, maxMessages int, roundTrip bool) ([]*azservicebus.ReceivedMessage, error) {
	after, err := r.beginWith(ctx, OpReceive, roundTrip)
	if err != nil {
		return nil, err
	}
	if err := r.e.ns.checkStatus(r.e, r.e.path, false); err != nil {
		return nil, err
	}
	r.e.ns.flushForwards()
	e := r.e
	var w waiter
	defer w.stop()
	for {
		e.mu.Lock()
		if r.closed {
			e.mu.Unlock()
			return nil, errClosed()
		}
		now := time.Now()
		e.tick(now)
		if r.sessLost {
			e.mu.Unlock()
			return nil, errLockLost()
		}
		if out := r.take(now, maxMessages); len(out) > 0 {
			e.mu.Unlock()
			if after != nil {
				return nil, after // locked at the broker, lost on the way: redelivered after the lock expires
			}
			return out, nil
		}
		wake := r.sq.waitChan()
		due, ok := r.sq.nextDue()
		if r.sess != nil && (!ok || r.sess.lockedUntil.Before(due)) {
			due, ok = r.sess.lockedUntil, true
		}
		e.mu.Unlock()
		if err := w.wait(ctx, wake, r.done, now, due, ok); err != nil {
			return nil, err
		}
	}
}

// waiter waits for a subqueue's signal, a due time or the end of a context, reusing one
// timer across waits. Call stop when done.
type waiter struct{ timer *time.Timer }

func (w *waiter) stop() {
	if w.timer != nil {
		w.timer.Stop()
	}
}

// wait returns nil when wake or done is closed or due (if hasDue) arrives, and ctx.Err()
// when ctx ends first.
func (w *waiter) wait(ctx context.Context, wake, done <-chan struct{}, now, due time.Time, hasDue bool) error {
	var timeout <-chan time.Time
	if hasDue {
		if w.timer == nil {
			w.timer = time.NewTimer(due.Sub(now))
		} else {
			w.timer.Reset(due.Sub(now))
		}
		timeout = w.timer.C
	}
	select {
	case <-wake:
	case <-timeout:
	case <-done:
	case <-ctx.Done():
		return ctx.Err()
	}
	return nil
}

// take hands out up to max available messages of r's subqueue. Called with e.mu held.
func (r *Receiver) take(now time.Time, max int) []*azservicebus.ReceivedMessage {
	r.e.accessed = now
	sq := r.sq
	avail := &sq.heaps[hAvail]
	if r.sess != nil {
		avail = &r.sess.avail
	}
	n := min(max, avail.Len())
	if n == 0 {
		return nil
	}
	out := make([]*azservicebus.ReceivedMessage, 0, n)
	for range n {
		m := avail.top()
		avail.del(m)
		sq.heaps[hExp].del(m)
		out = append(out, r.deliver(now, m))
	}
	if r.sess != nil {
		r.e.sessAvailLen -= n // a locked session is in no index but the lock expiries'
	}
	return out
}

// deliver counts a delivery of m (out of every heap but locks) and locks or removes it.
func (r *Receiver) deliver(now time.Time, m *message) *azservicebus.ReceivedMessage {
	r.e.stats.received.Add(1)
	m.touched = true
	if r.mode == azservicebus.ReceiveModeReceiveAndDelete {
		r.sq.drop(m)
		r.e.changed()
		r.e.sessionGone(r.sq, m)
		m.state = stAvailable
		return m.received()
	}
	r.e.lock(r.sq, m, r, now)
	return m.received()
}

// settlement is what settling a message does: the operation (for faults) and its effect
// on the message, applied under the entity's lock.
type settlement struct {
	op    Op
	apply func(m *message) error
}

// settle runs a settlement of msg under the entity's lock with the message r holds for
// it; CodeLockLost when it holds none. It sleeps one round trip, then settles with
// settleNow.
//
// Any receiver of the sub-queue may settle a lock token while the lock lasts, as the SDK
// does through $management with a message it did not receive (SDK live test
// TestReceiver_SettleWithOnlyLockToken), except the receiver that received it over a
// link that is gone (DropConnection): the SDK settles such a message on that link and
// fails. Renewals (op OpRenew) always go through $management and work from any receiver.
func (r *Receiver) settle(ctx context.Context, msg *azservicebus.ReceivedMessage, st settlement) error {
	if msg == nil {
		return sbkit.ErrNilMessage
	}
	if r.isClosed() {
		return errClosed()
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := r.ns.latency.roundTrip(ctx); err != nil {
		return err
	}
	return r.settleNow(ctx, msg.LockToken, st)
}

// settleNow applies a settlement of the message locked with token at once, without the
// latency model's round trip: admit, the fault for the operation, the effect. ctx ends a
// hanging fault only. The server sleeps the round trips of many settlements at once and
// applies each with settleNow in the order the client sent them.
func (r *Receiver) settleNow(ctx context.Context, token [16]byte, st settlement) error {
	err := r.admit()
	var after error
	if err == nil {
		f, faulty := r.e.faults.take(st.op)
		after, err = f.run(ctx, faulty)
	}
	if err != nil {
		var sbErr *azservicebus.Error
		if errors.As(err, &sbErr) && sbErr.Code == azservicebus.CodeLockLost {
			r.loseLock(token) // an injected lock loss is real: the broker lets go too
		}
		return err
	}
	e := r.e
	e.mu.Lock()
	e.tick(time.Now())
	m := r.sq.byToken[token]
	if m == nil || r.closed || (st.op != OpRenew && m.holder == r && m.orphaned) {
		e.mu.Unlock()
		return errLockLost()
	}
	err = st.apply(m)
	e.mu.Unlock()
	e.ns.flushForwards() // a dead-lettered message may be on its way elsewhere
	if err != nil {
		return err
	}
	return after
}

// CompleteMessage removes a locked message from the entity. options may be nil.
func (r *Receiver) CompleteMessage(ctx context.Context, msg *azservicebus.ReceivedMessage, options *azservicebus.CompleteMessageOptions) error {
	return r.settle(ctx, msg, r.completion())
}

func (r *Receiver) completion() settlement {
	return settlement{OpComplete, func(m *message) error {
		r.e.detach(r.sq, m)
		r.e.stats.completed.Add(1)
		return nil
	}}
}

// AbandonMessage releases a locked message: it is delivered again (before later messages)
// with DeliveryCount+1, or dead-lettered with reason MaxDeliveryCountExceeded once it has
// had MaxDeliveryCount deliveries. A deferred message goes back to the deferred state.
// options.PropertiesToModify are applied.
func (r *Receiver) AbandonMessage(ctx context.Context, msg *azservicebus.ReceivedMessage, options *azservicebus.AbandonMessageOptions) error {
	var props map[string]any
	if options != nil {
		props = options.PropertiesToModify
	}
	return r.settle(ctx, msg, r.abandonment(props))
}

func (r *Receiver) abandonment(props map[string]any) settlement {
	return settlement{OpAbandon, func(m *message) error {
		r.e.unlock(r.sq, m)
		m.p = m.p.withProps(props)
		r.e.stats.abandoned.Add(1)
		r.e.release(r.sq, m, true)
		return nil
	}}
}

// DeadLetterMessage moves a locked message to the dead-letter queue with the options'
// Reason, ErrorDescription and PropertiesToModify. Dead-lettering a message of a
// dead-letter queue returns ErrNotSettleable.
func (r *Receiver) DeadLetterMessage(ctx context.Context, msg *azservicebus.ReceivedMessage, options *azservicebus.DeadLetterOptions) error {
	return r.settle(ctx, msg, r.deadLettering(options))
}

func (r *Receiver) deadLettering(options *azservicebus.DeadLetterOptions) settlement {
	return settlement{OpDeadLetter, func(m *message) error {
		if r.sq.dlq {
			return fmt.Errorf("%w: message %d is already dead-lettered", ErrNotSettleable, m.seq)
		}
		var reason, desc *string
		var props map[string]any
		if options != nil {
			reason, desc, props = options.Reason, options.ErrorDescription, options.PropertiesToModify
		}
		r.e.detach(r.sq, m)
		r.e.toDLQ(m, reason, desc, props)
		return nil
	}}
}

// DeferMessage sets a locked message aside: it is no longer delivered by ReceiveMessages,
// only by ReceiveDeferredMessages with its sequence number. options.PropertiesToModify are
// applied.
func (r *Receiver) DeferMessage(ctx context.Context, msg *azservicebus.ReceivedMessage, options *azservicebus.DeferMessageOptions) error {
	var props map[string]any
	if options != nil {
		props = options.PropertiesToModify
	}
	return r.settle(ctx, msg, r.deferral(props))
}

func (r *Receiver) deferral(props map[string]any) settlement {
	return settlement{OpDefer, func(m *message) error {
		r.e.unlock(r.sq, m)
		m.p = m.p.withProps(props)
		r.e.makeDeferred(r.sq, m)
		r.e.stats.deferred.Add(1)
		return nil
	}}
}

// RenewMessageLock extends a message's lock to LockDuration from now and writes the new
// expiry to msg.LockedUntil.
func (r *Receiver) RenewMessageLock(ctx context.Context, msg *azservicebus.ReceivedMessage, options *azservicebus.RenewMessageLockOptions) error {
	return r.settle(ctx, msg, settlement{OpRenew, func(m *message) error {
		m.lockedUntil = time.Now().Add(r.e.opts.LockDuration)
		r.sq.heaps[hLock].fix(m)
		msg.LockedUntil = cloneTime(m.lockedUntil)
		r.e.stats.renewed.Add(1)
		return nil
	}})
}

// ReceiveDeferredMessages receives deferred messages by sequence number, locked in
// peek-lock mode (removed in receive-and-delete mode); they settle like any other, and
// their DeliveryCount is not changed by this receive. The request is all or nothing, as
// on the service: a number that is unknown or not of a deferred message fails it with
// CodeNotFound and receives nothing. A deferred message whose time-to-live ran out is
// expired now (dead-lettered when the entity dead-letters on expiration, else dropped)
// and counts as not found (Service Bus docs, message deferral). Faults for OpReceive
// apply.
func (r *Receiver) ReceiveDeferredMessages(ctx context.Context, sequenceNumbers []int64, options *azservicebus.ReceiveDeferredMessagesOptions) ([]*azservicebus.ReceivedMessage, error) {
	return r.receiveDeferred(ctx, sequenceNumbers, 0)
}

// receiveDeferred is ReceiveDeferredMessages whose messages, when limit > 0 and they are
// more than one, may add up to at most limit bytes (their sizes as the entity counts
// them); beyond it the request fails with ErrMessageTooLarge and receives nothing, all
// or nothing as for a missing number.
func (r *Receiver) receiveDeferred(ctx context.Context, sequenceNumbers []int64, limit int) ([]*azservicebus.ReceivedMessage, error) {
	if _, err := r.begin(ctx, OpReceive); err != nil {
		return nil, err
	}
	e := r.e
	e.mu.Lock()
	defer e.mu.Unlock()
	if r.closed {
		return nil, errClosed()
	}
	now := time.Now()
	e.tick(now)
	if r.sessLost {
		return nil, errLockLost()
	}
	ms := make([]*message, 0, len(sequenceNumbers))
	for _, seq := range sequenceNumbers {
		m := r.sq.bySeq[seq]
		if m == nil || m.state != stDeferred || !r.sees(m) {
			return nil, deferredNotFound(seq)
		}
		if m.expires && !r.sq.dlq && !now.Before(m.expiresAt) {
			e.expire(m) // checked on receive (Service Bus docs, message deferral)
			return nil, deferredNotFound(seq)
		}
		ms = append(ms, m)
	}
	if limit > 0 && len(ms) > 1 {
		size := 0
		for _, m := range ms {
			size += m.p.size
		}
		if size > limit {
			return nil, fmt.Errorf("%w: sbtest: the %d deferred messages asked for hold %d bytes, more than one answer carries (%d); ask for fewer at a time",
				azservicebus.ErrMessageTooLarge, len(ms), size, limit)
		}
	}
	out := make([]*azservicebus.ReceivedMessage, 0, len(ms))
	for _, m := range ms {
		m.wasDeferred = true
		out = append(out, r.deliver(now, m))
	}
	return out, nil
}

// loseLock expires the lock r holds with token, if any, as ExpireLock does.
func (r *Receiver) loseLock(token [16]byte) {
	e := r.e
	e.mu.Lock()
	defer e.mu.Unlock()
	e.tick(time.Now())
	if m := r.sq.byToken[token]; m != nil && m.holder == r {
		e.unlock(r.sq, m)
		e.stats.lockExpired.Add(1)
		e.release(r.sq, m, true)
	}
}

// isSession reports whether r is the inner receiver of a SessionReceiver. Its session
// field is set before r is handed out and never changes afterwards.
func (r *Receiver) isSession() bool { return r.session }

// sees reports whether m belongs to what r reads: its session, for a session receiver.
// Called with e.mu held.
func (r *Receiver) sees(m *message) bool {
	return r.sess == nil || m.sessionKey() == r.sess.id
}
