package wire

import (
	"context"
	"log/slog"
	"strings"
	"sync"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/sbkit/sbkit/sbtest/internal/amqp"
)

// Addresses of the request/response nodes.
const (
	cbsNode        = "$cbs"
	mgmtNodeSuffix = "/$management"
	dlqSuffix      = "/$DeadLetterQueue"
	transferDLQ    = "/$Transfer/$DeadLetterQueue"
)

// link is one attached link, of one of four kinds, decided at attach from the client's
// role and address (newLink): a senderLink (the client sends messages to a queue or
// topic, send.go), a receiverLink (the client receives from a queue, subscription
// or dead-letter queue, receive.go), a requestLink (the client sends requests to
// $cbs or <entity>/$management, request.go) and a responseLink (the client
// receives their responses, response.go). What every kind shares is its linkBase;
// the kinds the client sends on share an inLink (linkin.go), those the server sends
// on an outLink (linkout.go).
type link interface {
	// base returns what every link has: its session, name, handle, address, context
	// and detach state.
	base() *linkBase
	// kind names the kind for logs: send, receive, request or response.
	kind() string
	// setup prepares what the link needs at attach (on the reader goroutine); a
	// non-nil result refuses the attach with that error. A session's receive link is
	// set up by setupSession instead.
	setup(a *amqp.Attach) *amqp.Error
	// start starts a link once its attach is answered.
	start()
	// release releases what the kind holds (receivers and their locks, management
	// receivers, the reply registration), once, when the link closes (closeLink).
	release()
	// onFlow handles a flow frame for the link.
	onFlow(f *amqp.Flow)
	// onTransfer handles a transfer frame on the link (on the reader goroutine).
	onTransfer(t *amqp.Transfer, payload []byte) error
	// entityDeleted returns a context that ends when the entity the link sends to,
	// receives from or manages ($management) is deleted, or nil for $cbs and response
	// links. It is called once the link is set up.
	entityDeleted() context.Context
}

// linkBase is what every link has. Fields set at attach are read-only afterwards; mu
// guards the rest, and the state of the link's kind that its comments say it guards.
type linkBase struct {
	s      *srvSession
	name   string
	handle uint32
	addr   string // the entity or node address
	log    *slog.Logger

	ctx    context.Context // cancelled when the link goes away
	cancel context.CancelFunc

	mu       sync.Mutex
	wake     chan struct{} // closed (and replaced) when credit or drain changes, or the link stops
	detached bool          // a detach was sent or received: the link takes no more deliveries
	closed   bool
	unwatch  func() bool // stops watching the entity's deletion (watch)
}

func (l *linkBase) base() *linkBase { return l }

func (l *linkBase) isDetached() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.detached
}

// markDetached records that the link is being detached and stops it: it takes no more
// deliveries, and its context ends what waits before the effects of frames already
// received (which still take effect, in turn). It reports whether the link already was
// detached.
func (l *linkBase) markDetached() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.markDetachedLocked()
}

func (l *linkBase) markDetachedLocked() bool {
	was := l.detached
	l.detached = true
	l.wakeLocked()
	l.cancel()
	return was
}

func (l *linkBase) wakeLocked() {
	close(l.wake)
	l.wake = make(chan struct{})
}

// newLink makes a link of the kind a asks for, unless it asks for a session (attach
// makes a receiver link for that), and returns the address it names in the server's
// spelling ("" when the attach has no terminus to name one): the client sends to $cbs
// or <entity>/$management (a request link) or to an entity (a sender link), or
// receives from $cbs or <entity>/$management (a response link) or from an entity (a
// receiver link).
func newLink(ns Broker, a *amqp.Attach) (link, string) {
	isNode := func(addr string) bool { return addr == cbsNode || strings.HasSuffix(addr, mgmtNodeSuffix) }
	if a.Role == amqp.RoleSender {
		if a.Target == nil {
			return &senderLink{}, ""
		}
		addr := resolveAddress(ns, a.Target.Address)
		if isNode(addr) {
			return &requestLink{}, addr
		}
		return &senderLink{}, addr
	}
	if a.Source == nil {
		return &receiverLink{}, ""
	}
	addr := resolveAddress(ns, a.Source.Address)
	if isNode(addr) {
		return &responseLink{}, addr
	}
	return &receiverLink{}, addr
}

