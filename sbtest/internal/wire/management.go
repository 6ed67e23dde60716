package wire

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/sbkit/sbkit/sbtest/internal/amqp"
	"github.com/sbkit/sbkit/sbtest/internal/modelerr"
)

// $management operation names, as the SDK sends them in the "operation" application
// property.
const (
	opPutToken        = "put-token"
	opRenewLock       = "com.microsoft:renew-lock"
	opPeek            = "com.microsoft:peek-message"
	opSchedule        = "com.microsoft:schedule-message"
	opCancelScheduled = "com.microsoft:cancel-scheduled-message"
	opReceiveBySeq    = "com.microsoft:receive-by-sequence-number"
	opUpdateDisp      = "com.microsoft:update-disposition"
)

// mgmtNode answers the requests of one request link: $cbs (every put-token succeeds) or
// <entity>/$management. Receivers it needs (to peek, to receive deferred messages) are
// made on first use and closed with the link, which releases their locks.
type mgmtNode struct {
	cbs  bool
	ns   Broker
	path string // the entity path, with its sub-queue suffix

	mu     sync.Mutex
	closed bool
	rcvs   map[azservicebus.ReceiveMode]Receiver
}

func newMgmtNode(ns Broker, path string) *mgmtNode {
	return &mgmtNode{ns: ns, path: path, rcvs: make(map[azservicebus.ReceiveMode]Receiver)}
}

func (n *mgmtNode) close() {
	n.mu.Lock()
	n.closed = true
	rcvs := n.rcvs
	n.rcvs = nil
	n.mu.Unlock()
	for _, r := range rcvs {
		_ = r.Close(context.Background())
	}
}

// receiver returns the node's receiver for mode, made on first use.
func (n *mgmtNode) receiver(mode azservicebus.ReceiveMode) (Receiver, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return nil, modelerr.Closed()
	}
	if r := n.rcvs[mode]; r != nil {
		return r, nil
	}
	r, err := newEntityReceiver(n.ns, n.path, mode)
	if err != nil {
		return nil, err
	}
	n.rcvs[mode] = r
	return r, nil
}

// response builds a $management response: statusCode (int) and statusDescription
// application properties, and value, when not nil, as the amqp-value body. The $cbs node
// uses the status-code / status-description spelling.
func (n *mgmtNode) response(code int32, desc string, value amqp.Map) *amqp.Message {
	codeKey, descKey := "statusCode", "statusDescription"
	if n.cbs {
		codeKey, descKey = "status-code", "status-description"
	}
	m := &amqp.Message{ApplicationProperties: amqp.Map{{Key: codeKey, Value: code}, {Key: descKey, Value: desc}}}
	if value != nil {
		m.Value, m.HasValue = value, true
	}
	return m
}

// failure builds an unsuccessful $management response, its condition in the
// errorCondition application property (a symbol, as the service sends it).
func (n *mgmtNode) failure(code int32, cond amqp.Symbol, desc string) *amqp.Message {
	m := n.response(code, desc, nil)
	m.ApplicationProperties = append(m.ApplicationProperties, amqp.MapEntry{Key: "errorCondition", Value: cond})
	return m
}

func (n *mgmtNode) fail(err error) *amqp.Message {
	return n.failure(statusFor(err))
}

func (n *mgmtNode) badRequest(format string, args ...any) *amqp.Message {
	return n.failure(400, condArgumentError, fmt.Sprintf(format, args...))
}

// serve runs one request and returns its response (without correlation-id).
func (n *mgmtNode) serve(ctx context.Context, l *requestLink, req *amqp.Message) *amqp.Message {
	opv, _ := mapGet(req.ApplicationProperties, "operation")
	op, _ := opv.(string)
	if n.cbs {
		if op != opPutToken {
			return n.badRequest("unknown $cbs operation %q", op)
		}
		return n.putToken(l.s.c, req)
	}
	body, _ := req.Value.(amqp.Map)
	l.log.Debug("management request", "operation", op)
	if resp, ok := n.serveSession(ctx, l, op, req, body); ok {
		return resp
	}
	switch op {
	case opRenewLock:
		return n.renewLock(ctx, body)
	case opPeek:
		return n.peek(ctx, body, nil)
	case opSchedule:
		return n.schedule(ctx, body)
	case opCancelScheduled:
		return n.cancelScheduled(ctx, body)
	case opReceiveBySeq:
		return n.receiveBySequence(ctx, body, nil)
	case opUpdateDisp:
		return n.updateDisposition(ctx, body)
	}
	return n.failure(501, condNotImplemented, fmt.Sprintf("sbtest does not emulate the operation %q", op))
}

