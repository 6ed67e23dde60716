package wire

import (
	"bytes"
	"net"
	"time"
)

// maxRequestHead is how much of an HTTP connection's first request header the server
// reads ahead before handing the connection to the HTTP server: net/http's bound for a
// header (MaxHeaderBytes plus the 4,096 bytes of slack it allows). A longer header is
// handed over as it is, and net/http answers 431.
const maxRequestHead = maxAdminHeader + 4096

// readRequestHead reads ahead, by deadline, until c's first HTTP request header is
// complete (the empty line that ends it, RFC 9112 section 2.1), or maxRequestHead
// bytes. Until then the connection is in its handshake: bounded by MaxHandshakes and
// HandshakeTimeout and not counted against MaxConnections, so sockets that send a byte
// or two of a request cannot hold the connections AMQP clients need. It returns a
// connection that yields the bytes read ahead first, and an error when c closes or
// stalls first.
func readRequestHead(c net.Conn, deadline time.Time) (net.Conn, error) {
	_ = c.SetReadDeadline(deadline)
	var head []byte
	buf := make([]byte, 512)
	for len(head) < maxRequestHead {
		n, err := c.Read(buf[:min(len(buf), maxRequestHead-len(head))])
		from := max(len(head)-2, 0) // the end may straddle two reads
		head = append(head, buf[:n]...)
		if headComplete(head[from:]) {
			break
		}
		if err != nil && n == 0 {
			return c, err
		}
		if len(buf) < 4096 && len(head) >= len(buf) {
			buf = make([]byte, 4096)
		}
	}
	_ = c.SetReadDeadline(time.Time{})
	return &headConn{Conn: c, head: head}, nil
}

// headComplete reports whether b holds a whole request header: a line feed followed by
// an empty line (net/textproto accepts a bare LF as a line's end).
func headComplete(b []byte) bool {
	return bytes.Contains(b, []byte("\n\r\n")) || bytes.Contains(b, []byte("\n\n"))
}

// headConn is a connection whose first bytes, head, were read ahead.
type headConn struct {
	net.Conn
	head []byte
}

func (c *headConn) Read(p []byte) (int, error) {
	if len(c.head) > 0 {
		n := copy(p, c.head)
		c.head = c.head[n:]
		return n, nil
	}
	return c.Conn.Read(p)
}
