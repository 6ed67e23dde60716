package wire

import (
	"context"
	"time"

	"github.com/sbkit/sbkit/sbtest/internal/amqp"
)

// What the SDK sends and expects for sessions (azservicebus session_receiver.go and
// internal/mgmt.go): a receive link whose source carries the session filter, with the
// session id as its value (absent value: the next available session) and, for the next
// available session, a com.microsoft:timeout link property in milliseconds; the server's
// attach echoes the filter with the accepted session id and gives the session's lock
// expiry as the com.microsoft:locked-until-utc property in .NET ticks. Session operations
// go to $management with the receive link's name as associated-link-name.
const (
	sessionFilterName  amqp.Symbol = "com.microsoft:session-filter"
	propAcceptTimeout  amqp.Symbol = "com.microsoft:timeout"
	propLockedUntilUTC amqp.Symbol = "com.microsoft:locked-until-utc"
	opRenewSessionLock             = "com.microsoft:renew-session-lock"
	opGetSessionState              = "com.microsoft:get-session-state"
	opSetSessionState              = "com.microsoft:set-session-state"
	propAssociatedLink             = "associated-link-name"
	epochTicks                     = int64(621355968000000000) // 1970-01-01 in .NET ticks (100 ns)
)

// ticks renders t as .NET ticks, as the service sends session lock expiries.
func ticks(t time.Time) int64 { return epochTicks + t.UnixMilli()*10000 }

// sessionFilter reports whether a is a receiver link asking for a session, and the
// session id it asks for (nil: the next available one).
func sessionFilter(a *amqp.Attach) (*string, bool) {
	if a.Role != amqp.RoleReceiver || a.Source == nil {
		return nil, false
	}
	for _, f := range a.Source.Filter {
		if k, _ := f.Key.(amqp.Symbol); k != sessionFilterName {
			continue
		}
		var v any = f.Value
		if d, ok := v.(*amqp.Described); ok {
			v = d.Value
		}
		if id, ok := v.(string); ok {
			return &id, true
		}
		return nil, true
	}
	return nil, false
}

// setupSession accepts the session a asks for (waiting for the next available one at
// most the link's timeout property, else the model's default) on the
// receiver link attach made for it, and fills reply's filter and lock expiry. A non-nil
// result refuses the attach: amqp:not-found, amqp:not-allowed,
// com.microsoft:session-cannot-be-locked or com.microsoft:timeout, which the SDK
// reports as they are or as CodeTimeout.
func (l *receiverLink) setupSession(a *amqp.Attach, id *string, reply *amqp.Attach) *amqp.Error {
	ns := l.s.c.srv.broker
	mode := l.receiveMode(a)
	path, sub := splitSubQueue(l.addr)
	_, ok := ns.Entity(path)
	if !ok || sub != 0 {
		return protoError(condNotFound, "no queue or subscription named %q", l.addr)
	}
	ctx := l.ctx
	if id == nil {
		timeout := l.s.c.srv.acceptNext
		if v, ok := a.Properties.Get(propAcceptTimeout); ok {
			if ms, ok := asInt64(v); ok && ms > 0 {
				timeout = time.Duration(ms) * time.Millisecond
			}
		}
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	sr, err := ns.AcceptSession(ctx, path, id, mode)
	if err != nil {
		return amqpErrorFor(err)
	}
	l.mu.Lock()
	if l.closed { // the client detached while it waited: let the session go
		l.mu.Unlock()
		_ = sr.Close(context.Background())
		return protoError(condDetachForced, "link closed")
	}
	l.sr, l.rcv = sr, sr.Receiver()
	// Registered before close can see it (close unregisters), so that a link closed
	// meanwhile is not left registered.
	l.s.c.registerReceiveLink(l)
	l.mu.Unlock()
	src := *a.Source
	src.Address = l.s.c.echoAddress(src.Address)
	src.Filter = amqp.Map{{Key: sessionFilterName, Value: sessionFilterEcho(a, sr.SessionID())}}
	reply.Source = &src
	reply.Properties = amqp.Map{{Key: propLockedUntilUTC, Value: ticks(sr.LockedUntil())}}
	return nil
}

// sessionFilterEcho is the session filter of the server's attach, in the form the
// client sent its own: described with the client's descriptor (the Go SDK), or the bare
// session id when the client sent a bare value (the JavaScript SDK, which compares
// filter["com.microsoft:session-filter"] with the id it asked for: @azure/service-bus
// 7.9.5 messageSession.js createRheaLink).
func sessionFilterEcho(a *amqp.Attach, id string) any {
	v, _ := a.Source.Filter.Get(sessionFilterName)
	if d, ok := v.(*amqp.Described); ok {
		return &amqp.Described{Descriptor: d.Descriptor, Value: id}
	}
	return id
}

// registerReceiveLink makes l findable by name for $management requests that name it as
// their associated link.
func (c *srvConn) registerReceiveLink(l *receiverLink) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.rlinks == nil {
		c.rlinks = make(map[string]*receiverLink)
	}
	c.rlinks[l.name] = l
}