// putToken accepts any token, but answers 404 for an audience that names no entity, as
// the service does; the SDK reports it as CodeNotFound (azure-sdk-for-go#24499). The
// connection remembers how the client spells the namespace (echoAddress).
func (n *mgmtNode) putToken(c *srvConn, req *amqp.Message) *amqp.Message {
	v, _ := mapGet(req.ApplicationProperties, "name")
	audience, _ := v.(string)
	c.noteAudience(audience)
	if len(c.srv.sasKeys) > 0 {
		token, _ := req.Value.(string)
		g, err := verifySAS(c.srv.sasKeys, token, time.Now())
		if err == nil && !g.covers(resourcePath(audience), time.Now()) {
			err = fmt.Errorf("%w: the token's resource does not cover %s", errSAS, audience)
		}
		if err != nil {
			// As the service answers a token it refuses: 401 (the SDK's
			// CodeUnauthorizedAccess).
			return n.response(401, err.Error(), nil)
		}
		c.grant(g)
	}
	if path, ok := audiencePath(audience); ok && !n.ns.Exists(n.ns.ResolvePath(path)) {
		return n.response(404, fmt.Sprintf("The messaging entity '%s' could not be found.", path), nil)
	}
	// 202 Accepted, as the service answers (Azure/azure-amqp AmqpCbsLink.SendTokenAsync
	// checks Accepted, then OK); every SDK takes any 2xx.
	return n.response(202, "Accepted", nil)
}

// audiencePath returns the entity path of a token audience
// ("amqp://host:port/queue/$management"): the URL path without its sub-queue or
// $management suffix. ok is false when the audience names no entity (the namespace).
func audiencePath(audience string) (string, bool) {
	if !strings.Contains(audience, "://") {
		_, audience, _ = strings.Cut(audience, "/") // host/path
	}
	path, _ := nodePath(linkAddress(audience))
	return path, path != ""
}

func (n *mgmtNode) renewLock(ctx context.Context, body amqp.Map) *amqp.Message {
	tokens, ok := uuidList(body, "lock-tokens")
	if !ok {
		return n.badRequest("lock-tokens must be an array of uuid")
	}
	// Any lock of the entity, whoever received it (SDK live test
	// TestReceiver_SettleWithOnlyLockToken).
	r, err := n.receiver(azservicebus.ReceiveModePeekLock)
	if err != nil {
		return n.fail(err)
	}
	exp := make(amqp.Array, 0, len(tokens))
	for _, t := range tokens {
		rm := &azservicebus.ReceivedMessage{LockToken: t}
		if err := r.ForToken(t).RenewMessageLock(ctx, rm, nil); err != nil {
			return n.fail(err)
		}
		exp = append(exp, rm.LockedUntil.UTC())
	}
	return n.response(200, "OK", amqp.Map{{Key: "expirations", Value: exp}})
}

// peek answers peek-message with r, or with the node's own receiver when r is nil.
func (n *mgmtNode) peek(ctx context.Context, body amqp.Map, r Receiver) *amqp.Message {
	fv, _ := mapGet(body, "from-sequence-number")
	from, ok1 := asInt64(fv)
	cv, _ := mapGet(body, "message-count")
	count, ok2 := asInt64(cv)
	if !ok1 || !ok2 || count <= 0 || count > 1<<20 {
		return n.badRequest("peek needs from-sequence-number and a positive message-count")
	}
	if r == nil {
		var err error
		if r, err = n.receiver(azservicebus.ReceiveModePeekLock); err != nil {
			return n.fail(err)
		}
	}
	// The model copies no more than the answer can hold (see below).
	limit := min(maxPendingResponse, wireMaxMessageSize(n.ns)) - responseEnvelope
	msgs, err := r.Peek(ctx, int(count), &azservicebus.PeekMessagesOptions{FromSequenceNumber: &from}, limit)
	if err != nil {
		return n.fail(err)
	}
	if len(msgs) == 0 {
		return n.response(204, "No Content", nil)
	}
	// A peek returns at most the count asked for ("Message browsing",
	// learn.microsoft.com/azure/service-bus-messaging/message-browsing): the answer holds
	// the messages that fit in the response link's max-message-size (the SDK refuses a
	// larger one, go-amqp link.go) and in maxPendingResponse, at least one, so a few
	// bytes of request cost a bounded answer.
	list := make([]any, 0, len(msgs))
	size := 0
	for i, rm := range msgs {
		b, err := fromReceived(rm, false).MarshalBinary()
		if err != nil {
			return n.fail(err)
		}
		if len(list) > 0 && size+len(b)+entryOverhead > limit {
			break
		}
		msgs[i] = nil // encoded: its copy can go
		list = append(list, amqp.Map{{Key: "message", Value: b}})
		size += len(b) + entryOverhead
	}
	return n.response(200, "OK", amqp.Map{{Key: "messages", Value: list}})
}

