package sbtest

import (
	"fmt"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/sbkit/sbkit/sbtest/internal/amqp"
)

// store decodes a delivery sent on a sending link (one message, or a batch: message
// format 0x80013700 with one data section per encoded message), stores it in the entity
// through the model's Sender (size limit, faults, latency; a batch is one request) and
// settles the delivery with accepted or rejected. It runs in its own goroutine: the
// latency model's waits of pipelined sends overlap, and each is stored in turn t, in the
// order the deliveries arrived. A detach, end or close that arrives meanwhile cuts the
// wait short and the delivery is stored all the same: the broker received it.
func (l *srvLink) store(d *inDelivery, t turn) {
	defer t.end()
	out, batch, state := l.outgoing(d)
	if state == nil {
		defer l.sender.enter(out)()
		l.sender.storeWait(l.ctx)
	}
	t.wait()
	if state == nil {
		state = &amqp.Accepted{}
		if _, err := l.sender.sendNow(l.ctx, out, batch); err != nil {
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
func (l *srvLink) outgoing(d *inDelivery) (out []outgoing, batch bool, rejection amqp.DeliveryState) {
	reject := func(cond amqp.Symbol, format string, args ...any) ([]outgoing, bool, amqp.DeliveryState) {
		return nil, false, &amqp.Rejected{Error: protoError(cond, format, args...)}
	}
	if d.oversize {
		return reject(condMessageTooLarge, "the delivery exceeds the limit of %d bytes", wireMaxMessageSize(l.s.c.srv.ns))
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
	raws := make([]rawAMQP, len(parts))
	for i, p := range parts {
		msgs[i], raws[i] = toSDKMessage(p)
	}
	out, err := l.sender.outgoingOf(msgs, raws)
	if err != nil {
		return nil, false, &amqp.Rejected{Error: amqpErrorFor(err)}
	}
	return out, batch, nil
}

// request decodes a request sent to $cbs or $management, runs it and sends the response
// to the link the request's reply-to names (or, without reply-to, to the session's
// response link on the same node). It runs a request only once its answer can go: the
// response link has credit (taken for it), and an answer that carries messages (peek,
// receive by sequence number, session state) has room in the connection's budget of
// pending responses (responseBudget), so that a client that never reads its answers
// makes the server build none.
func (l *srvLink) request(d *inDelivery) {
	var req amqp.Message
	if err := req.UnmarshalBinary(d.buf); err != nil {
		l.log.Warn("malformed request", "err", err)
		return
	}
	out := l.responseLink(&req)
	if out == nil || !out.reserveCredit() {
		return
	}
	if !l.node.cbs && carriesMessages(&req) {
		budget := l.s.c.responses
		if err := budget.Acquire(l.ctx, maxPendingResponse); err != nil {
			return
		}
		defer budget.Release(maxPendingResponse)
	}
	resp := l.node.serve(l.ctx, l, &req)
	resp.Properties = &amqp.Properties{}
	if req.Properties != nil {
		resp.Properties.CorrelationID = req.Properties.MessageID
	}
	if err := out.sendResponse(resp); err != nil {
		l.log.Debug("response not sent", "err", err)
	}
}

// maxPendingResponse bounds what one $management answer that carries messages holds
// (a peek stops adding messages past it), and responseBudget how many such answers a
// connection builds and sends at once: 4 × 1 MiB, sbtest's own bounds (about what the
// connection's unread frames may hold, maxWriteBuffer).
const (
	maxPendingResponse = 1 << 20
	responseBudget     = 4 * maxPendingResponse
)

// carriesMessages reports whether req's answer carries messages or session state.
func carriesMessages(req *amqp.Message) bool {
	opv, _ := mapGet(req.ApplicationProperties, "operation")
	switch op, _ := opv.(string); op {
	case opPeek, opReceiveBySeq, opGetSessionState:
		return true
	}
	return false
}

// responseLink finds the link a request's response goes to: the one its reply-to names
// or, for a request without reply-to, the response link of the same node in the same
// session, as the service answers the Python SDK (azure-servicebus _pyamqp cbs.py
// _put_token and management_link.py send no reply-to and pair the links by address).
func (l *srvLink) responseLink(req *amqp.Message) *srvLink {
	if req.Properties != nil && req.Properties.ReplyTo != nil {
		out := l.s.c.replyLink(*req.Properties.ReplyTo)
		if out == nil {
			l.log.Warn("no response link for the request's reply-to", "reply_to", *req.Properties.ReplyTo)
		}
		return out
	}
	if out := l.s.responseLinkFor(l.addr); out != nil {
		return out
	}
	l.log.Warn("request without reply-to, and no response link for its node in the session")
	return nil
}

// reserveCredit waits until the client gives the response link credit and takes one for
// a response (reserveCredit then sendResponse), completing drains meanwhile. It reports
// false when the link went away.
func (l *srvLink) reserveCredit() bool {
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
func (l *srvLink) sendResponse(m *amqp.Message) error {
	payload, err := m.MarshalBinary()
	if err != nil {
		return fmt.Errorf("sbtest: server: encoding a response: %w", err)
	}
	l.sendMu.Lock()
	defer l.sendMu.Unlock()
	l.tagSeq++
	tag := []byte(fmt.Sprintf("%d", l.tagSeq))
	if !l.s.sendDelivery(l.ctx, l, tag, payload, true, [16]byte{}) {
		return errClosed()
	}
	return nil
}