// attach handles the client's attach: it creates the link, answers, and either starts it
// or refuses it (an attach without the terminus, then a detach with the error).
func (s *srvSession) attach(a *amqp.Attach) error {
	c := s.c
	if hMax := c.srv.limits.handleMax(); a.Handle > hMax {
		return protoError(condInvalidField, "handle %d above handle-max %d", a.Handle, hMax)
	}
	var (
		l       link
		addr    string
		session *receiverLink // the link of a session, accepted by setupSession
	)
	id, isSession := sessionFilter(a)
	if isSession {
		session = &receiverLink{}
		l, addr = session, resolveAddress(c.srv.broker, a.Source.Address)
	} else {
		l, addr = newLink(c.srv.broker, a)
	}
	b := l.base()
	s.mu.Lock()
	if _, inUse := s.links[a.Handle]; inUse || s.refusedLinks.has(a.Handle) {
		s.mu.Unlock()
		return protoError(condHandleInUse, "handle %d is already attached", a.Handle)
	}
	s.detached.del(a.Handle)
	b.s, b.name, b.handle, b.wake = s, a.Name, a.Handle, make(chan struct{})
	b.ctx, b.cancel = context.WithCancel(c.ctx)
	overLimit := len(s.links) >= c.srv.limits.links
	s.links[a.Handle] = l
	s.mu.Unlock()

	reply := &amqp.Attach{
		Name:           a.Name,
		Handle:         a.Handle,
		Role:           !a.Role,
		SndSettleMode:  a.SndSettleMode,
		RcvSettleMode:  a.RcvSettleMode,
		Source:         a.Source,
		Target:         a.Target,
		MaxMessageSize: uint64(wireMaxMessageSize(c.srv.broker)),
	}
	// The fields set at attach (addr, log, and what setup prepares) are set here, on the
	// reader goroutine, which also handles the client's detach, even when accepting a
	// session goes on in another goroutine.
	var refusal *amqp.Error
	switch {
	case overLimit:
		refusal = protoError(condResourceLimit,
			"sbtest: server: the session has %d links (ServerOptions.MaxLinksPerSession)", c.srv.limits.links)
	case isSession:
		b.addr = addr
	default:
		b.addr = addr
		refusal = l.setup(a)
	}
	b.log = c.log.With("link", a.Name, "kind", l.kind(), "address", b.addr)
	if isSession && !overLimit {
		// Accepting a session may wait for one: not on the reader goroutine.
		c.goWork("accept session", func() { s.finishAttach(l, a, reply, session.setupSession(a, id, reply)) })
		return nil
	}
	s.finishAttach(l, a, reply, refusal)
	return nil
}

// finishAttach answers the client's attach a with reply and starts the link, or refuses
// it with refusal (an attach without the terminus, then a detach with the error).
func (s *srvSession) finishAttach(l link, a *amqp.Attach, reply *amqp.Attach, refusal *amqp.Error) {
	c := s.c
	b := l.base()
	if b.ctx.Err() != nil {
		return // the client gave up on the link (or the connection) while it waited
	}
	if refusal != nil {
		b.log.Info("attach refused", "condition", string(refusal.Condition), "description", refusal.Description)
		if a.Role == amqp.RoleReceiver {
			reply.Source = nil
		} else {
			reply.Target = nil
		}
		b.markDetached()
		closeLink(l)
		s.mu.Lock()
		// A refused link keeps only its handle number until the client's detach (AMQP
		// 1.0 part 2.6.2, link handles: a handle is in use until the link is detached),
		// unless the client detached while it waited for a session.
		if s.links[a.Handle] == l && !s.closed {
			delete(s.links, a.Handle)
			s.refusedLinks.add(a.Handle)
			c.writeFrame(s.ch, reply, nil)
			c.writeFrame(s.ch, &amqp.Detach{Handle: a.Handle, Closed: true, Error: refusal}, nil)
		}
		s.mu.Unlock()
		return
	}
	b.log.Debug("link attached")
	s.mu.Lock()
	if !s.closed {
		c.writeFrame(s.ch, reply, nil)
	}
	s.mu.Unlock()
	if deleted := l.entityDeleted(); deleted != nil {
		watch(l, deleted)
	}
	watchToken(l)
	l.start()
}

// authorize checks, unless the link is on $cbs (where the client puts its tokens), that
// the client may use the link's address (sas.go).
func (l *linkBase) authorize() *amqp.Error {
	if l.addr == cbsNode {
		return nil
	}
	return l.s.c.authorize(l.addr)
}

