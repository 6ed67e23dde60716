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
	// ReceiveMode is azservicebus.ReceiveModePeekLock (default) or
	// azservicebus.ReceiveModeReceiveAndDelete.
	ReceiveMode azservicebus.ReceiveMode
	// SubQueue selects the dead-letter queue with azservicebus.SubQueueDeadLetter; 0 is
	// the main queue. SubQueueTransfer is not modelled: its queue is always empty.
	SubQueue azservicebus.SubQueue
}

// Receiver receives from a queue or subscription, like *azservicebus.Receiver. It
// satisfies sbkit.LockingReceiver, sbkit.DeferredReceiver and sbkit.MessagePeeker.
// ReceiveMessages must not be called from two goroutines at once (as in the SDK); every
// other method is safe for concurrent use.
//
// Errors: settling or renewing a message whose lock this receiver no longer holds returns
// *azservicebus.Error with CodeLockLost; any call after Close returns CodeClosed; nil
// messages return sbkit.ErrNilMessage; a context that ends returns ctx.Err().
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
}

var (
	_ sbkit.LockingReceiver  = (*Receiver)(nil)
	_ sbkit.DeferredReceiver = (*Receiver)(nil)
	_ sbkit.MessagePeeker    = (*Receiver)(nil)
)

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

// Close closes the receiver. Its locks are released as when a connection drops: the
// messages become available again and their delivery is not counted. A ReceiveMessages
// blocked in another goroutine returns CodeClosed. Safe to call twice.
func (r *Receiver) Close(ctx context.Context) error {
	r.closeOnce.Do(func() {
		r.e.mu.Lock()
		r.closed = true
		r.e.tick(time.Now())
		r.e.dropHolder(r)
		r.e.mu.Unlock()
		close(r.done)
	})
	return nil
}

// DropConnection loses every lock the receiver holds, as a dropped AMQP connection does:
// the messages become available at once and their delivery is not counted; settling them
// then returns CodeLockLost. The receiver keeps working for new receives.
func (r *Receiver) DropConnection() {
	r.e.mu.Lock()
	defer r.e.mu.Unlock()
	r.e.tick(time.Now())
	r.e.dropHolder(r)
}

