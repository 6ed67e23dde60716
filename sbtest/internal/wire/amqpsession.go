package wire

import (
	"cmp"
	"context"
	"slices"
	"sync"

	"github.com/sbkit/sbkit/sbtest/internal/amqp"
)

// sessionWindow is the incoming and outgoing window the server announces for every
// session; it sends a flow to reopen its incoming window when half of it is used.
const sessionWindow = 5000

// srvSession is one AMQP session of a connection. The server answers on the channel the
// client chose. Its state is guarded by mu: the reader goroutine handles the client's
// frames, other goroutines send transfers and dispositions.
type srvSession struct {
	c       *srvConn
	ch      uint16
	refused bool // beyond MaxSessionsPerConnection: ended at once, set before use

	order arrivalOrder // the effects of the client's frames, in arrival order (order.go)

	mu      sync.Mutex
	closing bool            // an end arrived or the connection went down: the links stopped
	closed  bool            // the session ended: nothing more is written on its channel
	links   map[uint32]link // by the client's handle, which the server also uses
	// refusedLinks holds the handles of refused links the client has yet to detach.
	refusedLinks handleSet
	// detached holds the handles the client detached and has not attached again: a flow
	// on one of them is ignored, as go-amqp's receiver may send one after its detach.
	detached handleSet

	// incoming transfers (client to server)
	nextIncomingID uint32
	unflowed       uint32 // transfers received since the last session flow we sent

	// outgoing transfers (server to client)
	nextOutgoingID       uint32
	remoteIncomingWindow uint32
	windowOpen           chan struct{} // closed (and replaced) when the remote window grows
	nextDeliveryID       uint32
	unsettled            map[uint32]outDelivery // our unsettled deliveries by delivery-id
}

// outDelivery is a delivery the server sent unsettled (peek-lock) and the client has yet
// to settle.
type outDelivery struct {
	link  *receiverLink
	token [16]byte
}

func newSrvSession(c *srvConn, ch uint16, b *amqp.Begin) *srvSession {
	return &srvSession{
		c:                    c,
		ch:                   ch,
		links:                make(map[uint32]link),
		nextIncomingID:       b.NextOutgoingID,
		remoteIncomingWindow: b.IncomingWindow,
		windowOpen:           make(chan struct{}),
		unsettled:            make(map[uint32]outDelivery),
	}
}

// handle processes one frame of this session on the reader goroutine.
func (s *srvSession) handle(fr amqp.Frame) error {
	switch body := fr.Body.(type) {
	case *amqp.Attach:
		return s.attach(body)
	case *amqp.Detach:
		return s.detach(body)
	case *amqp.Flow:
		return s.flow(body)
	case *amqp.Transfer:
		return s.transfer(body, fr.Payload)
	case *amqp.Disposition:
		return s.disposition(body)
	}
	return protoError(condNotAllowed, "unexpected frame %T", fr.Body)
}

// close ends the session (the client's end, or the connection going down): its links
// stop at once, and once every frame that arrived before has taken effect they are
// released, then end (if not nil) is written and nothing more is. It returns a channel
// closed once that is done.
func (s *srvSession) close(end *amqp.End) <-chan struct{} {
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		return s.inTurn("session end", func() {})
	}
	s.closing = true
	links := make([]link, 0, len(s.links))
	for _, l := range s.links {
		links = append(links, l)
	}
	s.links = map[uint32]link{}
	s.mu.Unlock()
	for _, l := range links {
		l.base().markDetached()
	}
	return s.inTurn("session end", func() {
		for _, l := range links {
			closeLink(l)
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		if end != nil {
			s.c.writeFrame(s.ch, end, nil)
		}
		s.closed = true
		s.unsettled = map[uint32]outDelivery{}
		close(s.windowOpen)
		s.windowOpen = make(chan struct{})
	})
}

// sessionFlowLocked fills the session fields of a flow frame. Called with s.mu held.
func (s *srvSession) sessionFlowLocked(f *amqp.Flow) {
	f.NextIncomingID = amqp.Ptr(s.nextIncomingID)
	f.IncomingWindow = sessionWindow
	f.NextOutgoingID = s.nextOutgoingID
	f.OutgoingWindow = sessionWindow
	s.unflowed = 0
}

