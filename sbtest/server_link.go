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

// handleMax and channelMax are the limits the server announces (and enforces) on link
// handles per session and on session channels per connection, which bound what one
// client can make the server hold.
const (
	handleMax  = 1023
	channelMax = 4095
)

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
	rcv     *Receiver // linkReceive
	settled bool      // deliveries are sent settled (receive-and-delete, responses)
	replyTo string    // linkResponse: the client's target address
	sendMu  sync.Mutex
	tagSeq  uint64 // guarded by sendMu

	mu            sync.Mutex
	credit        uint32
	deliveryCount uint32
	drain         bool
	wake          chan struct{} // closed (and replaced) when credit or drain changes
	iterCancel    context.CancelFunc
	detached      bool // a detach was sent or received: the link takes no more deliveries
	closed        bool
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

// markDetached records that the link is being detached and reports whether it already
// was.
func (l *srvLink) markDetached() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	was := l.detached
	l.detached = true
	l.wakeLocked()
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
	if a.Handle > handleMax {
		return protoError(condInvalidField, "handle %d above handle-max %d", a.Handle, handleMax)
	}
	s.mu.Lock()
	if _, inUse := s.links[a.Handle]; inUse {
		s.mu.Unlock()
		return protoError(condHandleInUse, "handle %d is already attached", a.Handle)
	}
	l := &srvLink{s: s, name: a.Name, handle: a.Handle, wake: make(chan struct{})}
	l.ctx, l.cancel = context.WithCancel(c.ctx)
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
		MaxMessageSize: uint64(c.srv.ns.MaxMessageSize()),
	}
	refusal := l.setup(a)
	l.log = c.log.With("link", a.Name, "kind", l.kind.String(), "address", l.addr)
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
		if !s.closed {
			c.writeFrame(s.ch, reply, nil)
			c.writeFrame(s.ch, &amqp.Detach{Handle: a.Handle, Closed: true, Error: refusal}, nil)
		}
		s.mu.Unlock()
		return nil
	}
	l.log.Debug("link attached")
	s.mu.Lock()
	if !s.closed {
		c.writeFrame(s.ch, reply, nil)
	}
	s.mu.Unlock()
	switch l.kind {
	case linkSend, linkRequest:
		l.grantCredit()
	case linkReceive:
		c.goWork("receive loop", l.receiveLoop)
	case linkResponse:
		c.registerReply(l.replyTo, l)
	}
	return nil
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
		l.addr = a.Target.Address
		switch {
		case l.addr == cbsNode:
			l.kind = linkRequest
			l.node = &mgmtNode{cbs: true}
		case strings.HasSuffix(l.addr, mgmtNodeSuffix):
			l.kind = linkRequest
			l.node = newMgmtNode(ns, strings.TrimSuffix(l.addr, mgmtNodeSuffix))
		default:
			l.kind = linkSend
			snd, err := ns.NewSender(l.addr)
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
	l.addr = a.Source.Address
	if l.addr == cbsNode || strings.HasSuffix(l.addr, mgmtNodeSuffix) {
		l.kind = linkResponse
		l.settled = true
		if a.Target == nil || a.Target.Address == "" {
			return protoError(condInvalidField, "response link without a target address")
		}
		l.replyTo = a.Target.Address
		return nil
	}
	l.kind = linkReceive
	for _, f := range a.Source.Filter {
		if k, _ := f.Key.(amqp.Symbol); k == "com.microsoft:session-filter" {
			return protoError(condNotImplemented, "sbtest does not emulate sessions")
		}
	}
	// Pre-settled deliveries (snd-settle-mode settled) are receive-and-delete; otherwise
	// the client settles every delivery (peek-lock), confirmed by the server in
	// rcv-settle-mode second.
	mode := azservicebus.ReceiveModePeekLock
	if a.SndSettleMode != nil && *a.SndSettleMode == amqp.SenderSettleSettled {
		mode = azservicebus.ReceiveModeReceiveAndDelete
	}
	l.settled = mode == azservicebus.ReceiveModeReceiveAndDelete
	rcv, err := newEntityReceiver(ns, l.addr, mode)
	if err != nil {
		return protoError(condNotFound, "%v", err)
	}
	l.rcv = rcv
	return nil
}

// newEntityReceiver makes a sbtest receiver for a receive address: "queue",
// "topic/Subscriptions/sub", either followed by "/$DeadLetterQueue" or
// "/$Transfer/$DeadLetterQueue".
func newEntityReceiver(ns *Namespace, addr string, mode azservicebus.ReceiveMode) (*Receiver, error) {
	path, sub := splitSubQueue(addr)
	e, ok := ns.Entity(path)
	if !ok {
		return nil, errNotFound()
	}
	return newReceiver(ns, e, &ReceiverOptions{ReceiveMode: mode, SubQueue: sub})
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

// detach handles the client's detach: the link closes (releasing its locks) and, unless
// the server detached first, the server answers with its own detach.
func (s *srvSession) detach(d *amqp.Detach) error {
	s.mu.Lock()
	l := s.links[d.Handle]
	delete(s.links, d.Handle)
	s.mu.Unlock()
	if l == nil {
		return protoError(condUnattachedHandle, "detach of handle %d, which is not attached", d.Handle)
	}
	if d.Error != nil {
		l.log.Debug("client detached with error", "condition", string(d.Error.Condition))
	}
	already := l.markDetached()
	l.close()
	if !already {
		s.mu.Lock()
		if !s.closed {
			s.c.writeFrame(s.ch, &amqp.Detach{Handle: d.Handle, Closed: true}, nil)
		}
		s.mu.Unlock()
	}
	l.log.Debug("link detached")
	return nil
}

// detachWithError detaches the link from the server's side; the client answers with its
// own detach, which removes the link from the session.
func (l *srvLink) detachWithError(e *amqp.Error) {
	if l.markDetached() {
		return
	}
	l.log.Warn("detaching link", "condition", string(e.Condition), "description", e.Description)
	l.close()
	s := l.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.closed {
		s.c.writeFrame(s.ch, &amqp.Detach{Handle: l.handle, Closed: true, Error: e}, nil)
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
	l.mu.Unlock()
	l.cancel()
	switch l.kind {
	case linkReceive:
		if l.rcv != nil {
			_ = l.rcv.Close(context.Background())
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
			// link-credit(snd) := delivery-count(rcv) + link-credit(rcv) - delivery-count(snd)
			var rcvCount uint32 // the server's initial delivery-count is 0
			if f.DeliveryCount != nil {
				rcvCount = *f.DeliveryCount
			}
			credit := rcvCount + *f.LinkCredit - l.deliveryCount
			if credit > 1<<31 {
				credit = 0 // the client counted fewer deliveries than were sent: none left
			}
			l.credit = credit
		}
		if f.Drain {
			l.drain = true
			if l.iterCancel != nil {
				l.iterCancel()
			}
		}
		l.wakeLocked()
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
		c.goWork("store", func() {
			defer l.answered()
			l.store(d)
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
	return l.s.c.srv.ns.MaxMessageSize() + 64*1024
}

// writeIncomingDisposition settles a delivery the client sent, with its outcome.
func (s *srvSession) writeIncomingDisposition(id uint32, state amqp.DeliveryState) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.closed {
		s.c.writeFrame(s.ch, &amqp.Disposition{Role: amqp.RoleReceiver, First: id, Settled: true, State: state}, nil)
	}
}
