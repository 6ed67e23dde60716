package wire

import (
	"container/list"
	"net"
	"time"

	"github.com/sbkit/sbkit/sbtest/internal/amqp"
)

// serverLimits are the resolved resource limits of a Server (ServerOptions).
type serverLimits struct {
	conns            int
	sessions         int
	links            int
	writeTimeout     time.Duration
	handshakes       int
	handshakeTimeout time.Duration
	adminIdle        time.Duration
}

// noTimeout stands for a timeout a negative option turned off: 146 years.
const noTimeout = time.Duration(1 << 62)

// resolveLimits applies the defaults of ServerOptions' limits: zero means the default,
// negative no limit (the protocol's maximum for sessions and links, noTimeout for a
// timeout).
func resolveLimits(o *Options) serverLimits {
	pick := func(v, def, unlimited int) int {
		switch {
		case v == 0:
			return def
		case v < 0 || v > unlimited:
			return unlimited
		}
		return v
	}
	timeout := func(d, def time.Duration) time.Duration {
		switch {
		case d == 0:
			return def
		case d < 0:
			return noTimeout
		}
		return d
	}
	return serverLimits{
		conns:            pick(o.MaxConnections, DefaultMaxConnections, 1<<62),
		sessions:         pick(o.MaxSessionsPerConnection, DefaultMaxSessions, 1<<16),
		links:            pick(o.MaxLinksPerSession, DefaultMaxLinks, 1<<16),
		writeTimeout:     timeout(o.WriteTimeout, DefaultWriteTimeout),
		handshakes:       pick(o.MaxHandshakes, DefaultMaxHandshakes, 1<<62),
		handshakeTimeout: timeout(o.HandshakeTimeout, DefaultHandshakeTimeout),
		adminIdle:        timeout(o.AdminIdleTimeout, DefaultAdminIdleTimeout),
	}
}

// channelMax and handleMax are the channel-max and handle-max the server announces
// (and enforces): the numbering room for the sessions and links it allows, and at least
// the historical 4096 channels and 1024 handles so that clients numbering sparsely keep
// working. The limits themselves are counts (MaxSessionsPerConnection,
// MaxLinksPerSession), refused one by one with an AMQP error: go-amqp (the SDK) closes
// its whole connection when it runs out of channel numbers.
func (l serverLimits) channelMax() uint16 { return uint16(max(l.sessions, 4096) - 1) }
func (l serverLimits) handleMax() uint32  { return uint32(max(l.links, 1024) - 1) }

// admitLocked reports whether one more connection may be served (MaxConnections counts
// AMQP and administration connections). Called with s.mu held.
func (s *Server) admitLocked() bool {
	return len(s.conns)+len(s.adminConns) < s.limits.conns
}

// refusal is how an AMQP connection beyond MaxConnections is refused, the way the
// service rejects connections beyond its quota ("subsequent requests for additional
// connections are rejected", Service Bus quotas): the open exchange completes, then a
// close with amqp:resource-limit-exceeded, which the SDK reports without retrying.
func (s *Server) refusal() *amqp.Error {
	s.log.Info("connection refused", "limit", s.limits.conns)
	return protoError(condResourceLimit, "sbtest: server: %d connections already open (ServerOptions.MaxConnections)", s.limits.conns)
}

// handshakes are the connections in their handshake, by how far they got
// (handshakeProgress) and, within one stage, oldest first. Guarded by Server.mu.
type handshakes struct {
	stages [handshakeStages]list.List // of *handshake
}

// handshakeProgress is how far a connection got in its handshake. At MaxHandshakes a new
// connection closes one of the least advanced, so a flood of sockets that send nothing
// (or nothing valid) cannot evict a slow client whose handshake is under way.
type handshakeProgress int

const (
	handshakeSilent   handshakeProgress = iota // accepted, nothing read yet
	handshakeStarted                           // its first bytes arrived
	handshakeProtocol                          // a valid protocol header: the TLS handshake done, or "AMQP"
	handshakeStages
)