func (c *srvConn) unregisterReceiveLink(l *receiverLink) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.rlinks[l.name] == l {
		delete(c.rlinks, l.name)
	}
}

// sessionReceiverFor returns the session receiver of the receive link a $management
// request names as its associated link, or nil.
func (c *srvConn) sessionReceiverFor(req *amqp.Message) SessionReceiver {
	v, _ := mapGet(req.ApplicationProperties, propAssociatedLink)
	name, _ := v.(string)
	c.mu.Lock()
	defer c.mu.Unlock()
	if l := c.rlinks[name]; l != nil {
		return l.sr
	}
	return nil
}

// serveSession answers the session operations and the operations a session receiver
// makes through $management (peek and receive-by-sequence-number read its session);
// handled is false for the others.
func (n *mgmtNode) serveSession(ctx context.Context, l *requestLink, op string, req *amqp.Message, body amqp.Map) (resp *amqp.Message, handled bool) {
	sr := l.s.c.sessionReceiverFor(req)
	switch op {
	case opRenewSessionLock, opGetSessionState, opSetSessionState:
	case opPeek, opReceiveBySeq:
		if sr == nil {
			return nil, false
		}
	default:
		return nil, false
	}
	if sr == nil {
		return n.badRequest("%s needs the session receiver's link as %s", op, propAssociatedLink), true
	}
	if v, ok := mapGet(body, "session-id"); ok {
		if id, _ := v.(string); id != sr.SessionID() {
			return n.badRequest("session-id %q is not the associated link's session %q", id, sr.SessionID()), true
		}
	}
	switch op {
	case opRenewSessionLock:
		if err := sr.RenewSessionLock(ctx, nil); err != nil {
			return n.failSession(err), true
		}
		return n.response(200, "OK", amqp.Map{{Key: "expiration", Value: sr.LockedUntil().UTC()}}), true
	case opGetSessionState:
		state, err := sr.GetSessionState(ctx, nil)
		if err != nil {
			return n.failSession(err), true
		}
		var v any // absent state: a null value, which the SDK reads as nil
		if state != nil {
			v = state
		}
		return n.response(200, "OK", amqp.Map{{Key: "session-state", Value: v}}), true
	case opSetSessionState:
		var state []byte
		if v, _ := mapGet(body, "session-state"); v != nil {
			b, ok := v.([]byte)
			if !ok {
				return n.badRequest("session-state must be binary"), true
			}
			state = b
		}
		if err := sr.SetSessionState(ctx, state, nil); err != nil {
			return n.failSession(err), true
		}
		return n.response(200, "OK", nil), true
	case opPeek:
		return n.peek(ctx, body, sr.Receiver()), true
	default: // opReceiveBySeq
		return n.receiveBySequence(ctx, body, sr.Receiver()), true
	}
}

// failSession is fail for an operation on a session: a lost lock is the session's,
// com.microsoft:session-lock-lost (the Python SDK's SessionLockLostError, the .NET
// SDK's SessionLockLost reason), with the status of a lost lock.
func (n *mgmtNode) failSession(err error) *amqp.Message {
	code, cond, desc := statusFor(err)
	if cond == condLockLost {
		cond, desc = condSessionLockLost, "The session lock has expired on the MessageSession. Accept a new MessageSession."
	}
	return n.failure(code, cond, desc)
}
