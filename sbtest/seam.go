package sbtest

import (
	"context"
	"errors"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	goamqp "github.com/Azure/go-amqp"
	"github.com/sbkit/sbkit/sbtest/internal/amqp"
)

// This file holds what the server needs from the entity model beyond the public
// Receiver and Sender API: a receive that does not wait (for a drain), a release that
// does not count the delivery (the released outcome), and finding the receiver that holds
// a lock token (for $management operations, which name messages by token only).

// tryReceive takes up to max available messages without waiting and without latency,
// as ReceiveMessages would lock (or remove) them. It returns nil when r is closed.
func (r *Receiver) tryReceive(max int) []*azservicebus.ReceivedMessage {
	if max <= 0 {
		return nil
	}
	e := r.e
	e.mu.Lock()
	defer e.mu.Unlock()
	if r.closed {
		return nil
	}
	now := time.Now()
	e.tick(now)
	return r.take(now, max)
}

// releaseLock gives a message r holds back to its entity without counting the delivery,
// as the released outcome asks. It reports whether r held the lock.
func (r *Receiver) releaseLock(token [16]byte) bool {
	e := r.e
	e.mu.Lock()
	defer e.mu.Unlock()
	e.tick(time.Now())
	m := r.sq.byToken[token]
	if m == nil || m.holder != r {
		return false
	}
	e.unlock(r.sq, m)
	e.requeue(r.sq, m)
	return true
}

// storeMessages sends messages through s as one request (a single message, a batch or a
// scheduled set), applying the namespace's size limit, faults and latency, and returns
// their sequence numbers. raws[i] are msgs[i]'s raw AMQP sections (nil for none).
func (s *Sender) storeMessages(ctx context.Context, msgs []*azservicebus.Message, raws []rawAMQP, batch bool) ([]int64, error) {
	out, err := s.outgoingOf(msgs, raws)
	if err != nil {
		return nil, err
	}
	return s.do(ctx, out, batch)
}

// outgoingOf prepares messages to send through s as one request, applying the size
// limit. raws[i] are msgs[i]'s raw AMQP sections (nil for none). The server counts the
// request in flight (enter), sleeps its wait (storeWait) and stores it in its turn
// (sendNow).
func (s *Sender) outgoingOf(msgs []*azservicebus.Message, raws []rawAMQP) ([]outgoing, error) {
	out := make([]outgoing, len(msgs))
	for i, m := range msgs {
		o, err := s.prepare(m, time.Time{})
		if err != nil {
			return nil, err
		}
		o.p.raw = raws[i]
		out[i] = o
	}
	return out, nil
}

// entityLife returns the lifetime of the entity a link sends to, receives from or
// manages ($management), or nil for $cbs and response links.
func (l *srvLink) entityLife() *lifetime {
	switch {
	case l.sender != nil:
		return l.sender.target.lifespan()
	case l.rcv != nil:
		return &l.rcv.e.life
	case l.node != nil && !l.node.cbs:
		path, _ := splitSubQueue(l.node.path)
		ns := l.s.c.srv.ns
		ns.mu.Lock()
		defer ns.mu.Unlock()
		if t := ns.topics[path]; t != nil {
			return &t.life
		}
		if e := ns.entities[path]; e != nil {
			return &e.life
		}
	}
	return nil
}

// resolvePath returns the path under which ns keeps the queue, topic or subscription
// path names in any letter case (Namespace.keyLocked), or path when it names none.
func (ns *Namespace) resolvePath(path string) string {
	ns.mu.Lock()
	defer ns.mu.Unlock()
	return ns.keyLocked(path)
}

// storeWait sleeps the latency model's wait for one send request, or less when ctx ends
// first.
func (s *Sender) storeWait(ctx context.Context) { _ = s.ns.latency.store(ctx) }

// settleWait sleeps the latency model's round trip for one settlement, or less when ctx
// ends first. The server settles in turn with settleNow.
func (r *Receiver) settleWait(ctx context.Context) { _ = r.ns.latency.roundTrip(ctx) }

