package sbtest

import (
	"context"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/sbkit/sbkit/sbtest/internal/wire"
)

// The seam between the model and the server. The server (package internal/wire) cannot
// import sbtest, so the compiler lets it see the model only through the interfaces it
// declares (internal/wire/model.go): a Broker, its Senders and their send Requests, its
// Receivers and SessionReceivers. The adapters below implement them over a Namespace and
// its senders and receivers; they are the only code that calls, for the server, the
// model's unexported methods (the latency model's waits apart from the operations they
// delay, settlement by lock token, receiving without waiting, the contexts that end when
// an entity is deleted). Only this file and server.go import the server
// (TestOnlyTheSeamImportsTheServer).

// wireBroker is the wire.Broker of a Namespace.
type wireBroker struct{ ns *Namespace }

// wireSender, wireReceiver and wireSessionReceiver are the server's views of a model
// Sender, Receiver and SessionReceiver: the exported methods are theirs, and the
// adapters add what the server needs beyond a client's API. They compare equal when
// they hold the same one.
type (
	wireSender          struct{ *Sender }
	wireReceiver        struct{ *Receiver }
	wireSessionReceiver struct{ *SessionReceiver }
)

// wireRequest is one send request of s, prepared (outgoing values).
type wireRequest struct {
	s   *Sender
	out []outgoing
}

var (
	_ wire.Broker          = wireBroker{}
	_ wire.Sender          = wireSender{}
	_ wire.Request         = wireRequest{}
	_ wire.Receiver        = wireReceiver{}
	_ wire.SessionReceiver = wireSessionReceiver{}
)

func (b wireBroker) MaxMessageSize() int      { return b.ns.MaxMessageSize() }
func (b wireBroker) RoundTrip() time.Duration { return b.ns.Latency().RoundTrip }
func (b wireBroker) Exists(path string) bool  { return b.ns.exists(path) }

func (b wireBroker) ResolvePath(path string) string {
	b.ns.mu.Lock()
	defer b.ns.mu.Unlock()
	return b.ns.keyLocked(path)
}

