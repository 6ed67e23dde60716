package sbtest

import (
	"context"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
)

// The seam between the model and the wire server. The server (the wire_*.go files)
// uses the model through its exported API (Namespace, Sender, Receiver, SessionReceiver,
// Entity) and through the unexported names this file declares or lists (the list
// below), which exist for it; the model refers to nothing of the server. Both
// directions are checked: TestModelRefersToNoServerName refuses a model file that names
// the server's, and TestServerUsesModelThroughSeam a wire_*.go file that names an
// unexported model identifier neither declared nor listed here (and a listed name that
// no wire_*.go file uses). The names are:
//
//   - sending: Sender.outgoingOf prepares the messages of one request (the size limit,
//     and each message's raw AMQP sections as a rawAMQP, message.go) as outgoing values
//     (schedule.go); Sender.enter counts the request in flight, Sender.storeWait sleeps
//     the latency model's wait, and Sender.sendNow stores it in its turn (both
//     sender.go), so that pipelined requests wait together and are stored in arrival
//     order; Sender.storeMessages does all of that at once (schedule-message);
//   - receiving: Namespace.receiverAt opens a receiver for a link's address,
//     Receiver.tryReceive takes what is available without waiting (a drain),
//     Receiver.receiveNow waits for messages without the round trip, which the server
//     applies to a link's credit and transfers (halfRoundTrip each way),
//     Receiver.receiveDeferred receives deferred messages up to a size (receiver.go),
//     Receiver.peek peeks up to a size (peek.go),
//     Receiver.settleWait sleeps a settlement's round trip, Receiver.complete, abandon,
//     deferLock and deadLetter settle by lock token in turn, Receiver.releaseLock gives
//     a message back without counting the delivery (the released outcome),
//     Receiver.forToken finds who settles a token through $management, and
//     Receiver.peekLock tells the receive mode;
//   - sessions: acceptSession (msgsession_receiver.go) and SessionReceiver.receiver;
//   - entities: Namespace.declare (namespace.go) creates ServerOptions' queues and
//     topics, Namespace.resolvePath finds a name in any letter case, Namespace.exists
//     (namespace.go) tells whether it names one, and Namespace.deleted, Sender.deleted
//     and Receiver.deleted end when the entity is deleted (the server detaches its
//     links);
//   - errors: errClosed, errLockLost, errNotFound and errNonSessionReceiver (errors.go,
//     msgsession.go) make the model's errors, modelerr.MessageNotFound is the one for a
//     message rather than an entity, and condEntityDisabled (status.go) is the
//     condition of an operation an entity's status forbids; the server maps them to
//     AMQP and HTTP (wire_errors.go, wire_httpdata.go).

// The unexported model names declared in other files that the server uses (those above
// that this file does not declare): a list for TestServerUsesModelThroughSeam, never
// read.
var _ = []any{
	// sending
	(*Sender).enter, (*Sender).sendNow, outgoing{}, rawAMQP(nil),
	// receiving
	(*Receiver).peek, (*Receiver).receiveDeferred,
	// sessions
	acceptSession,
	// entities
	(*Namespace).declare, (*Namespace).exists,
	// errors
	errClosed, errLockLost, errNotFound, errNonSessionReceiver, condEntityDisabled,
}

// outgoingOf prepares messages to send through s as one request, applying the size
// limit. raws[i] are msgs[i]'s raw AMQP sections (nil for none).
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

// storeWait sleeps the latency model's wait for one send request, or less when ctx ends
// first.
func (s *Sender) storeWait(ctx context.Context) { _ = s.ns.latency.store(ctx) }

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

// deleted returns a context that ends when the queue or topic s sends to is deleted.
func (s *Sender) deleted() context.Context { return s.target.lifespan().done() }

// receiverAt returns a receiver for the queue or subscription at path (in any letter
// case) with opts, or CodeNotFound when there is none.
func (ns *Namespace) receiverAt(path string, opts *ReceiverOptions) (*Receiver, error) {
	e, ok := ns.Entity(path)
	if !ok {
		return nil, errNotFound()
	}
	return newReceiver(ns, e, opts)
}

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

// receiveNow is ReceiveMessages without the latency model's round trip: it waits until
// a message is available (or ctx ends) and takes up to max of them. The server applies
// the latency to the credit and the transfers instead (wire_receive.go).
func (r *Receiver) receiveNow(ctx context.Context, max int) ([]*azservicebus.ReceivedMessage, error) {
	return r.receive(ctx, max, false)
}

// halfRoundTrip is half the latency model's round trip: the way of one frame.
func (r *Receiver) halfRoundTrip() time.Duration { return max(0, r.ns.latency.get().RoundTrip) / 2 }

// settleWait sleeps the latency model's round trip for one settlement, or less when ctx
// ends first. The server settles in turn afterwards, by lock token.
func (r *Receiver) settleWait(ctx context.Context) { _ = r.ns.latency.roundTrip(ctx) }

// complete completes the message r holds with token, without the round trip (settleNow).
func (r *Receiver) complete(ctx context.Context, token [16]byte) error {
	return r.settleNow(ctx, token, r.completion())
}

// abandon abandons the message r holds with token with props to modify, without the
// round trip.
func (r *Receiver) abandon(ctx context.Context, token [16]byte, props map[string]any) error {
	return r.settleNow(ctx, token, r.abandonment(props))
}

// deferLock defers the message r holds with token with props to modify, without the
// round trip.
func (r *Receiver) deferLock(ctx context.Context, token [16]byte, props map[string]any) error {
	return r.settleNow(ctx, token, r.deferral(props))
}

// deadLetter dead-letters the message r holds with token, without the round trip.
func (r *Receiver) deadLetter(ctx context.Context, token [16]byte, o *azservicebus.DeadLetterOptions) error {
	return r.settleNow(ctx, token, r.deadLettering(o))
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
	e.stats.released.Add(1)
	return true
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

// peekLock reports whether r receives in peek-lock mode (else receive-and-delete).
func (r *Receiver) peekLock() bool { return r.mode == azservicebus.ReceiveModePeekLock }

// deleted returns a context that ends when the queue or subscription r reads is deleted.
func (r *Receiver) deleted() context.Context { return r.e.life.done() }

// receiver returns the Receiver inside sr, which reads the session's messages.
func (sr *SessionReceiver) receiver() *Receiver { return sr.r }

// resolvePath returns the path under which ns keeps the queue, topic or subscription
// path names in any letter case (Namespace.keyLocked), or path when it names none.
func (ns *Namespace) resolvePath(path string) string {
	ns.mu.Lock()
	defer ns.mu.Unlock()
	return ns.keyLocked(path)
}

// deleted returns a context that ends when the queue, topic or subscription at path is
// deleted, or nil when path names none.
func (ns *Namespace) deleted(path string) context.Context {
	ns.mu.Lock()
	defer ns.mu.Unlock()
	if t := ns.topics[path]; t != nil {
		return t.life.done()
	}
	if e := ns.entities[path]; e != nil {
		return e.life.done()
	}
	return nil
}