// writeFlow sends a flow frame with the session's current state (and the link's, when f
// carries a handle).
func (s *srvSession) writeFlow(f *amqp.Flow) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	s.sessionFlowLocked(f)
	s.c.writeFrame(s.ch, f, nil)
}

// flow handles a flow frame: the session's window, and the link's credit when it names a
// link.
func (s *srvSession) flow(f *amqp.Flow) error {
	s.mu.Lock()
	var next uint32 // initial-outgoing-id of the server is 0
	if f.NextIncomingID != nil {
		next = *f.NextIncomingID
	}
	s.remoteIncomingWindow = next + f.IncomingWindow - s.nextOutgoingID
	if s.remoteIncomingWindow > 0 {
		close(s.windowOpen)
		s.windowOpen = make(chan struct{})
	}
	var l link
	if f.Handle != nil {
		l = s.links[*f.Handle]
		if l == nil {
			ignore := s.refusedLinks.has(*f.Handle) || s.detached.has(*f.Handle)
			s.mu.Unlock()
			if ignore {
				return nil // sent before the client saw the refusal, or after its own detach
			}
			return protoError(condUnattachedHandle, "flow for handle %d, which is not attached", *f.Handle)
		}
	}
	s.mu.Unlock()
	if l != nil {
		if !l.base().isDetached() { // else it crossed the server's detach
			l.onFlow(f)
		}
		return nil
	}
	if f.Echo {
		s.writeFlow(&amqp.Flow{})
	}
	return nil
}

// transfer handles one transfer frame from the client: session accounting, then the
// link assembles the delivery.
func (s *srvSession) transfer(t *amqp.Transfer, payload []byte) error {
	s.mu.Lock()
	s.nextIncomingID++
	s.unflowed++
	l := s.links[t.Handle]
	refused := l == nil && s.refusedLinks.has(t.Handle)
	if s.unflowed >= sessionWindow/2 {
		f := &amqp.Flow{}
		s.sessionFlowLocked(f)
		s.c.writeFrame(s.ch, f, nil)
	}
	s.mu.Unlock()
	if refused {
		return nil // sent before the client saw the refusal
	}
	if l == nil {
		return protoError(condUnattachedHandle, "transfer on handle %d, which is not attached", t.Handle)
	}
	return l.onTransfer(t, payload)
}

// lockWithWindow waits until the client's incoming window has room for a transfer frame
// and returns with s.mu held; it returns false (without the lock) when ctx ends or the
// session closes.
func (s *srvSession) lockWithWindow(ctx context.Context) bool {
	for {
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			return false
		}
		if s.remoteIncomingWindow > 0 {
			return true
		}
		ch := s.windowOpen
		s.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return false
		}
	}
}

// sendDelivery sends one message to the client on link l as one or more transfer frames.
// An unsettled delivery is remembered as od (its receiver link and lock token) until the
// client settles it. It reports false when the link or the session went away first. The
// caller serializes the deliveries of one link.
func (s *srvSession) sendDelivery(ctx context.Context, l *linkBase, tag []byte, payload []byte, settled bool, od outDelivery) bool {
	room := int(s.c.peerMaxFrame) - transferOverhead
	first := true
	var deliveryID uint32
	for first || len(payload) > 0 {
		if !s.c.waitWritable(ctx) || !s.lockWithWindow(ctx) {
			return false
		}
		if l.isDetached() {
			// No frame may follow a detach; the client drops a partial delivery.
			if !first {
				delete(s.unsettled, deliveryID)
			}
			s.mu.Unlock()
			return false
		}
		chunk := payload
		if len(chunk) > room {
			chunk = chunk[:room]
		}
		payload = payload[len(chunk):]
		t := &amqp.Transfer{Handle: l.handle, More: len(payload) > 0}
		if first {
			deliveryID = s.nextDeliveryID
			s.nextDeliveryID++
			t.DeliveryID = amqp.Ptr(deliveryID)
			t.DeliveryTag = tag
			t.MessageFormat = amqp.Ptr(uint32(0))
			t.Settled = settled
			if !settled {
				s.unsettled[deliveryID] = od
			}
		}
		ok := s.c.writeFrame(s.ch, t, chunk)
		s.nextOutgoingID++
		s.remoteIncomingWindow--
		s.mu.Unlock()
		if !ok {
			return false
		}
		first = false
	}
	return true
}