// handshake is one connection in its handshake.
type handshake struct {
	nc    net.Conn
	stage handshakeProgress
	elem  *list.Element // nil once it left the list
}

// len returns the number of connections in their handshake.
func (h *handshakes) len() int {
	n := 0
	for i := range h.stages {
		n += h.stages[i].Len()
	}
	return n
}

// conns returns the connections in their handshake.
func (h *handshakes) conns() []net.Conn {
	var out []net.Conn
	for i := range h.stages {
		for e := h.stages[i].Front(); e != nil; e = e.Next() {
			out = append(out, e.Value.(*handshake).nc)
		}
	}
	return out
}

// evict removes and returns the connection to close to make room: the one waiting
// longest among the least advanced. A silent connection whose first bytes have arrived
// but are not read yet (its goroutine is still to run) counts as started.
func (h *handshakes) evict() net.Conn {
	silent := &h.stages[handshakeSilent]
	for e := silent.Front(); e != nil; {
		next := e.Next()
		if hs := e.Value.(*handshake); bytesWaiting(hs.nc) {
			silent.Remove(e)
			hs.stage = handshakeStarted
			hs.elem = h.stages[handshakeStarted].PushBack(hs)
		} else {
			break
		}
		e = next
	}
	for i := range h.stages {
		if e := h.stages[i].Front(); e != nil {
			hs := h.stages[i].Remove(e).(*handshake)
			hs.elem = nil
			return hs.nc
		}
	}
	return nil
}

// startHandshake records that nc starts its handshake; at MaxHandshakes, the connection
// that has waited longest among the least advanced (handshakeProgress) is closed to make
// room. It reports false when the server is closed.
func (s *Server) startHandshake(nc net.Conn) (*handshake, bool) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, false
	}
	var evict net.Conn
	if s.handshakes.len() >= s.limits.handshakes {
		evict = s.handshakes.evict()
	}
	hs := &handshake{nc: nc}
	hs.elem = s.handshakes.stages[handshakeSilent].PushBack(hs)
	s.mu.Unlock()
	if evict != nil {
		s.log.Info("connection closed in its handshake to make room (ServerOptions.MaxHandshakes)", "limit", s.limits.handshakes)
		_ = evict.Close()
	}
	return hs, true
}

// progressed records that hs's handshake reached stage; it then waits behind the
// connections that reached it earlier. Nothing changes once hs left the handshakes.
func (s *Server) progressed(hs *handshake, stage handshakeProgress) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if hs.elem == nil || stage <= hs.stage {
		return
	}
	s.handshakes.stages[hs.stage].Remove(hs.elem)
	hs.stage = stage
	hs.elem = s.handshakes.stages[stage].PushBack(hs)
}

// endHandshake records that hs's handshake ended. Safe to call twice.
func (s *Server) endHandshake(hs *handshake) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.endHandshakeLocked(hs)
}

// endHandshakeLocked is endHandshake with s.mu held.
func (s *Server) endHandshakeLocked(hs *handshake) {
	if hs.elem != nil {
		s.handshakes.stages[hs.stage].Remove(hs.elem)
		hs.elem = nil
	}
}

// handleSet is a set of link handles, one bit each: at most handle-max+1 bits a session
// (refused links the client has yet to detach, links it detached). The zero value is empty.
type handleSet struct{ words []uint64 }

func (h *handleSet) add(i uint32) {
	w := int(i / 64)
	if w >= len(h.words) {
		h.words = append(h.words, make([]uint64, w+1-len(h.words))...)
	}
	h.words[w] |= 1 << (i % 64)
}

func (h *handleSet) has(i uint32) bool {
	w := int(i / 64)
	return w < len(h.words) && h.words[w]&(1<<(i%64)) != 0
}

// del removes i and reports whether it was there.
func (h *handleSet) del(i uint32) bool {
	if !h.has(i) {
		return false
	}
	h.words[i/64] &^= 1 << (i % 64)
	return true
}