// responseEnvelope is room kept in a $management answer for what surrounds its list of
// messages (header, properties, status); entryOverhead is the encoding of one entry of
// the list around the message's bytes (a map with one key, a binary's constructor).
// receivedOverhead is what a received message adds to its size in such a list: its
// entry, lock token and the broker's annotations.
const (
	responseEnvelope = 1024
	entryOverhead    = 32
	receivedOverhead = 256
)

// messagesResponse encodes received messages as the "messages" list of peek and
// receive-by-sequence-number responses.
func (n *mgmtNode) messagesResponse(msgs []*azservicebus.ReceivedMessage, withLock bool) *amqp.Message {
	list := make([]any, 0, len(msgs))
	for _, rm := range msgs {
		b, err := fromReceived(rm, withLock).MarshalBinary()
		if err != nil {
			return n.fail(err)
		}
		entry := amqp.Map{{Key: "message", Value: b}}
		if withLock && rm.LockToken != ([16]byte{}) {
			entry = append(entry, amqp.MapEntry{Key: "lock-token", Value: amqp.UUID(rm.LockToken)})
		}
		list = append(list, entry)
	}
	return n.response(200, "OK", amqp.Map{{Key: "messages", Value: list}})
}

func (n *mgmtNode) schedule(ctx context.Context, body amqp.Map) *amqp.Message {
	v, _ := mapGet(body, "messages")
	list, ok := v.([]any)
	if !ok || len(list) == 0 {
		return n.badRequest("messages must be a non-empty list")
	}
	msgs := make([]*azservicebus.Message, 0, len(list))
	raws := make([]RawAMQP, 0, len(list))
	for _, item := range list {
		entry, _ := item.(amqp.Map)
		raw, _ := mapGet(entry, "message")
		b, ok := raw.([]byte)
		if !ok {
			return n.badRequest("every scheduled message needs a binary message")
		}
		var am amqp.Message
		if err := am.UnmarshalBinary(b); err != nil {
			return n.badRequest("malformed scheduled message: %v", err)
		}
		m, sections := toSDKMessage(&am)
		raws = append(raws, sections)
		if m.ScheduledEnqueueTime == nil {
			m.ScheduledEnqueueTime = to.Ptr(time.Now())
		}
		msgs = append(msgs, m)
	}
	s, err := n.ns.NewSender(n.path)
	if err != nil {
		return n.fail(err)
	}
	seqs, err := s.StoreMessages(ctx, msgs, raws, false)
	if err != nil {
		return n.fail(err)
	}
	arr := make(amqp.Array, len(seqs))
	for i, seq := range seqs {
		arr[i] = seq
	}
	return n.response(200, "OK", amqp.Map{{Key: "sequence-numbers", Value: arr}})
}

func (n *mgmtNode) cancelScheduled(ctx context.Context, body amqp.Map) *amqp.Message {
	seqs, ok := int64List(body, "sequence-numbers")
	if !ok {
		return n.badRequest("sequence-numbers must be an array of long")
	}
	s, err := n.ns.NewSender(n.path)
	if err != nil {
		return n.fail(err)
	}
	if err := s.CancelScheduledMessages(ctx, seqs, nil); err != nil {
		return n.fail(err)
	}
	return n.response(200, "OK", nil)
}