// transferOverhead is room kept in every outgoing frame for the frame header and the
// transfer performative (at most about 60 bytes with a 16-byte delivery tag).
const transferOverhead = 128

// disposition handles the client's disposition frames. Only the receiver role matters:
// the client settles deliveries the server sent. The deliveries it settles are taken at
// once, in arrival order, and the ids of its range not held are rejected at once; the
// settlements take effect in the frame's turn, after one round trip of the latency
// model (a disposition is one request, whatever its range), so that a settlement takes
// effect before a later detach releases the link's locks.
func (s *srvSession) disposition(d *amqp.Disposition) error {
	if d.Role != amqp.RoleReceiver {
		return nil // the client confirms our settlement of its transfers: nothing to do
	}
	if _, ok := d.State.(*amqp.Received); ok && !d.Settled {
		return nil // progress of a partial delivery, not an outcome
	}
	last := d.First
	if d.Last != nil {
		last = *d.Last
	}
	if last < d.First {
		return protoError(condInvalidField, "disposition range %d..%d", d.First, last)
	}
	type item struct {
		id uint32
		od outDelivery
	}
	var items []item
	s.mu.Lock()
	if uint64(last-d.First) < uint64(len(s.unsettled)) {
		for id := d.First; ; id++ {
			if od, ok := s.unsettled[id]; ok {
				items = append(items, item{id, od})
				delete(s.unsettled, id)
			}
			if id == last {
				break
			}
		}
	} else {
		for id, od := range s.unsettled {
			if id >= d.First && id <= last {
				items = append(items, item{id, od})
				delete(s.unsettled, id)
			}
		}
		slices.SortFunc(items, func(a, b item) int { return cmp.Compare(a.id, b.id) })
	}
	if !d.Settled && !s.closed {
		// The ids of the range not (or no longer) held: settled before, or their link
		// went away. Each run of them gets one rejection, so a range never costs more
		// frames than the deliveries it settles plus one; written on the reader, which
		// reads nothing more while the client leaves them unread.
		next := uint64(d.First)
		for _, it := range append(items, item{id: last + 1}) {
			end := uint64(it.id)
			if it.od.link == nil { // the sentinel after the range
				end = uint64(last) + 1
			}
			if end > next {
				s.c.writeFrame(s.ch, &amqp.Disposition{Role: amqp.RoleSender, First: uint32(next), Last: amqp.Ptr(uint32(end - 1)), Settled: true, State: &amqp.Rejected{
					Error: &amqp.Error{Condition: condLockLost, Description: "the delivery is not held: the lock was lost or the message was settled"},
				}}, nil)
			}
			next = end + 1
		}
	}
	s.mu.Unlock()
	if len(items) == 0 {
		return nil
	}
	c := s.c
	t := s.order.reserve()
	c.goWork("settlement", func() {
		defer t.end()
		first := items[0].od.link
		first.rcv.SettleWait(first.ctx)
		t.wait()
		for _, it := range items {
			l := it.od.link
			state := l.settle(it.od.token, d.State)
			if !d.Settled && c.waitWritable(l.ctx) {
				s.mu.Lock()
				if !s.closed {
					c.writeFrame(s.ch, &amqp.Disposition{Role: amqp.RoleSender, First: it.id, Settled: true, State: state}, nil)
				}
				s.mu.Unlock()
			}
		}
	})
	return nil
}

// responseLinkFor returns an attached response link of this session on the node addr
// ($cbs or an entity's $management), or nil.
func (s *srvSession) responseLinkFor(addr string) *responseLink {
	s.mu.Lock()
	var found []*responseLink
	for _, l := range s.links {
		if r, ok := l.(*responseLink); ok && r.addr == addr {
			found = append(found, r)
		}
	}
	s.mu.Unlock()
	for _, l := range found {
		if !l.isDetached() {
			return l
		}
	}
	return nil
}

// forgetLink drops the unsettled deliveries of a link that went away.
func (s *srvSession) forgetLink(l *receiverLink) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for id, od := range s.unsettled {
		if od.link == l {
			delete(s.unsettled, id)
		}
	}
}