// begin is the common start of an operation: closed and context checks, the fault for
// op, one round trip. A non-nil error means the operation must not be applied. after is
// the error to return once it has been applied (an After fault), or nil.
func (r *Receiver) begin(ctx context.Context, op Op) (after error, err error) {
	if r.isClosed() {
		return nil, errClosed()
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	f, faulty := r.e.faults.take(op)
	if err := r.ns.latency.roundTrip(ctx); err != nil {
		return nil, err
	}
	if faulty {
		if err := f.before(ctx); err != nil {
			return nil, err
		}
		return f.Err, nil
	}
	return nil, nil
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
	after, err := r.begin(ctx, OpReceive)
	if err != nil {
		return nil, err
	}
	e := r.e
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		e.mu.Lock()
		if r.closed {
			e.mu.Unlock()
			return nil, errClosed()
		}
		now := time.Now()
		e.tick(now)
		if out := r.take(now, maxMessages); len(out) > 0 {
			e.mu.Unlock()
			if after != nil {
				return nil, after // locked at the broker, lost on the way: redelivered after the lock expires
			}
			return out, nil
		}
		wake := r.sq.waitChan()
		due, ok := r.sq.nextDue()
		e.mu.Unlock()

		var timeout <-chan time.Time
		if ok {
			if timer == nil {
				timer = time.NewTimer(due.Sub(now))
			} else {
				timer.Reset(due.Sub(now))
			}
			timeout = timer.C
		}
		select {
		case <-wake:
		case <-timeout:
		case <-r.done:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// take hands out up to max available messages of r's subqueue. Called with e.mu held.
func (r *Receiver) take(now time.Time, max int) []*azservicebus.ReceivedMessage {
	sq := r.sq
	avail := &sq.heaps[hAvail]
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
	return out
}

// deliver counts a delivery of m (out of every heap but locks) and locks or removes it.
func (r *Receiver) deliver(now time.Time, m *message) *azservicebus.ReceivedMessage {
	m.deliveries++
	r.e.stats.received.Add(1)
	if r.mode == azservicebus.ReceiveModeReceiveAndDelete {
		delete(r.sq.bySeq, m.seq)
		m.state = stAvailable
		return m.received()
	}
	r.e.lock(r.sq, m, r, now)
	return m.received()
}

// settle runs a settlement of msg under the entity's lock with the message r holds for
// it; CodeLockLost when r holds none.
func (r *Receiver) settle(ctx context.Context, op Op, msg *azservicebus.ReceivedMessage, apply func(m *message) error) error {
	if msg == nil {
		return sbkit.ErrNilMessage
	}
	after, err := r.begin(ctx, op)
	if err != nil {
		var sbErr *azservicebus.Error
		if errors.As(err, &sbErr) && sbErr.Code == azservicebus.CodeLockLost {
			r.loseLock(msg.LockToken) // an injected lock loss is real: the broker lets go too
		}
		return err
	}
	e := r.e
	e.mu.Lock()
	e.tick(time.Now())
	m := r.sq.byToken[msg.LockToken]
	if m == nil || m.holder != r || r.closed {
		e.mu.Unlock()
		return errLockLost()
	}
	err = apply(m)
	e.mu.Unlock()
	if err != nil {
		return err
	}
	return after
}

// CompleteMessage removes a locked message from the entity. options may be nil.
func (r *Receiver) CompleteMessage(ctx context.Context, msg *azservicebus.ReceivedMessage, options *azservicebus.CompleteMessageOptions) error {
	return r.settle(ctx, OpComplete, msg, func(m *message) error {
		r.e.detach(r.sq, m)
		r.e.stats.completed.Add(1)
		return nil
	})
}

// AbandonMessage releases a locked message: it is delivered again (before later messages)
// with DeliveryCount+1, or dead-lettered with reason MaxDeliveryCountExceeded once it has
// had MaxDeliveryCount deliveries. A deferred message goes back to the deferred state.
// options.PropertiesToModify are applied.
func (r *Receiver) AbandonMessage(ctx context.Context, msg *azservicebus.ReceivedMessage, options *azservicebus.AbandonMessageOptions) error {
	return r.settle(ctx, OpAbandon, msg, func(m *message) error {
		r.e.unlock(r.sq, m)
		if options != nil {
			m.p = m.p.withProps(options.PropertiesToModify)
		}
		r.e.stats.abandoned.Add(1)
		r.e.release(r.sq, m)
		return nil
	})
}

// DeadLetterMessage moves a locked message to the dead-letter queue with the options'
// Reason, ErrorDescription and PropertiesToModify. Dead-lettering a message of a
// dead-letter queue returns ErrNotSettleable.
func (r *Receiver) DeadLetterMessage(ctx context.Context, msg *azservicebus.ReceivedMessage, options *azservicebus.DeadLetterOptions) error {
	return r.settle(ctx, OpDeadLetter, msg, func(m *message) error {
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
	})
}

// DeferMessage sets a locked message aside: it is no longer delivered by ReceiveMessages,
// only by ReceiveDeferredMessages with its sequence number. options.PropertiesToModify are
// applied.
func (r *Receiver) DeferMessage(ctx context.Context, msg *azservicebus.ReceivedMessage, options *azservicebus.DeferMessageOptions) error {
	return r.settle(ctx, OpDefer, msg, func(m *message) error {
		r.e.unlock(r.sq, m)
		if options != nil {
			m.p = m.p.withProps(options.PropertiesToModify)
		}
		r.e.makeDeferred(r.sq, m)
		r.e.stats.deferred.Add(1)
		return nil
	})
}

// RenewMessageLock extends a message's lock to LockDuration from now and writes the new
// expiry to msg.LockedUntil.
func (r *Receiver) RenewMessageLock(ctx context.Context, msg *azservicebus.ReceivedMessage, options *azservicebus.RenewMessageLockOptions) error {
	return r.settle(ctx, OpRenew, msg, func(m *message) error {
		m.lockedUntil = time.Now().Add(r.e.opts.LockDuration)
		r.sq.heaps[hLock].fix(m)
		msg.LockedUntil = cloneTime(m.lockedUntil)
		r.e.stats.renewed.Add(1)
		return nil
	})
}

// ReceiveDeferredMessages receives deferred messages by sequence number, locked in
// peek-lock mode (removed in receive-and-delete mode); they settle like any other.
// Numbers that are unknown or not deferred are skipped. Faults for OpReceive apply.
func (r *Receiver) ReceiveDeferredMessages(ctx context.Context, sequenceNumbers []int64, options *azservicebus.ReceiveDeferredMessagesOptions) ([]*azservicebus.ReceivedMessage, error) {
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
	var out []*azservicebus.ReceivedMessage
	for _, seq := range sequenceNumbers {
		m := r.sq.bySeq[seq]
		if m == nil || m.state != stDeferred {
			continue
		}
		r.sq.heaps[hExp].del(m)
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
		e.release(r.sq, m)
	}
}