// receiveBySequence answers receive-by-sequence-number with r (a session receiver, whose
// mode is its own), or with the node's receiver for the requested mode when r is nil.
func (n *mgmtNode) receiveBySequence(ctx context.Context, body amqp.Map, r Receiver) *amqp.Message {
	seqs, ok := int64List(body, "sequence-numbers")
	if !ok {
		return n.badRequest("sequence-numbers must be an array of long")
	}
	mode := azservicebus.ReceiveModeReceiveAndDelete
	mv, _ := mapGet(body, "receiver-settle-mode")
	if m, _ := asInt64(mv); m == 1 {
		mode = azservicebus.ReceiveModePeekLock
	}
	if r == nil {
		var err error
		if r, err = n.receiver(mode); err != nil {
			return n.fail(err)
		}
	}
	// All or nothing, as a missing number fails the whole request on the service
	// (learn.microsoft.com/dotnet/api/azure.messaging.servicebus.servicebusreceiver.receivedeferredmessagesasync:
	// the messages "identified by sequenceNumbers"). The answer must fit in the
	// response link's max-message-size, which the Go SDK takes from the server's attach
	// and enforces by closing the link (go-amqp link.go, receiver.go), and in
	// maxPendingResponse: one that would not is refused (400, message-size-exceeded)
	// before any message is locked or deleted. A single message always goes.
	limit := min(maxPendingResponse, wireMaxMessageSize(n.ns)) - responseEnvelope - len(seqs)*receivedOverhead
	msgs, err := r.ReceiveDeferred(ctx, seqs, max(limit, 1))
	if err != nil {
		return n.fail(err)
	}
	// Never 204: the SDK treats "no messages" here as a broken connection.
	return n.messagesResponse(msgs, r.PeekLock())
}

func (n *mgmtNode) updateDisposition(ctx context.Context, body amqp.Map) *amqp.Message {
	tokens, ok := uuidList(body, "lock-tokens")
	if !ok {
		return n.badRequest("lock-tokens must be an array of uuid")
	}
	sv, _ := mapGet(body, "disposition-status")
	status, _ := sv.(string)
	var props map[string]any
	if pv, ok := mapGet(body, "properties-to-modify"); ok {
		pm, _ := pv.(amqp.Map)
		props = propsFromAnnotations(pm)
	}
	// Any lock of the entity, whoever received it (SDK live test
	// TestReceiver_SettleWithOnlyLockToken).
	r, err := n.receiver(azservicebus.ReceiveModePeekLock)
	if err != nil {
		return n.fail(err)
	}
	for _, t := range tokens {
		holder := r.ForToken(t)
		rm := &azservicebus.ReceivedMessage{LockToken: t}
		switch status {
		case "completed":
			err = holder.CompleteMessage(ctx, rm, nil)
		case "abandoned":
			err = holder.AbandonMessage(ctx, rm, &azservicebus.AbandonMessageOptions{PropertiesToModify: props})
		case "defered", "deferred":
			err = holder.DeferMessage(ctx, rm, &azservicebus.DeferMessageOptions{PropertiesToModify: props})
		case "suspended":
			o := &azservicebus.DeadLetterOptions{PropertiesToModify: props}
			if v, _ := mapGet(body, "deadletter-reason"); v != nil {
				if s, _ := v.(string); s != "" {
					o.Reason = &s
				}
			}
			if v, _ := mapGet(body, "deadletter-description"); v != nil {
				if s, _ := v.(string); s != "" {
					o.ErrorDescription = &s
				}
			}
			err = holder.DeadLetterMessage(ctx, rm, o)
		default:
			return n.badRequest("unknown disposition-status %q", status)
		}
		if err != nil {
			return n.fail(err)
		}
	}
	return n.response(200, "OK", nil)
}

// asInt64 reads any AMQP integer.
func asInt64(v any) (int64, bool) {
	switch v := v.(type) {
	case int8:
		return int64(v), true
	case int16:
		return int64(v), true
	case int32:
		return int64(v), true
	case int64:
		return v, true
	case uint8:
		return int64(v), true
	case uint16:
		return int64(v), true
	case uint32:
		return int64(v), true
	case uint64:
		if v > 1<<63-1 {
			return 0, false
		}
		return int64(v), true
	}
	return 0, false
}

// elements returns the elements of an array or list value.
func elements(v any) ([]any, bool) {
	switch v := v.(type) {
	case amqp.Array:
		return v, true
	case []any:
		return v, true
	}
	return nil, false
}

func int64List(body amqp.Map, key string) ([]int64, bool) {
	v, _ := mapGet(body, key)
	elems, ok := elements(v)
	if !ok {
		return nil, false
	}
	out := make([]int64, len(elems))
	for i, e := range elems {
		if out[i], ok = asInt64(e); !ok {
			return nil, false
		}
	}
	return out, true
}

func uuidList(body amqp.Map, key string) ([][16]byte, bool) {
	v, _ := mapGet(body, key)
	elems, ok := elements(v)
	if !ok {
		return nil, false
	}
	out := make([][16]byte, len(elems))
	for i, e := range elems {
		u, ok := e.(amqp.UUID)
		if !ok {
			return nil, false
		}
		out[i] = u
	}
	return out, true
}