func (b wireBroker) Deleted(path string) context.Context {
	ns := b.ns
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

func (b wireBroker) Entity(path string) (wire.EntityInfo, bool) {
	e, ok := b.ns.Entity(path)
	if !ok {
		return wire.EntityInfo{}, false
	}
	info := wire.EntityInfo{Name: e.Name(), RequiresSession: e.Options().RequiresSession}
	if t := e.Topic(); t != nil {
		info.Topic = t.Name()
	}
	return info, true
}

func (b wireBroker) NewSender(path string) (wire.Sender, error) {
	s, err := b.ns.NewSender(path, nil)
	if err != nil {
		return nil, err
	}
	return wireSender{s}, nil
}

func (b wireBroker) ReceiverAt(path string, mode azservicebus.ReceiveMode, sub azservicebus.SubQueue) (wire.Receiver, error) {
	e, ok := b.ns.Entity(path)
	if !ok {
		return nil, errNotFound()
	}
	return asWireReceiver(newReceiver(b.ns, e, &ReceiverOptions{ReceiveMode: mode, SubQueue: sub}))
}

func (b wireBroker) NewReceiverForQueue(queue string, mode azservicebus.ReceiveMode, sub azservicebus.SubQueue) (wire.Receiver, error) {
	return asWireReceiver(b.ns.NewReceiverForQueue(queue, &ReceiverOptions{ReceiveMode: mode, SubQueue: sub}))
}

func (b wireBroker) NewReceiverForSubscription(topic, subscription string, mode azservicebus.ReceiveMode, sub azservicebus.SubQueue) (wire.Receiver, error) {
	return asWireReceiver(b.ns.NewReceiverForSubscription(topic, subscription, &ReceiverOptions{ReceiveMode: mode, SubQueue: sub}))
}

func (b wireBroker) AcceptSession(ctx context.Context, path string, id *string, mode azservicebus.ReceiveMode) (wire.SessionReceiver, error) {
	e, ok := b.ns.Entity(path)
	if !ok {
		return nil, errNotFound()
	}
	sr, err := acceptSession(ctx, b.ns, e, id, &SessionReceiverOptions{ReceiveMode: mode})
	if err != nil {
		return nil, err
	}
	return wireSessionReceiver{sr}, nil
}

// asWireReceiver returns r's adapter, or err (and a nil interface) when r is nil.
func asWireReceiver(r *Receiver, err error) (wire.Receiver, error) {
	if err != nil {
		return nil, err
	}
	return wireReceiver{r}, nil
}

func (s wireSender) Prepare(msgs []*azservicebus.Message, raws []rawAMQP) (wire.Request, error) {
	out, err := s.outgoingOf(msgs, raws)
	if err != nil {
		return nil, err
	}
	return wireRequest{s.Sender, out}, nil
}

// outgoingOf prepares msgs as one request, applying the size limit.
func (s wireSender) outgoingOf(msgs []*azservicebus.Message, raws []rawAMQP) ([]outgoing, error) {
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

func (s wireSender) StoreWait(ctx context.Context) { _ = s.ns.latency.store(ctx) }
func (s wireSender) Deleted() context.Context      { return s.target.lifespan().done() }

func (s wireSender) StoreMessages(ctx context.Context, msgs []*azservicebus.Message, raws []rawAMQP, batch bool) ([]int64, error) {
	out, err := s.outgoingOf(msgs, raws)
	if err != nil {
		return nil, err
	}
	return s.do(ctx, out, batch)
}

func (q wireRequest) Enter() (leave func()) { return q.s.enter(q.out) }

func (q wireRequest) SendNow(ctx context.Context, batch bool) ([]int64, error) {
	return q.s.sendNow(ctx, q.out, batch)
}

func (r wireReceiver) TryReceive(max int) []*azservicebus.ReceivedMessage {
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

// ReceiveNow is ReceiveMessages without the latency model's round trip: the server
// applies the latency to the credit and the transfers instead (internal/wire/receive.go).
func (r wireReceiver) ReceiveNow(ctx context.Context, max int) ([]*azservicebus.ReceivedMessage, error) {
	return r.receive(ctx, max, false)
}

func (r wireReceiver) HalfRoundTrip() time.Duration {
	return max(0, r.ns.latency.get().RoundTrip) / 2
}

func (r wireReceiver) SettleWait(ctx context.Context) { _ = r.ns.latency.roundTrip(ctx) }

func (r wireReceiver) Complete(ctx context.Context, token [16]byte) error {
	return r.settleNow(ctx, token, r.completion())
}

func (r wireReceiver) Abandon(ctx context.Context, token [16]byte, props map[string]any) error {
	return r.settleNow(ctx, token, r.abandonment(props))
}

func (r wireReceiver) DeferLock(ctx context.Context, token [16]byte, props map[string]any) error {
	return r.settleNow(ctx, token, r.deferral(props))
}

func (r wireReceiver) DeadLetter(ctx context.Context, token [16]byte, o *azservicebus.DeadLetterOptions) error {
	return r.settleNow(ctx, token, r.deadLettering(o))
}

func (r wireReceiver) ReleaseLock(token [16]byte) bool {
	e := r.e
	e.mu.Lock()
	defer e.mu.Unlock()
	e.tick(time.Now())
	m := r.sq.byToken[token]
	if m == nil || m.holder != r.Receiver {
		return false
	}
	e.unlock(r.sq, m)
	e.requeue(r.sq, m)
	e.stats.released.Add(1)
	return true
}

// ForToken: any receiver of the sub-queue may renew or settle a lock (SDK live test
// TestReceiver_SettleWithOnlyLockToken), so r, except for a message of a session, which
// only the receiver holding its session settles.
func (r wireReceiver) ForToken(token [16]byte) wire.Receiver {
	r.e.mu.Lock()
	defer r.e.mu.Unlock()
	if m := r.sq.byToken[token]; m != nil && m.holder != nil && m.holder.isSession() {
		return wireReceiver{m.holder}
	}
	return r
}

func (r wireReceiver) PeekLock() bool           { return r.mode == azservicebus.ReceiveModePeekLock }
func (r wireReceiver) Deleted() context.Context { return r.e.life.done() }

func (r wireReceiver) Peek(ctx context.Context, max int, o *azservicebus.PeekMessagesOptions, limit int) ([]*azservicebus.ReceivedMessage, error) {
	return r.peek(ctx, max, o, limit)
}

func (r wireReceiver) ReceiveDeferred(ctx context.Context, seqs []int64, limit int) ([]*azservicebus.ReceivedMessage, error) {
	return r.receiveDeferred(ctx, seqs, limit)
}

func (sr wireSessionReceiver) Receiver() wire.Receiver { return wireReceiver{sr.r} }
