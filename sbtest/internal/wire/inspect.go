package wire

import (
	"crypto/x509"
	"fmt"
	"net"

	adminapi "github.com/sbkit/sbkit/sbtest/internal/admin"
)

// What a Server holds, for sbtest's tests of its limits and transports, which see it
// from outside the package. Each method takes the locks the server's own code takes;
// none changes anything but the two that set socket write buffers, which tests use to
// make a connection back up. Nothing of this is part of sbtest's API.

// Conns is how many AMQP connections the server serves.
func (s *Server) Conns() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.conns)
}

// AdminConns is how many HTTP (administration, data plane, WebSocket) connections it
// serves.
func (s *Server) AdminConns() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.adminConns)
}

// Handshakes is how many connections are in their handshake; HandshakesStarted how many
// of them sent their first bytes and no valid protocol header yet.
func (s *Server) Handshakes() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.handshakes.len()
}

func (s *Server) HandshakesStarted() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.handshakes.stages[handshakeStarted].Len()
}

// ConnsOpened is how many AMQP connections have begun their open exchange since the
// server started.
func (s *Server) ConnsOpened() uint64 { return s.connID.Load() }

// CertPool trusts the server's certificate.
func (s *Server) CertPool() *x509.CertPool { return s.admin.pool }

// AdminAPI is the administration API's handler.
func (s *Server) AdminAPI() *adminapi.Handler { return s.admin.api }

// AdminHTTPAddr is the plain-HTTP listener's address, or nil.
func (s *Server) AdminHTTPAddr() net.Addr {
	if s.admin.plain == nil {
		return nil
	}
	return s.admin.plain.Addr()
}

// Endpoint is HOST:PORT of the AMQP listener, with the advertised host.
func (s *Server) Endpoint() string { return s.endpoint(s.ln.Addr()) }

// connFor returns the server's connection to the client at addr (its local address),
// or nil.
func (s *Server) connFor(client net.Addr) *srvConn {
	s.mu.Lock()
	defer s.mu.Unlock()
	for c := range s.conns {
		if c.nc.RemoteAddr().String() == client.String() {
			return c
		}
	}
	return nil
}

// Queued is how many bytes of frames the server queues for the client at addr.
func (s *Server) Queued(client net.Addr) int {
	c := s.connFor(client)
	c.wmu.Lock()
	defer c.wmu.Unlock()
	return len(c.wbuf)
}

// MaxQueued is how many bytes of frames the server queues for a client before it waits
// (a writer that does not wait may append one frame more).
const MaxQueued = maxWriteBuffer

// MaxHeaderBytes bounds an HTTP request's header.
const MaxHeaderBytes = maxAdminHeader

// Links is how many links the server's session on channel ch of the connection to the
// client at addr holds.
func (s *Server) Links(client net.Addr, ch uint16) int {
	ss := s.connFor(client).session(ch)
	ss.mu.Lock()
	defer ss.mu.Unlock()
	return len(ss.links)
}

// SetConnWriteBuffer sets the socket write buffer of the server's side of the AMQP
// connection to the client at addr (a TCP one).
func (s *Server) SetConnWriteBuffer(client net.Addr, bytes int) error {
	return setWriteBuffer(s.connFor(client).nc, bytes)
}

// SetAdminWriteBuffers sets the socket write buffer of every HTTP connection served.
func (s *Server) SetAdminWriteBuffers(bytes int) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for ac := range s.adminConns {
		if err := setWriteBuffer(ac, bytes); err != nil {
			return err
		}
	}
	return nil
}

// setWriteBuffer sets the write buffer of the TCP connection under the server's
// first-byte and header readers.
func setWriteBuffer(nc net.Conn, bytes int) error {
	nc = unwrapHead(nc)
	if pc, ok := nc.(*peekedConn); ok {
		nc = pc.Conn
	}
	tc, ok := nc.(*net.TCPConn)
	if !ok {
		return fmt.Errorf("a %T, not a TCP connection", nc)
	}
	return tc.SetWriteBuffer(bytes)
}
