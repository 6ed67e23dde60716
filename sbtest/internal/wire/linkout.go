package wire

import (
	"sync"

	"github.com/sbkit/sbkit/sbtest/internal/amqp"
)

// outLink is what the links the server sends on (receiverLink, responseLink) share: the
// credit the client grants, and the drain it asks for. sendMu serializes the link's
// deliveries; the credit state is guarded by mu.
type outLink struct {
	linkBase
	sendMu        sync.Mutex
	credit        uint32
	deliveryCount uint32
	drain         bool
}

// onTransfer refuses a transfer: on this link the server is the sender.
func (l *outLink) onTransfer(*amqp.Transfer, []byte) error {
	return protoError(condNotAllowed, "transfer on link %q, where the server is the sender", l.name)
}

// flow handles a flow frame for the link: new credit or a drain request, and an echo
// request. then, when not nil, runs with l.mu held once the credit and drain are
// updated, given the credit before the flow.
func (l *outLink) flow(f *amqp.Flow, then func(old uint32)) {
	l.mu.Lock()
	old := l.credit
	if f.LinkCredit != nil {
		var rcvCount uint32 // the server's initial delivery-count is 0
		if f.DeliveryCount != nil {
			rcvCount = *f.DeliveryCount
		}
		l.credit = linkCredit(rcvCount, *f.LinkCredit, l.deliveryCount)
	}
	if f.Drain {
		l.drain = true
	}
	l.wakeLocked()
	if then != nil {
		then(old)
	}
	l.mu.Unlock()
	if f.Echo {
		l.writeSenderFlow(false)
	}
}

// linkCredit is the sender's credit after a flow from the receiver (AMQP 1.0 part
// 2.6.7): link-credit(snd) := delivery-count(rcv) + link-credit(rcv) - delivery-count(snd).
// Credit and delivery counts are uint32 serial numbers (part 2.7.4): the deliveries the
// receiver has not counted yet (sent - counted, modulo 2^32) use up its credit, and a
// credit of 0xFFFFFFFF is just that much credit. A receiver that
// counts more deliveries than were sent is taken at its word.
func linkCredit(rcvCount, rcvCredit, sndCount uint32) uint32 {
	unseen := sndCount - rcvCount
	if unseen > 1<<31 { // rcvCount is ahead of sndCount
		return rcvCredit
	}
	if unseen >= rcvCredit {
		return 0
	}
	return rcvCredit - unseen
}

// writeSenderFlow sends the flow state of a link the server sends on.
func (l *outLink) writeSenderFlow(drain bool) {
	l.mu.Lock()
	f := &amqp.Flow{Handle: amqp.Ptr(l.handle), DeliveryCount: amqp.Ptr(l.deliveryCount), LinkCredit: amqp.Ptr(l.credit), Drain: drain}
	l.mu.Unlock()
	l.s.writeFlow(f)
}

// completeDrain ends a drain request: the unused credit is spent (delivery-count
// advances by it) and the client is told with a flow whose drain flag is set.
func (l *outLink) completeDrain() {
	l.mu.Lock()
	l.deliveryCount += l.credit
	l.credit = 0
	l.drain = false
	l.mu.Unlock()
	l.writeSenderFlow(true)
}

// takeCredit consumes one credit for a delivery; false when there is none or the link is
// detached.
func (l *outLink) takeCredit() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.detached || l.credit == 0 {
		return false
	}
	l.credit--
	l.deliveryCount++
	return true
}

// waitCredit waits until the link has credit or a drain request, and returns the
// credit, whether a drain is pending, and false when the link went away.
func (l *outLink) waitCredit() (credit uint32, drain bool, ok bool) {
	for {
		l.mu.Lock()
		if l.detached {
			l.mu.Unlock()
			return 0, false, false
		}
		if l.credit > 0 || l.drain {
			credit, drain = l.credit, l.drain
			l.mu.Unlock()
			return credit, drain, true
		}
		ch := l.wake
		l.mu.Unlock()
		select {
		case <-ch:
		case <-l.ctx.Done():
			return 0, false, false
		}
	}
}
