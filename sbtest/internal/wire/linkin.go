package wire

import (
	"sync"

	"github.com/sbkit/sbkit/sbtest/internal/amqp"
)

// creditWindow is the link credit the server grants to a client's sending link; it tops
// the credit up when half of it is used, counting the deliveries still being handled.
const creditWindow = 1000

// inLink is what the links the client sends on (senderLink, requestLink) share: the
// delivery being assembled and the credit the server grants. cur belongs to the reader
// goroutine; the credit state is guarded by mu, and flowMu keeps the flows that grant
// credit in order.
type inLink struct {
	linkBase
	cur      *inDelivery
	flowMu   sync.Mutex
	received uint32 // deliveries received: the link's delivery-count as receiver
	inCredit uint32 // credit the client has left
	inFlight uint32 // deliveries received and not yet answered
}

// inDelivery is a message being received from the client, possibly over several frames.
type inDelivery struct {
	id       uint32
	format   uint32
	settled  bool
	buf      []byte
	oversize bool
}

// start grants the link its first credit once its attach is answered.
func (l *inLink) start() { l.grantCredit() }

// onFlow answers a flow that asks for an echo with the link's state; the client's
// credit and drain concern only the links the server sends on.
func (l *inLink) onFlow(f *amqp.Flow) {
	if f.Echo {
		l.flowMu.Lock()
		l.mu.Lock()
		fl := &amqp.Flow{Handle: amqp.Ptr(l.handle), DeliveryCount: amqp.Ptr(l.received), LinkCredit: amqp.Ptr(l.inCredit)}
		l.mu.Unlock()
		l.s.writeFlow(fl)
		l.flowMu.Unlock()
	}
}

// grantCredit tops up the credit of a link the client sends on once half of it is used:
// the client may have creditWindow deliveries unanswered (received or in flight), so a
// slow entity (latency, a hanging fault) pushes back on the client instead of piling up
// goroutines.
func (l *inLink) grantCredit() {
	l.flowMu.Lock()
	defer l.flowMu.Unlock()
	l.mu.Lock()
	if l.detached || l.inCredit >= creditWindow/2 || l.inFlight+l.inCredit >= creditWindow {
		l.mu.Unlock()
		return
	}
	l.inCredit = creditWindow - l.inFlight
	f := &amqp.Flow{Handle: amqp.Ptr(l.handle), DeliveryCount: amqp.Ptr(l.received), LinkCredit: amqp.Ptr(l.inCredit)}
	l.mu.Unlock()
	l.s.writeFlow(f)
}

// answered records that a delivery the client sent was handled, and grants credit.
func (l *inLink) answered() {
	l.mu.Lock()
	l.inFlight--
	l.mu.Unlock()
	l.grantCredit()
}

// assemble adds a transfer frame to the delivery the client is sending and returns the
// delivery once it is complete and still to be handled (nil meanwhile, and for an
// aborted delivery or one that crossed the server's detach, which count as answered).
// The caller answers a delivery it gets (answered). It runs on the reader goroutine.
func (l *inLink) assemble(t *amqp.Transfer, payload []byte) (*inDelivery, error) {
	if l.cur == nil {
		if t.DeliveryID == nil {
			return nil, protoError(condInvalidField, "first transfer of a delivery without delivery-id")
		}
		d := &inDelivery{id: *t.DeliveryID}
		if t.MessageFormat != nil {
			d.format = *t.MessageFormat
		}
		l.mu.Lock()
		if l.inCredit == 0 {
			l.mu.Unlock()
			return nil, protoError(condTransferLimit, "transfer on link %q without credit", l.name)
		}
		l.inCredit--
		l.received++
		l.inFlight++
		l.mu.Unlock()
		l.cur = d
	}
	d := l.cur
	if t.Settled {
		d.settled = true
	}
	if t.Aborted {
		l.cur = nil
		l.answered()
		return nil, nil
	}
	switch {
	case d.oversize:
	case len(d.buf)+len(payload) > l.maxDeliveryBytes():
		d.oversize, d.buf = true, nil
	case d.buf == nil && !t.More:
		d.buf = payload // a single-frame delivery: ReadFrame's buffer is fresh, keep it
	default:
		d.buf = append(d.buf, payload...)
	}
	if t.More {
		return nil, nil
	}
	l.cur = nil
	if l.isDetached() {
		l.answered()
		return nil, nil // frames that crossed the server's detach
	}
	return d, nil
}

// maxDeliveryBytes bounds the bytes of one incoming delivery: the message size limit
// plus room for the AMQP encoding and a batch's framing.
func (l *inLink) maxDeliveryBytes() int {
	return wireMaxMessageSize(l.s.c.srv.broker) + 64*1024
}
