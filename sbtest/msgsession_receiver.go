package sbtest

import (
	"context"
	"errors"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/sbkit/sbkit"
)

// SessionReceiverOptions configures a SessionReceiver. The zero value (and nil) means
// peek-lock.
type SessionReceiverOptions struct {
	// ReceiveMode is [azservicebus.ReceiveModePeekLock] (default) or
	// [azservicebus.ReceiveModeReceiveAndDelete].
	ReceiveMode azservicebus.ReceiveMode
}

// DefaultAcceptNextSessionTimeout is how long AcceptNextSession* waits for a session when
// ctx has no deadline, as the service does before it answers com.microsoft:timeout.
const DefaultAcceptNextSessionTimeout = time.Minute

// SessionReceiver receives the messages of one session of an entity that requires
// sessions, like [*azservicebus.SessionReceiver]: it holds the session's lock, receives its
// messages in sequence-number order, settles them, and reads and writes the session
// state. It satisfies [sbkit.MessageReceiver] and has the SDK session receiver's deferred,
// peek and session-lock methods, with the same signatures. ReceiveMessages must not be
// called from two goroutines at once; every other method is safe for concurrent use.
//
// The session lock lasts the entity's LockDuration from the accept and from every
// RenewSessionLock; the messages it delivers are locked by it (their LockedUntil is the
// session's). When the lock expires (or ExpireSessionLock) the locked messages come back
// with their delivery counted and every later operation returns CodeLockLost; Close
// releases the session at once without counting the deliveries. Either way the session
// can then be accepted by another receiver.
type SessionReceiver struct {
	r  *Receiver
	id string
}

var _ sbkit.MessageReceiver = (*SessionReceiver)(nil) // and see sdkSessionReceiver in msgsession_test.go

// AcceptSessionForQueue locks the session sessionID of a queue, whether or not it has
// messages yet. Errors: CodeNotFound when there is no such queue; *amqp.Error (go-amqp)
// amqp:not-allowed when the queue does not require sessions, and
// com.microsoft:session-cannot-be-locked when another receiver holds the session, as the
// SDK reports them. nil options mean defaults.
func (ns *Namespace) AcceptSessionForQueue(ctx context.Context, queue, sessionID string, opts *SessionReceiverOptions) (*SessionReceiver, error) {
	e, ok := ns.Entity(queue)
	if !ok || e.topic != nil {
		return nil, errNotFound()
	}
	return acceptSession(ctx, ns, e, &sessionID, opts)
}

// AcceptSessionForSubscription is AcceptSessionForQueue for a subscription.
func (ns *Namespace) AcceptSessionForSubscription(ctx context.Context, topic, sub, sessionID string, opts *SessionReceiverOptions) (*SessionReceiver, error) {
	e, ok := ns.Entity(subscriptionPath(topic, sub))
	if !ok {
		return nil, errNotFound()
	}
	return acceptSession(ctx, ns, e, &sessionID, opts)
}

// AcceptNextSessionForQueue locks the unlocked session of a queue whose oldest available
// message is the oldest, waiting until there is one. When ctx's deadline passes first (or
// DefaultAcceptNextSessionTimeout when ctx has none) it returns [*azservicebus.Error] with
// CodeTimeout, as the SDK does; a cancelled ctx returns ctx.Err(). Other errors as for
// AcceptSessionForQueue.
func (ns *Namespace) AcceptNextSessionForQueue(ctx context.Context, queue string, opts *SessionReceiverOptions) (*SessionReceiver, error) {
	e, ok := ns.Entity(queue)
	if !ok || e.topic != nil {
		return nil, errNotFound()
	}
	return acceptSession(ctx, ns, e, nil, opts)
}

// AcceptNextSessionForSubscription is AcceptNextSessionForQueue for a subscription.
func (ns *Namespace) AcceptNextSessionForSubscription(ctx context.Context, topic, sub string, opts *SessionReceiverOptions) (*SessionReceiver, error) {
	e, ok := ns.Entity(subscriptionPath(topic, sub))
	if !ok {
		return nil, errNotFound()
	}
	return acceptSession(ctx, ns, e, nil, opts)
}

// acceptSession locks the session id (nil: the next available one) of e for a new
// session receiver, after one round trip.
func acceptSession(ctx context.Context, ns *Namespace, e *Entity, id *string, opts *SessionReceiverOptions) (*SessionReceiver, error) {
	var o ReceiverOptions
	if opts != nil {
		o.ReceiveMode = opts.ReceiveMode
	}
	r, err := newReceiver(ns, e, &o)
	if err != nil {
		return nil, err
	}
	r.session = true
	if e.sessions == nil {
		return nil, errSessionsNotSupported()
	}
	if _, err := r.begin(ctx, OpAcceptSession); err != nil {
		return nil, err
	}
	if id != nil {
		e.mu.Lock()
		defer e.mu.Unlock()
		e.tick(time.Now())
		s := e.session(*id)
		if s.holder != nil {
			return nil, errSessionCannotBeLocked(*id)
		}
		e.lockSession(s, r, time.Now())
		e.stats.sessionsAccepted.Add(1)
		return &SessionReceiver{r: r, id: *id}, nil
	}
	return acceptNext(ctx, e, r)
}

