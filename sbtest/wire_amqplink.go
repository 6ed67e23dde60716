package sbtest

import (
	"context"
	"log/slog"
	"strings"
	"sync"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/sbkit/sbkit/sbtest/internal/amqp"
)

// linkKind is what a link does, decided at attach from the client's role and address.
type linkKind int

const (
	linkSend     linkKind = iota // the client sends messages to a queue or topic
	linkReceive                  // the client receives from a queue, subscription or dead-letter queue
	linkRequest                  // the client sends requests to $cbs or <entity>/$management
	linkResponse                 // the client receives the responses of $cbs or <entity>/$management
)

// String names the kind for logs.
func (k linkKind) String() string {
	return [...]string{"send", "receive", "request", "response"}[k]
}

// Addresses of the request/response nodes.
const (
	cbsNode        = "$cbs"
	mgmtNodeSuffix = "/$management"
	dlqSuffix      = "/$DeadLetterQueue"
	transferDLQ    = "/$Transfer/$DeadLetterQueue"
)

// creditWindow is the link credit the server grants to a client's sending link; it tops
// the credit up when half of it is used, counting the deliveries still being handled.
const creditWindow = 1000

// srvLink is one attached link. Fields set at attach are read-only afterwards.
type srvLink struct {
	s      *srvSession
	name   string
	handle uint32
	kind   linkKind
	addr   string // the entity or node address
	log    *slog.Logger

	ctx    context.Context // cancelled when the link goes away
	cancel context.CancelFunc

	// linkSend and linkRequest. cur belongs to the reader goroutine; the credit state is
	// guarded by mu, and flowMu keeps the flows that grant credit in order.
	sender   *Sender   // linkSend
	node     *mgmtNode // linkRequest
	cur      *inDelivery
	flowMu   sync.Mutex
	received uint32 // deliveries received: the link's delivery-count as receiver
	inCredit uint32 // credit the client has left
	inFlight uint32 // deliveries received and not yet answered

	// linkReceive and linkResponse
	rcv     *Receiver        // linkReceive
	sr      *SessionReceiver // linkReceive of a session; rcv is its receiver
	settled bool             // deliveries are sent settled (receive-and-delete, responses)
	replyTo string           // linkResponse: the client's target address
	sendMu  sync.Mutex
	tagSeq  uint64 // guarded by sendMu

	mu            sync.Mutex
	credit        uint32
	deliveryCount uint32
	drain         bool
	wake          chan struct{} // closed (and replaced) when credit or drain changes
	iterCancel    context.CancelFunc
	ready         bool // linkReceive: attached and set up; credit may start the receive loop
	looping       bool // linkReceive: the receive loop runs (only while there is credit or a drain)
	detached      bool // a detach was sent or received: the link takes no more deliveries
	closed        bool
	unwatch       func() bool // stops watching the entity's deletion (watch)
}

// inDelivery is a message being received from the client, possibly over several frames.
type inDelivery struct {
	id       uint32
	format   uint32
	settled  bool
	buf      []byte
	oversize bool
}

func (l *srvLink) isDetached() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.detached
}

// markDetached records that the link is being detached and stops it: it takes no more
// deliveries, and its context ends what waits before the effects of frames already
// received (which still take effect, in turn). It reports whether the link already was
// detached.
func (l *srvLink) markDetached() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.markDetachedLocked()
}

func (l *srvLink) markDetachedLocked() bool {
	was := l.detached
	l.detached = true
	l.wakeLocked()
	l.cancel()
	return was
}

func (l *srvLink) wakeLocked() {
	close(l.wake)
	l.wake = make(chan struct{})
}

