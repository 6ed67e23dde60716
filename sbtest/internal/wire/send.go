package wire

import (
	"context"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/sbkit/sbkit/sbtest/internal/amqp"
)

// senderLink is a link on which the client sends messages to a queue or topic, which
// the server stores through the model's Sender.
type senderLink struct {
	inLink
	sender Sender // set at attach
}

func (l *senderLink) kind() string { return "send" }

// setup refuses an attach without a target or to an entity the client may not send to
// or that does not exist, and otherwise makes the link's Sender.
func (l *senderLink) setup(a *amqp.Attach) *amqp.Error {
	if a.Target == nil {
		return protoError(condInvalidField, "attach without a target")
	}
	if err := l.authorize(); err != nil {
		return err
	}
	snd, err := l.s.c.srv.broker.NewSender(l.addr)
	if err != nil {
		return protoError(condNotFound, "no queue or topic named %q", l.addr)
	}
	l.sender = snd
	return nil
}

// release leaves the Sender open: the deliveries that arrived before the detach are
// still stored, in turn (store), and a model Sender holds nothing to release.
func (l *senderLink) release() {}

func (l *senderLink) entityDeleted() context.Context { return l.sender.Deleted() }

// onTransfer stores each complete delivery in its own goroutine, in the order the
// deliveries arrived (store).
func (l *senderLink) onTransfer(t *amqp.Transfer, payload []byte) error {
	d, err := l.assemble(t, payload)
	if d == nil {
		return err
	}
	turn := l.s.order.reserve()
	l.s.c.goWork("store", func() {
		defer l.answered()
		l.store(d, turn)
	})
	return nil
}

// store decodes a delivery sent on a sending link (one message, or a batch: message
// format 0x80013700 with one data section per encoded message), stores it in the entity
// through the model's Sender (size limit, faults, latency; a batch is one request) and
// settles the delivery with accepted or rejected. It runs in its own goroutine: the
// latency model's waits of pipelined sends overlap, and each is stored in turn t, in the
// order the deliveries arrived. A detach, end or close that arrives meanwhile cuts the
// wait short and the delivery is stored all the same: the broker received it.
func (l *senderLink) store(d *inDelivery, t turn) {
	defer t.end()
	out, batch, state := l.outgoing(d)
	if state == nil {
		defer out.Enter()()
		l.sender.StoreWait(l.ctx)
	}
	t.wait()
	if state == nil {
		state = &amqp.Accepted{}
		if _, err := out.SendNow(l.ctx, batch); err != nil {
			state = &amqp.Rejected{Error: amqpErrorFor(err)}
		}
	}
	if rej, ok := state.(*amqp.Rejected); ok {
		l.log.Debug("message rejected", "condition", string(rej.Error.Condition), "description", rej.Error.Description)
	}
	if !d.settled {
		l.s.writeIncomingDisposition(d.id, state)
	}
}

// outgoing decodes a delivery into the messages of one send request, or returns the
// rejection to answer it with.
func (l *senderLink) outgoing(d *inDelivery) (out Request, batch bool, rejection amqp.DeliveryState) {
	reject := func(cond amqp.Symbol, format string, args ...any) (Request, bool, amqp.DeliveryState) {
		return nil, false, &amqp.Rejected{Error: protoError(cond, format, args...)}
	}
	if d.oversize {
		return reject(condMessageTooLarge, "the delivery exceeds the limit of %d bytes", wireMaxMessageSize(l.s.c.srv.broker))
	}
	var m amqp.Message
	if err := m.UnmarshalBinary(d.buf); err != nil {
		return reject(condDecodeError, "malformed message: %v", err)
	}
	parts := []*amqp.Message{&m}
	batch = d.format == amqp.MessageFormatBatch
	if batch {
		var err error
		if parts, err = amqp.SplitBatch(&m); err != nil {
			return reject(condDecodeError, "malformed batch: %v", err)
		}
	} else if d.format != 0 {
		return reject(condNotImplemented, "message format %#x", d.format)
	}
	msgs := make([]*azservicebus.Message, len(parts))
	raws := make([]RawAMQP, len(parts))
	for i, p := range parts {
		msgs[i], raws[i] = toSDKMessage(p)
	}
	out, err := l.sender.Prepare(msgs, raws)
	if err != nil {
		return nil, false, &amqp.Rejected{Error: amqpErrorFor(err)}
	}
	return out, batch, nil
}