// acceptNext waits for an unlocked session with available messages and locks it for r.
func acceptNext(ctx context.Context, e *Entity, r *Receiver) (*SessionReceiver, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, DefaultAcceptNextSessionTimeout)
		defer cancel()
	}
	var w waiter
	defer w.stop()
	for {
		e.mu.Lock()
		now := time.Now()
		e.tick(now)
		if s := e.nextSession(); s != nil {
			e.lockSession(s, r, now)
			e.stats.sessionsAccepted.Add(1)
			e.mu.Unlock()
			return &SessionReceiver{r: r, id: s.id}, nil
		}
		wake := e.main.waitChan()
		due, ok := e.main.nextDue()
		if sdue, sok := e.nextSessionLockDue(); sok && (!ok || sdue.Before(due)) {
			due, ok = sdue, true
		}
		e.mu.Unlock()
		if err := w.wait(ctx, wake, nil, now, due, ok); err != nil {
			if errors.Is(err, context.DeadlineExceeded) {
				// Source: SDK live test TestSessionReceiver_acceptNextSession_noSessionsExist (CodeTimeout).
				return nil, &azservicebus.Error{Code: azservicebus.CodeTimeout}
			}
			return nil, err
		}
	}
}

// Entity returns the queue or subscription the receiver reads.
func (sr *SessionReceiver) Entity() *Entity { return sr.r.e }

// SessionID returns the id of the session the receiver holds.
func (sr *SessionReceiver) SessionID() string { return sr.id }

// LockedUntil returns when the session lock expires (or expired).
func (sr *SessionReceiver) LockedUntil() time.Time {
	e := sr.r.e
	e.mu.Lock()
	defer e.mu.Unlock()
	return sr.r.sess.lockedUntil
}

// ReceiveMessages is Receiver.ReceiveMessages for the session's messages, in order. It
// returns CodeLockLost once the session lock is lost.
func (sr *SessionReceiver) ReceiveMessages(ctx context.Context, maxMessages int, options *azservicebus.ReceiveMessagesOptions) ([]*azservicebus.ReceivedMessage, error) {
	return sr.r.ReceiveMessages(ctx, maxMessages, options)
}

// ReceiveDeferredMessages receives deferred messages of the session by sequence number;
// numbers of other sessions are skipped.
func (sr *SessionReceiver) ReceiveDeferredMessages(ctx context.Context, sequenceNumbers []int64, options *azservicebus.ReceiveDeferredMessagesOptions) ([]*azservicebus.ReceivedMessage, error) {
	return sr.r.ReceiveDeferredMessages(ctx, sequenceNumbers, options)
}

// PeekMessages is Receiver.PeekMessages over the session's messages.
func (sr *SessionReceiver) PeekMessages(ctx context.Context, maxMessageCount int, options *azservicebus.PeekMessagesOptions) ([]*azservicebus.ReceivedMessage, error) {
	return sr.r.PeekMessages(ctx, maxMessageCount, options)
}

// CompleteMessage is Receiver.CompleteMessage; CodeLockLost once the session lock is lost.
func (sr *SessionReceiver) CompleteMessage(ctx context.Context, msg *azservicebus.ReceivedMessage, options *azservicebus.CompleteMessageOptions) error {
	return sr.r.CompleteMessage(ctx, msg, options)
}

// AbandonMessage is Receiver.AbandonMessage: the message is the session's next again.
func (sr *SessionReceiver) AbandonMessage(ctx context.Context, msg *azservicebus.ReceivedMessage, options *azservicebus.AbandonMessageOptions) error {
	return sr.r.AbandonMessage(ctx, msg, options)
}

// DeadLetterMessage is Receiver.DeadLetterMessage.
func (sr *SessionReceiver) DeadLetterMessage(ctx context.Context, msg *azservicebus.ReceivedMessage, options *azservicebus.DeadLetterOptions) error {
	return sr.r.DeadLetterMessage(ctx, msg, options)
}

// DeferMessage is Receiver.DeferMessage.
func (sr *SessionReceiver) DeferMessage(ctx context.Context, msg *azservicebus.ReceivedMessage, options *azservicebus.DeferMessageOptions) error {
	return sr.r.DeferMessage(ctx, msg, options)
}

// Close releases the session at once: its locked messages come back without their
// delivery counted and the session can be accepted again. Safe to call twice.
func (sr *SessionReceiver) Close(ctx context.Context) error { return sr.r.Close(ctx) }

