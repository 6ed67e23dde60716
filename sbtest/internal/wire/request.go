package wire

import (
	"context"
	"strings"

	"github.com/sbkit/sbkit/sbtest/internal/amqp"
)

// requestLink is a link on which the client sends requests to $cbs or to an entity's
// $management node; their responses go out on a responseLink.
type requestLink struct {
	inLink
	node *mgmtNode // set at attach
}

func (l *requestLink) kind() string { return "request" }

// setup refuses an attach to a $management node the client may not use, and otherwise
// makes the link's node.
func (l *requestLink) setup(*amqp.Attach) *amqp.Error {
	if err := l.authorize(); err != nil {
		return err
	}
	ns := l.s.c.srv.broker
	if l.addr == cbsNode {
		l.node = &mgmtNode{cbs: true, ns: ns}
	} else {
		l.node = newMgmtNode(ns, strings.TrimSuffix(l.addr, mgmtNodeSuffix))
	}
	return nil
}

// release closes the node's receivers, which releases their locks.
func (l *requestLink) release() {
	if l.node != nil {
		l.node.close()
	}
}

// entityDeleted ends when the entity of a $management node is deleted; $cbs has none.
func (l *requestLink) entityDeleted() context.Context {
	if l.node.cbs {
		return nil
	}
	path, _ := splitSubQueue(l.node.path)
	return l.s.c.srv.broker.Deleted(path)
}

// onTransfer accepts each complete request (unless the client sent it settled) and runs
// it in its own goroutine (request).
func (l *requestLink) onTransfer(t *amqp.Transfer, payload []byte) error {
	d, err := l.assemble(t, payload)
	if d == nil {
		return err
	}
	if !d.settled {
		l.s.writeIncomingDisposition(d.id, &amqp.Accepted{})
	}
	l.s.c.goWork("management request", func() {
		defer l.answered()
		l.request(d)
	})
	return nil
}

// request decodes a request sent to $cbs or $management, runs it and sends the response
// to the link the request's reply-to names (or, without reply-to, to the session's
// response link on the same node). It runs a request only once its answer can go: the
// response link has credit (taken for it), and an answer that carries messages (peek,
// receive by sequence number, session state) has room in the connection's budget of
// pending responses (responseBudget), so that a client that never reads its answers
// makes the server build none.
func (l *requestLink) request(d *inDelivery) {
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
func (l *requestLink) responseLink(req *amqp.Message) *responseLink {
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