// amqpErrorFor maps an error of the entity model to the AMQP error the service would
// send, so that the SDK maps it back: CodeLockLost to com.microsoft:message-lock-lost,
// ErrMessageTooLarge to amqp:link:message-size-exceeded, a transient fault
// (CodeConnectionLost, CodeTimeout) to com.microsoft:timeout, which the SDK retries by
// itself and finally reports as CodeTimeout, and so on.
func amqpErrorFor(err error) *amqp.Error {
	cond := condInternalError
	var sbErr *azservicebus.Error
	var ae *goamqp.Error
	switch {
	case errors.As(err, &ae): // the service's own condition (sessions): the SDK reads it as is
		return &amqp.Error{Condition: amqp.Symbol(ae.Condition), Description: ae.Description}
	case errors.Is(err, azservicebus.ErrMessageTooLarge):
		cond = condMessageTooLarge
	case errors.As(err, &sbErr):
		switch sbErr.Code {
		case azservicebus.CodeLockLost:
			cond = condLockLost
		case azservicebus.CodeConnectionLost, azservicebus.CodeTimeout:
			cond = condTimeout
		case azservicebus.CodeUnauthorizedAccess:
			cond = condUnauthorized
		case azservicebus.CodeNotFound:
			cond = condNotFound
		case azservicebus.CodeClosed:
			cond = condDetachForced
		}
	case errors.Is(err, ErrNotSettleable), errors.Is(err, ErrInvalidArgument):
		cond = condNotAllowed
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		cond = condTimeout
	}
	return &amqp.Error{Condition: cond, Description: err.Error()}
}

// $management error conditions: the service names the error of an unsuccessful
// response in an errorCondition application property, which the Python, .NET, Java and
// JavaScript SDKs map to their error types (azure-servicebus 7.x mgmt_handlers.py and
// exceptions.py _ERROR_CODE_TO_ERROR_MAPPING; @azure/core-amqp requestResponseLink.js);
// the Go SDK reads only the status code. Status codes and conditions pair as in
// @azure/core-amqp errors.js ConditionStatusMapper.
const (
	condSessionLockLost amqp.Symbol = "com.microsoft:session-lock-lost"
	condMessageNotFound amqp.Symbol = "com.microsoft:message-not-found"
	condServerBusy      amqp.Symbol = "com.microsoft:server-busy"
	condArgumentError   amqp.Symbol = "com.microsoft:argument-error"
)

// statusFor maps an error of the entity model to a $management status code, error
// condition and description: 410 (Gone) and com.microsoft:message-lock-lost for a lost
// lock, which the SDKs report as lock lost, 404 (amqp:not-found, or
// com.microsoft:message-not-found for a message), 401, 503 (com.microsoft:server-busy)
// for transient faults, which the SDKs retry, 408, 400 and 500.
func statusFor(err error) (int32, amqp.Symbol, string) {
	var sbErr *azservicebus.Error
	var ae *goamqp.Error
	var noMsg *messageNotFoundError
	switch {
	case errors.Is(err, azservicebus.ErrMessageTooLarge):
		return 400, condMessageTooLarge, err.Error()
	case errors.Is(err, ErrInvalidArgument), errors.Is(err, ErrNotSettleable):
		return 400, condArgumentError, err.Error()
	case errors.As(err, &ae) && ae.Condition == goamqp.ErrCondNotAllowed:
		return 405, condNotAllowed, ae.Description
	case errors.As(err, &ae):
		return 500, amqp.Symbol(ae.Condition), ae.Description
	case errors.As(err, &noMsg):
		return 404, condMessageNotFound, err.Error()
	case errors.As(err, &sbErr):
		switch sbErr.Code {
		case azservicebus.CodeLockLost:
			return 410, condLockLost, "The lock supplied is invalid. Either the lock expired, or the message has already been removed from the queue."
		case azservicebus.CodeNotFound:
			return 404, condNotFound, err.Error()
		case azservicebus.CodeUnauthorizedAccess:
			return 401, condUnauthorized, err.Error()
		case azservicebus.CodeConnectionLost:
			return 503, condServerBusy, err.Error()
		case azservicebus.CodeTimeout:
			return 408, condTimeout, err.Error()
		}
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return 408, condTimeout, err.Error()
	}
	return 500, condInternalError, err.Error()
}

// forToken returns the receiver that renews or settles the lock with token through
// $management: any receiver of the sub-queue may (SDK live test
// TestReceiver_SettleWithOnlyLockToken), so r, except for a message of a session, which
// only the receiver holding its session settles.
func (r *Receiver) forToken(token [16]byte) *Receiver {
	r.e.mu.Lock()
	defer r.e.mu.Unlock()
	if m := r.sq.byToken[token]; m != nil && m.holder != nil && m.holder.isSession() {
		return m.holder
	}
	return r
}
