package wire

import (
	"context"
	"fmt"

	"github.com/sbkit/sbkit/sbtest/internal/amqp"
	"github.com/sbkit/sbkit/sbtest/internal/modelerr"
)

// responseLink is a link on which the client receives the responses of $cbs or an
// entity's $management node. Requests find it by the address their reply-to names
// (srvConn.replyLink) or, without reply-to, by its node (srvSession.responseLinkFor).
// Its deliveries are sent settled.
type responseLink struct {
	outLink
	replyTo string // the client's target address, set at attach
	tagSeq  uint64 // guarded by sendMu
}

func (l *responseLink) kind() string { return "response" }

// setup refuses an attach to a $management node the client may not use, or one that
// names no address to answer to.
func (l *responseLink) setup(a *amqp.Attach) *amqp.Error {
	if err := l.authorize(); err != nil {
		return err
	}
	// The client's requests name this link in their reply-to: by its target address
	// (go-amqp), or by its link name when it has no target address, as the JavaScript
	// SDK's $cbs link does (@azure/core-amqp cbs.js: name: replyTo, no target).
	l.replyTo = a.Name
	if a.Target != nil && a.Target.Address != "" {
		l.replyTo = a.Target.Address
	}
	if l.replyTo == "" {
		return protoError(condInvalidField, "response link without a name or target address")
	}
	return nil
}

// start makes the link the one that receives responses addressed to its reply-to.
func (l *responseLink) start() { l.s.c.registerReply(l.replyTo, l) }

// release unregisters the link as the receiver of its responses.
func (l *responseLink) release() {
	if l.replyTo != "" {
		l.s.c.unregisterReply(l.replyTo, l)
	}
}

func (l *responseLink) entityDeleted() context.Context { return nil }

// onFlow takes the client's credit and drain requests, which reserveCredit waits for.
func (l *responseLink) onFlow(f *amqp.Flow) { l.flow(f, nil) }

// reserveCredit waits until the client gives the response link credit and takes one for
// a response (reserveCredit then sendResponse), completing drains meanwhile. It reports
// false when the link went away.
func (l *responseLink) reserveCredit() bool {
	for {
		credit, drain, ok := l.waitCredit()
		if !ok {
			return false
		}
		if credit == 0 && drain {
			l.sendMu.Lock()
			l.completeDrain()
			l.sendMu.Unlock()
			continue
		}
		if l.takeCredit() {
			return true
		}
	}
}

// sendResponse sends a settled response message on a response link, with the credit
// reserveCredit took for it.
func (l *responseLink) sendResponse(m *amqp.Message) error {
	payload, err := m.MarshalBinary()
	if err != nil {
		return fmt.Errorf("sbtest: server: encoding a response: %w", err)
	}
	l.sendMu.Lock()
	defer l.sendMu.Unlock()
	l.tagSeq++
	tag := []byte(fmt.Sprintf("%d", l.tagSeq))
	if !l.s.sendDelivery(l.ctx, &l.linkBase, tag, payload, true, outDelivery{}) {
		return modelerr.Closed()
	}
	return nil
}