// attach handles the client's attach: it creates the link, answers, and either starts it
// or refuses it (an attach without the terminus, then a detach with the error).
func (s *srvSession) attach(a *amqp.Attach) error {
	c := s.c
	if hMax := c.srv.limits.handleMax(); a.Handle > hMax {
		return protoError(condInvalidField, "handle %d above handle-max %d", a.Handle, hMax)
	}
	s.mu.Lock()
	if _, inUse := s.links[a.Handle]; inUse || s.refusedLinks.has(a.Handle) {
		s.mu.Unlock()
		return protoError(condHandleInUse, "handle %d is already attached", a.Handle)
	}
	s.detached.del(a.Handle)
	l := &srvLink{s: s, name: a.Name, handle: a.Handle, wake: make(chan struct{})}
	l.ctx, l.cancel = context.WithCancel(c.ctx)
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
		MaxMessageSize: uint64(wireMaxMessageSize(c.srv.ns)),
	}
	// The fields set at attach (kind, addr, log) are set here, on the reader goroutine,
	// which also handles the client's detach, even when accepting a session goes on in
	// another goroutine.
	var refusal *amqp.Error
	id, isSession := sessionFilter(a)
	switch {
	case overLimit:
		refusal = protoError(condResourceLimit,
			"sbtest: server: the session has %d links (ServerOptions.MaxLinksPerSession)", c.srv.limits.links)
	case isSession:
		l.kind, l.addr = linkReceive, resolveAddress(c.srv.ns, a.Source.Address)
	default:
		refusal = l.setup(a)
	}
	l.log = c.log.With("link", a.Name, "kind", l.kind.String(), "address", l.addr)
	if isSession && !overLimit {
		// Accepting a session may wait for one: not on the reader goroutine.
		c.goWork("accept session", func() { s.finishAttach(l, a, reply, l.setupSession(a, id, reply)) })
		return nil
	}
	s.finishAttach(l, a, reply, refusal)
	return nil
}