// sessionOp runs a session operation under the entity's lock while r holds its session;
// CodeLockLost when it does not.
func (sr *SessionReceiver) sessionOp(ctx context.Context, op Op, apply func(s *session, now time.Time)) error {
	after, err := sr.r.begin(ctx, op)
	if err != nil {
		var sbErr *azservicebus.Error
		if errors.As(err, &sbErr) && sbErr.Code == azservicebus.CodeLockLost {
			sr.loseSession() // an injected lock loss is real: the broker lets go too
		}
		return err
	}
	e := sr.r.e
	e.mu.Lock()
	now := time.Now()
	e.tick(now)
	if sr.r.sessLost || sr.r.closed {
		e.mu.Unlock()
		return errLockLost()
	}
	apply(sr.r.sess, now)
	e.mu.Unlock()
	return after
}

// RenewSessionLock extends the session lock to LockDuration from now (LockedUntil shows
// the new expiry). CodeLockLost when the lock was already lost.
func (sr *SessionReceiver) RenewSessionLock(ctx context.Context, options *azservicebus.RenewSessionLockOptions) error {
	return sr.sessionOp(ctx, OpRenewSessionLock, func(s *session, now time.Time) {
		s.lockedUntil = now.Add(sr.r.e.opts.LockDuration)
		sr.r.e.reindexSession(s)
		sr.r.e.stats.sessionLocksRenewed.Add(1)
	})
}

// GetSessionState returns a copy of the session state, nil when none is set.
func (sr *SessionReceiver) GetSessionState(ctx context.Context, options *azservicebus.GetSessionStateOptions) ([]byte, error) {
	var state []byte
	err := sr.sessionOp(ctx, OpSessionState, func(s *session, _ time.Time) { state = cloneBytes(s.state) })
	if err != nil {
		return nil, err
	}
	return state, nil
}

// SetSessionState stores a copy of state as the session state; nil clears it.
func (sr *SessionReceiver) SetSessionState(ctx context.Context, state []byte, options *azservicebus.SetSessionStateOptions) error {
	return sr.sessionOp(ctx, OpSessionState, func(s *session, _ time.Time) { s.state = cloneBytes(state) })
}

// loseSession expires the session lock sr holds, if it still does.
func (sr *SessionReceiver) loseSession() {
	e := sr.r.e
	e.mu.Lock()
	defer e.mu.Unlock()
	e.tick(time.Now())
	if s := sr.r.sess; s != nil && s.holder == sr.r {
		e.stats.sessionLocksExpired.Add(1)
		e.unlockSession(sr.r, true)
	}
}

var _ sbkit.SessionReceiver = (*SessionReceiver)(nil)

// QueueSessionAcceptor returns an [sbkit.SessionAcceptor] for a queue of ns: the in-memory
// counterpart of [sbkit.NewQueueSessionAcceptor]. The queue is looked up at every accept
// (CodeNotFound when it does not exist). opts may be nil.
func (ns *Namespace) QueueSessionAcceptor(queue string, opts *SessionReceiverOptions) sbkit.SessionAcceptor {
	return &sessionAcceptor{
		byID: func(ctx context.Context, id string) (*SessionReceiver, error) {
			return ns.AcceptSessionForQueue(ctx, queue, id, opts)
		},
		next: func(ctx context.Context) (*SessionReceiver, error) {
			return ns.AcceptNextSessionForQueue(ctx, queue, opts)
		},
	}
}

// SubscriptionSessionAcceptor is QueueSessionAcceptor for a subscription.
func (ns *Namespace) SubscriptionSessionAcceptor(topic, sub string, opts *SessionReceiverOptions) sbkit.SessionAcceptor {
	return &sessionAcceptor{
		byID: func(ctx context.Context, id string) (*SessionReceiver, error) {
			return ns.AcceptSessionForSubscription(ctx, topic, sub, id, opts)
		},
		next: func(ctx context.Context) (*SessionReceiver, error) {
			return ns.AcceptNextSessionForSubscription(ctx, topic, sub, opts)
		},
	}
}

type sessionAcceptor struct {
	byID func(ctx context.Context, id string) (*SessionReceiver, error)
	next func(ctx context.Context) (*SessionReceiver, error)
}

func (a *sessionAcceptor) AcceptSession(ctx context.Context, sessionID string) (sbkit.SessionReceiver, error) {
	r, err := a.byID(ctx, sessionID)
	if err != nil {
		return nil, err
	}
	return r, nil
}

func (a *sessionAcceptor) AcceptNextSession(ctx context.Context) (sbkit.SessionReceiver, error) {
	r, err := a.next(ctx)
	if err != nil {
		return nil, err
	}
	return r, nil
}
