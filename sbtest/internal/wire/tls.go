package wire

import (
	"bufio"
	"crypto/tls"
	"net"
	"time"
)

// A TLS connection on the server's port carries AMQP or HTTP. The Service Bus SDKs
// without emulator support speak AMQP over TLS ("amqps", AMQP 1.0 part 5.2: TLS is
// established first, then the AMQP protocol header flows inside it), and the admin clients
// speak HTTPS, both to the host and port of the connection string's Endpoint. After the
// TLS handshake the first bytes the client sends tell them apart: an AMQP connection
// starts with the protocol header "AMQP" (plain or SASL), an HTTP one with a request line,
// whose method never starts with "AMQP".
const amqpHeaderPrefix = "AMQP"

// serveTLS completes the TLS handshake of a connection whose first byte was a TLS
// handshake record, reads what the client sends first inside it, and serves AMQP or
// the administration API accordingly. The TLS handshake and the first bytes must come
// by deadline, and count against MaxHandshakes until then; the AMQP handshake goes on
// under the same deadline.
func (s *Server) serveTLS(nc net.Conn, deadline time.Time, hs *handshake) {
	tc := tls.Server(nc, s.admin.tls)
	_ = nc.SetDeadline(deadline)
	if err := tc.Handshake(); err != nil {
		s.log.Debug("TLS handshake failed", "remote", nc.RemoteAddr().String(), "err", err)
		_ = nc.Close()
		return
	}
	s.progressed(hs, handshakeProtocol)
	br := bufio.NewReaderSize(tc, 16)
	head, err := br.Peek(len(amqpHeaderPrefix))
	if err != nil {
		_ = nc.Close()
		return
	}
	_ = nc.SetDeadline(time.Time{})
	conn := &tlsConn{Conn: tc, r: br, raw: nc}
	if string(head) == amqpHeaderPrefix {
		s.serveConn(conn, deadline, hs)
		return
	}
	s.admin.admit(conn, deadline, hs)
}

// tlsConn is a server-side TLS connection whose first bytes were read ahead into r.
// Close sends TLS's close_notify, as clients such as OpenSSL expect at the end of a
// connection; abort closes the socket at once, without waiting for a client that does
// not read.
type tlsConn struct {
	*tls.Conn
	r   *bufio.Reader
	raw net.Conn
}

func (c *tlsConn) Read(p []byte) (int, error) { return c.r.Read(p) }

func (c *tlsConn) abort() error { return c.raw.Close() }

// closeNow closes nc without a graceful TLS or WebSocket shutdown (tlsConn.abort,
// wsConn.abort), for connections torn down from outside.
func closeNow(nc net.Conn) error {
	if tc, ok := nc.(interface{ abort() error }); ok { // *tlsConn, *wsConn
		return tc.abort()
	}
	return nc.Close()
}