// finishAttach answers the client's attach a with reply and starts the link, or refuses
// it with refusal (an attach without the terminus, then a detach with the error).
func (s *srvSession) finishAttach(l *srvLink, a *amqp.Attach, reply *amqp.Attach, refusal *amqp.Error) {
	c := s.c
	if l.ctx.Err() != nil {
		return // the client gave up on the link (or the connection) while it waited
	}
	if refusal != nil {
		l.log.Info("attach refused", "condition", string(refusal.Condition), "description", refusal.Description)
		if a.Role == amqp.RoleReceiver {
			reply.Source = nil
		} else {
			reply.Target = nil
		}
		l.markDetached()
		l.close()
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
	l.log.Debug("link attached")
	s.mu.Lock()
	if !s.closed {
		c.writeFrame(s.ch, reply, nil)
	}
	s.mu.Unlock()
	if deleted := l.entityDeleted(); deleted != nil {
		l.watch(deleted)
	}
	l.watchToken()
	switch l.kind {
	case linkSend, linkRequest:
		l.grantCredit()
	case linkReceive:
		l.mu.Lock()
		l.ready = true
		l.startLoopLocked() // credit that came with or before the attach's answer
		l.mu.Unlock()
	case linkResponse:
		c.registerReply(l.replyTo, l)
	}
}

// setup decides the link's kind from the client's role and address and prepares what it
// needs. A non-nil result refuses the attach with that error.
func (l *srvLink) setup(a *amqp.Attach) *amqp.Error {
	ns := l.s.c.srv.ns
	if a.Role == amqp.RoleSender {
		// The client sends: to an entity, or requests to $cbs / $management.
		if a.Target == nil {
			return protoError(condInvalidField, "attach without a target")
		}
		l.addr = resolveAddress(ns, a.Target.Address)
		if l.addr != cbsNode {
			if err := l.s.c.authorize(l.addr); err != nil {
				return err
			}
		}
		switch {
		case l.addr == cbsNode:
			l.kind = linkRequest
			l.node = &mgmtNode{cbs: true, ns: ns}
		case strings.HasSuffix(l.addr, mgmtNodeSuffix):
			l.kind = linkRequest
			l.node = newMgmtNode(ns, strings.TrimSuffix(l.addr, mgmtNodeSuffix))
		default:
			l.kind = linkSend
			snd, err := ns.NewSender(l.addr, nil)
			if err != nil {
				return protoError(condNotFound, "no queue or topic named %q", l.addr)
			}
			l.sender = snd
		}
		return nil
	}
	// The client receives: from an entity, or responses from $cbs / $management.
	if a.Source == nil {
		return protoError(condInvalidField, "attach without a source")
	}
	l.addr = resolveAddress(ns, a.Source.Address)
	if l.addr != cbsNode {
		if err := l.s.c.authorize(l.addr); err != nil {
			return err
		}
	}
	if l.addr == cbsNode || strings.HasSuffix(l.addr, mgmtNodeSuffix) {
		l.kind = linkResponse
		l.settled = true
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
	l.kind = linkReceive
	mode := l.receiveMode(a)
	rcv, err := newEntityReceiver(ns, l.addr, mode)
	if err != nil {
		return protoError(condNotFound, "%v", err)
	}
	if path, sub := splitSubQueue(l.addr); sub == 0 {
		if e, _ := ns.Entity(path); e.Options().RequiresSession {
			_ = rcv.Close(context.Background())
			return amqpErrorFor(errNonSessionReceiver())
		}
	}
	l.rcv = rcv
	l.s.c.registerReceiveLink(l)
	return nil
}

// receiveMode reads the receive mode of a receiving link: pre-settled deliveries
// (snd-settle-mode settled) are receive-and-delete; otherwise the client settles every
// delivery (peek-lock), confirmed by the server in rcv-settle-mode second.
func (l *srvLink) receiveMode(a *amqp.Attach) azservicebus.ReceiveMode {
	mode := azservicebus.ReceiveModePeekLock
	if a.SndSettleMode != nil && *a.SndSettleMode == amqp.SenderSettleSettled {
		mode = azservicebus.ReceiveModeReceiveAndDelete
	}
	l.settled = mode == azservicebus.ReceiveModeReceiveAndDelete
	return mode
}

// newEntityReceiver makes a sbtest receiver for a receive address: "queue",
// "topic/Subscriptions/sub", either followed by "/$DeadLetterQueue" or
// "/$Transfer/$DeadLetterQueue".
func newEntityReceiver(ns *Namespace, addr string, mode azservicebus.ReceiveMode) (*Receiver, error) {
	path, sub := splitSubQueue(addr)
	return ns.receiverAt(path, &ReceiverOptions{ReceiveMode: mode, SubQueue: sub})
}

// entityDeleted returns a context that ends when the entity the link sends to, receives
// from or manages ($management) is deleted, or nil for $cbs and response links.
func (l *srvLink) entityDeleted() context.Context {
	switch {
	case l.sender != nil:
		return l.sender.deleted()
	case l.rcv != nil:
		return l.rcv.deleted()
	case l.node != nil && !l.node.cbs:
		path, _ := splitSubQueue(l.node.path)
		return l.s.c.srv.ns.deleted(path)
	}
	return nil
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
	if d.Error != nil {
		l.log.Debug("client detached with error", "condition", string(d.Error.Condition))
	}
	already := l.markDetached()
	s.inTurn("detach", func() {
		l.close()
		if !already {
			s.writeDetach(l.handle, nil)
		}
		l.log.Debug("link detached")
	})
	return nil
}

// detachWithError detaches the link from the server's side: it stops at once and
// closes in turn, after what the client sent before; the client answers with its own
// detach, which removes the link from the session.
func (l *srvLink) detachWithError(e *amqp.Error) {
	l.mu.Lock()
	if l.markDetachedLocked() {
		l.mu.Unlock()
		return
	}
	// Reserved under l.mu, so that a session that ends meanwhile (which stops every link
	// first) has its end's turn after this one and waits for it.
	t := l.s.order.reserve()
	l.mu.Unlock()
	l.log.Warn("detaching link", "condition", string(e.Condition), "description", e.Description)
	l.s.runInTurn(t, "detach", func() {
		l.close()
		l.s.writeDetach(l.handle, e)
	})
}

// watch detaches the link with amqp:not-found once its entity (life) is deleted, as the
// service does: its clients are refused, not served by a detached copy (Service Bus
// docs, "Service Bus messaging exceptions": MessagingEntityNotFound). An idle watch
// costs no goroutine.
func (l *srvLink) watch(deleted context.Context) {
	stop := context.AfterFunc(deleted, func() {
		l.detachWithError(protoError(condNotFound, "sbtest: server: the messaging entity %q was deleted", l.addr))
	})
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		stop()
		return
	}
	l.unwatch = stop
}

// writeDetach sends a detach of handle (closed) with e, unless the session ended.
func (s *srvSession) writeDetach(handle uint32, e *amqp.Error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.closed {
		s.c.writeFrame(s.ch, &amqp.Detach{Handle: handle, Closed: true, Error: e}, nil)
	}
}

// close stops the link and releases what it holds: a receiver's locks (as a dropped
// connection does), management receivers, the reply registration. Safe to call twice
// and from any goroutine.
func (l *srvLink) close() {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return
	}
	l.closed = true
	l.detached = true
	l.wakeLocked()
	unwatch := l.unwatch
	l.mu.Unlock()
	l.cancel()
	if unwatch != nil {
		unwatch()
	}
	switch l.kind {
	case linkReceive:
		if l.rcv != nil {
			_ = l.rcv.Close(context.Background())
			l.s.c.unregisterReceiveLink(l)
		}
		l.s.forgetLink(l)
	case linkRequest:
		if l.node != nil {
			l.node.close()
		}
	case linkResponse:
		if l.replyTo != "" {
			l.s.c.unregisterReply(l.replyTo, l)
		}
	}
}