// splitSubQueue splits a receive address into the entity path and its sub-queue.
func splitSubQueue(addr string) (string, azservicebus.SubQueue) {
	switch {
	case strings.HasSuffix(addr, transferDLQ):
		return strings.TrimSuffix(addr, transferDLQ), azservicebus.SubQueueTransfer
	case strings.HasSuffix(addr, dlqSuffix):
		return strings.TrimSuffix(addr, dlqSuffix), azservicebus.SubQueueDeadLetter
	}
	return addr, 0
}

// detach handles the client's detach: the link stops at once, and once every frame
// that arrived before has taken effect (the transfers stored, the settlements applied)
// it closes, releasing its locks, and, unless the server detached first, the server
// answers with its own detach.
func (s *srvSession) detach(d *amqp.Detach) error {
	s.mu.Lock()
	l := s.links[d.Handle]
	refused := false
	if l != nil {
		delete(s.links, d.Handle)
		s.detached.add(d.Handle)
	} else {
		refused = s.refusedLinks.del(d.Handle)
	}
	s.mu.Unlock()
	if refused {
		return nil // the client's answer to a refusal: the handle is free
	}
	if l == nil {
		return protoError(condUnattachedHandle, "detach of handle %d, which is not attached", d.Handle)
	}
	b := l.base()
	if d.Error != nil {
		b.log.Debug("client detached with error", "condition", string(d.Error.Condition))
	}
	already := b.markDetached()
	s.inTurn("detach", func() {
		closeLink(l)
		if !already {
			s.writeDetach(b.handle, nil)
		}
		b.log.Debug("link detached")
	})
	return nil
}

// detachWithError detaches l from the server's side: it stops at once and closes in
// turn, after what the client sent before; the client answers with its own detach,
// which removes the link from the session.
func detachWithError(l link, e *amqp.Error) {
	b := l.base()
	b.mu.Lock()
	if b.markDetachedLocked() {
		b.mu.Unlock()
		return
	}
	// Reserved under b.mu, so that a session that ends meanwhile (which stops every link
	// first) has its end's turn after this one and waits for it.
	t := b.s.order.reserve()
	b.mu.Unlock()
	b.log.Warn("detaching link", "condition", string(e.Condition), "description", e.Description)
	b.s.runInTurn(t, "detach", func() {
		closeLink(l)
		b.s.writeDetach(b.handle, e)
	})
}

// watch detaches l with amqp:not-found once its entity (life) is deleted, as the
// service does: its clients are refused, not served by a detached copy (Service Bus
// docs, "Service Bus messaging exceptions": MessagingEntityNotFound). An idle watch
// costs no goroutine.
func watch(l link, deleted context.Context) {
	b := l.base()
	stop := context.AfterFunc(deleted, func() {
		detachWithError(l, protoError(condNotFound, "sbtest: server: the messaging entity %q was deleted", b.addr))
	})
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		stop()
		return
	}
	b.unwatch = stop
}

// writeDetach sends a detach of handle (closed) with e, unless the session ended.
func (s *srvSession) writeDetach(handle uint32, e *amqp.Error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.closed {
		s.c.writeFrame(s.ch, &amqp.Detach{Handle: handle, Closed: true, Error: e}, nil)
	}
}

// closeLink stops l and releases what it holds (l.release): a receiver's locks (as a
// dropped connection does), management receivers, the reply registration. Safe to call
// twice and from any goroutine.
func closeLink(l link) {
	b := l.base()
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return
	}
	b.closed = true
	b.detached = true
	b.wakeLocked()
	unwatch := b.unwatch
	b.mu.Unlock()
	b.cancel()
	if unwatch != nil {
		unwatch()
	}
	l.release()
}

// maxWireMessage bounds the message size the server accepts when the namespace has no
// limit: 100 MiB, the service's largest message ("Service Bus quotas", Premium tier).
const maxWireMessage = 100 << 20

// wireMaxMessageSize is the largest message the server accepts for ns.
func wireMaxMessageSize(ns Broker) int { return min(ns.MaxMessageSize(), maxWireMessage) }

// writeIncomingDisposition settles a delivery the client sent, with its outcome.
func (s *srvSession) writeIncomingDisposition(id uint32, state amqp.DeliveryState) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.closed {
		s.c.writeFrame(s.ch, &amqp.Disposition{Role: amqp.RoleReceiver, First: id, Settled: true, State: state}, nil)
	}
}