// onFlow handles a flow frame for this link: new credit or a drain request for the
// links the server sends on, an echo request for any.
func (l *srvLink) onFlow(f *amqp.Flow) {
	switch l.kind {
	case linkReceive, linkResponse:
		l.mu.Lock()
		if f.LinkCredit != nil {
			var rcvCount uint32 // the server's initial delivery-count is 0
			if f.DeliveryCount != nil {
				rcvCount = *f.DeliveryCount
			}
			l.credit = linkCredit(rcvCount, *f.LinkCredit, l.deliveryCount)
		}
		if f.Drain {
			l.drain = true
			if l.iterCancel != nil {
				l.iterCancel()
			}
		}
		l.wakeLocked()
		l.startLoopLocked()
		l.mu.Unlock()
		if f.Echo {
			l.writeSenderFlow(false)
		}
	default:
		if f.Echo {
			l.flowMu.Lock()
			l.mu.Lock()
			fl := &amqp.Flow{Handle: amqp.Ptr(l.handle), DeliveryCount: amqp.Ptr(l.received), LinkCredit: amqp.Ptr(l.inCredit)}
			l.mu.Unlock()
			l.s.writeFlow(fl)
			l.flowMu.Unlock()
		}
	}
}

// startLoopLocked starts the receive loop of a receiving link that is set up and has
// credit or a drain pending, unless it runs. A link runs a goroutine only while it has
// something to deliver: idle links cost memory, not goroutines.
// Called with l.mu held.
func (l *srvLink) startLoopLocked() {
	if l.kind == linkReceive && l.ready && !l.looping && !l.detached && (l.credit > 0 || l.drain) {
		l.looping = true
		l.s.c.goWork("receive loop", l.receiveLoop)
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

// grantCredit tops up the credit of a link the client sends on once half of it is used:
// the client may have creditWindow deliveries unanswered (received or in flight), so a
// slow entity (latency, a hanging fault) pushes back on the client instead of piling up
// goroutines.
func (l *srvLink) grantCredit() {
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
func (l *srvLink) answered() {
	l.mu.Lock()
	l.inFlight--
	l.mu.Unlock()
	l.grantCredit()
}

// writeSenderFlow sends the flow state of a link the server sends on.
func (l *srvLink) writeSenderFlow(drain bool) {
	l.mu.Lock()
	f := &amqp.Flow{Handle: amqp.Ptr(l.handle), DeliveryCount: amqp.Ptr(l.deliveryCount), LinkCredit: amqp.Ptr(l.credit), Drain: drain}
	l.mu.Unlock()
	l.s.writeFlow(f)
}

// completeDrain ends a drain request: the unused credit is spent (delivery-count
// advances by it) and the client is told with a flow whose drain flag is set.
func (l *srvLink) completeDrain() {
	l.mu.Lock()
	l.deliveryCount += l.credit
	l.credit = 0
	l.drain = false
	l.mu.Unlock()
	l.writeSenderFlow(true)
}

// takeCredit consumes one credit for a delivery; false when there is none or the link is
// detached.
func (l *srvLink) takeCredit() bool {
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
func (l *srvLink) waitCredit() (credit uint32, drain bool, ok bool) {
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

// nextCredit returns the link's credit and whether a drain is pending, or false when
// there is neither (or the link went away): then the receive loop ends, and the next
// flow that grants credit starts a new one.
func (l *srvLink) nextCredit() (credit uint32, drain bool, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.detached || l.ctx.Err() != nil || (l.credit == 0 && !l.drain) {
		l.looping = false
		return 0, false, false
	}
	return l.credit, l.drain, true
}

// onTransfer assembles the client's deliveries on a sending link and hands each complete
// one to a goroutine. It runs on the reader goroutine.
func (l *srvLink) onTransfer(t *amqp.Transfer, payload []byte) error {
	if l.kind != linkSend && l.kind != linkRequest {
		return protoError(condNotAllowed, "transfer on link %q, where the server is the sender", l.name)
	}
	if l.cur == nil {
		if t.DeliveryID == nil {
			return protoError(condInvalidField, "first transfer of a delivery without delivery-id")
		}
		d := &inDelivery{id: *t.DeliveryID}
		if t.MessageFormat != nil {
			d.format = *t.MessageFormat
		}
		l.mu.Lock()
		if l.inCredit == 0 {
			l.mu.Unlock()
			return protoError(condTransferLimit, "transfer on link %q without credit", l.name)
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
		return nil
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
		return nil
	}
	l.cur = nil
	if l.isDetached() {
		l.answered()
		return nil // frames that crossed the server's detach
	}
	c := l.s.c
	if l.kind == linkSend {
		t := l.s.order.reserve()
		c.goWork("store", func() {
			defer l.answered()
			l.store(d, t)
		})
		return nil
	}
	if !d.settled {
		l.s.writeIncomingDisposition(d.id, &amqp.Accepted{})
	}
	c.goWork("management request", func() {
		defer l.answered()
		l.request(d)
	})
	return nil
}

// maxDeliveryBytes bounds the bytes of one incoming delivery: the message size limit
// plus room for the AMQP encoding and a batch's framing.
func (l *srvLink) maxDeliveryBytes() int {
	return wireMaxMessageSize(l.s.c.srv.ns) + 64*1024
}

// maxWireMessage bounds the message size the server accepts when the namespace has no
// limit: 100 MiB, the service's largest message ("Service Bus quotas", Premium tier).
const maxWireMessage = 100 << 20

// wireMaxMessageSize is the largest message the server accepts for ns.
func wireMaxMessageSize(ns *Namespace) int { return min(ns.MaxMessageSize(), maxWireMessage) }

// writeIncomingDisposition settles a delivery the client sent, with its outcome.
func (s *srvSession) writeIncomingDisposition(id uint32, state amqp.DeliveryState) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.closed {
		s.c.writeFrame(s.ch, &amqp.Disposition{Role: amqp.RoleReceiver, First: id, Settled: true, State: state}, nil)
	}
}
