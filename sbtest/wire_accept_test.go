package sbtest

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"os"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
)

// flakyListener fails its first fails Accepts with EMFILE, as a process out of file
// descriptors does, then accepts.
type flakyListener struct {
	net.Listener
	fails atomic.Int32
}

func (l *flakyListener) Accept() (net.Conn, error) {
	if l.fails.Add(-1) >= 0 {
		return nil, &net.OpError{Op: "accept", Net: "tcp", Err: os.NewSyscallError("accept", syscall.EMFILE)}
	}
	return l.Listener.Accept()
}

// TestServerAcceptErrorsBackOff: a temporary Accept error (EMFILE) does not stop the
// server: it waits and accepts again, as net/http's Server.Serve does.
func TestServerAcceptErrorsBackOff(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	fl := &flakyListener{Listener: ln}
	fl.fails.Store(5)
	srv, err := newServer(&ServerOptions{Queues: map[string]*EntityOptions{"q": nil}}, fl)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close(context.Background()) })
	client, err := azservicebus.NewClientFromConnectionString(srv.ConnectionString(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Close(context.Background()) })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	snd, err := client.NewSender("q", nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := snd.SendMessage(ctx, &azservicebus.Message{Body: []byte("m")}, nil); err != nil {
		t.Fatalf("send after %d failed accepts: %v", 5, err)
	}
}

// closedByServer reports whether the server closed nc within d: a read returns EOF (or a
// reset) rather than timing out.
func closedByServer(nc net.Conn, d time.Duration) bool {
	_ = nc.SetReadDeadline(time.Now().Add(d))
	var b [64]byte
	for {
		_, err := nc.Read(b[:])
		if err == nil {
			continue // the server's answer to a partial handshake
		}
		var ne net.Error
		return !(errors.As(err, &ne) && ne.Timeout())
	}
}

// dialStalled opens a connection that sends first (the start of an AMQP header, or
// nothing) and then stays silent.
func dialStalled(t *testing.T, srv *Server, first string) net.Conn {
	t.Helper()
	nc, err := net.Dial("tcp", srv.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = nc.Close() })
	if first != "" {
		if _, err := nc.Write([]byte(first)); err != nil {
			t.Fatal(err)
		}
	}
	return nc
}

// TestServerHandshakesBounded: connections that never finish their handshake neither
// count against MaxConnections nor lock healthy clients out: at most MaxHandshakes wait
// at once, each at most HandshakeTimeout, and a new connection closes the one that has
// waited longest.
func TestServerHandshakesBounded(t *testing.T) {
	t.Parallel()
	t.Run("stalled handshakes and MaxConnections", func(t *testing.T) {
		t.Parallel()
		w := newWire(t, &ServerOptions{Queues: map[string]*EntityOptions{"q": nil, "q2": nil}, MaxConnections: 2})
		healthy := w.healthyClient(t, "q")
		healthy(t)
		for range 8 {
			dialStalled(t, w.srv, "AM")
		}
		client, err := azservicebus.NewClientFromConnectionString(w.srv.ConnectionString(), nil)
		if err != nil {
			t.Fatal(err)
		}
		defer client.Close(context.Background())
		snd, err := client.NewSender("q2", nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := snd.SendMessage(wireCtx(t), &azservicebus.Message{Body: []byte("x")}, nil); err != nil {
			t.Fatalf("a second client, with 8 stalled handshakes open: %v", err)
		}
		healthy(t)
	})
	t.Run("the oldest stalled handshake makes room", func(t *testing.T) {
		t.Parallel()
		const max = 4
		w := newWire(t, &ServerOptions{Queues: map[string]*EntityOptions{"q": nil}, MaxHandshakes: max})
		var stalled []net.Conn
		for range 3 * max {
			stalled = append(stalled, dialStalled(t, w.srv, "A"))
		}
		// The connections are accepted in order: all but the last max are closed.
		for i, nc := range stalled[:2*max] {
			if !closedByServer(nc, 5*time.Second) {
				t.Fatalf("stalled connection %d of %d still open with MaxHandshakes %d", i, len(stalled), max)
			}
		}
		w.healthyClient(t, "q")(t)
	})
	t.Run("silent handshakes make room first", func(t *testing.T) {
		t.Parallel()
		const max = 4
		w := newWire(t, &ServerOptions{Queues: map[string]*EntityOptions{"q": nil}, MaxHandshakes: max})
		var started, silent []net.Conn
		// One at a time: a handshake waits behind those that reached its stage earlier,
		// and the server reads each connection's first bytes on a goroutine of its own.
		for i := range max {
			started = append(started, dialStalled(t, w.srv, "A"))
			eventually(t, "the server to read the started handshake's first byte", func() bool {
				return w.srv.w.HandshakesStarted() == i+1
			})
		}
		for range 2 * max {
			silent = append(silent, dialStalled(t, w.srv, ""))
		}
		// The first silent one closes the oldest started one (nothing was less advanced),
		// every later one the silent one before it.
		if !closedByServer(started[0], 5*time.Second) {
			t.Fatal("the oldest started handshake still open after 2×MaxHandshakes silent ones")
		}
		for i, nc := range silent[:len(silent)-1] {
			if !closedByServer(nc, 5*time.Second) {
				t.Fatalf("silent connection %d of %d still open with MaxHandshakes %d", i, len(silent), max)
			}
		}
		for i, nc := range started[1:] {
			if closedByServer(nc, 100*time.Millisecond) {
				t.Fatalf("started connection %d closed to make room while silent ones waited", i+1)
			}
		}
	})
	t.Run("HandshakeTimeout", func(t *testing.T) {
		t.Parallel()
		w := newWire(t, &ServerOptions{Queues: map[string]*EntityOptions{"q": nil}, HandshakeTimeout: 200 * time.Millisecond})
		for _, first := range []string{"", "AMQP", string([]byte{tlsHandshakeRecord})} {
			nc := dialStalled(t, w.srv, first)
			start := time.Now()
			if !closedByServer(nc, 5*time.Second) {
				t.Fatalf("a connection that sent %q and stalled is still open after 5 s", first)
			}
			if d := time.Since(start); d > 3*time.Second {
				t.Fatalf("a connection that sent %q and stalled was closed after %v, HandshakeTimeout 200ms", first, d)
			}
		}
		w.healthyClient(t, "q")(t)
	})
}

// TestServerAdminConnectionsBounded: administration (HTTPS) connections count against
// MaxConnections, and one idle for AdminIdleTimeout is closed.
func TestServerAdminConnectionsBounded(t *testing.T) {
	t.Parallel()
	t.Run("MaxConnections", func(t *testing.T) {
		t.Parallel()
		const max = 3
		w := newWire(t, &ServerOptions{Queues: map[string]*EntityOptions{"q": nil}, MaxConnections: max})
		w.healthyClient(t, "q")(t) // the SDK's connection: one of max
		cfg := &tls.Config{RootCAs: w.srv.w.CertPool(), ServerName: "127.0.0.1"}
		var conns []*tls.Conn
		for range 10 {
			c, err := tls.Dial("tcp", w.srv.Addr().String(), cfg)
			if err != nil {
				continue // refused during its handshake: also fine
			}
			t.Cleanup(func() { _ = c.Close() })
			// Its first request makes it an administration connection (until then it is
			// in its handshake: it could still be AMQP over TLS), then it stays idle.
			if _, err := io.WriteString(c, "GET /$namespaceinfo HTTP/1.1\r\nHost: sbtest\r\n\r\n"); err != nil {
				continue
			}
			conns = append(conns, c)
		}
		open := 0
		for _, c := range conns {
			if !closedByServer(c, 500*time.Millisecond) {
				open++
			}
		}
		if open > max-1 {
			t.Fatalf("%d idle admin connections kept open with MaxConnections %d and one AMQP connection", open, max)
		}
	})
	t.Run("AdminIdleTimeout", func(t *testing.T) {
		t.Parallel()
		w := newWire(t, &ServerOptions{AdminIdleTimeout: 200 * time.Millisecond})
		c, err := tls.Dial("tcp", w.srv.Addr().String(), &tls.Config{RootCAs: w.srv.w.CertPool(), ServerName: "127.0.0.1"})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if _, err := io.WriteString(c, "GET /$namespaceinfo HTTP/1.1\r\nHost: sbtest\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		if !closedByServer(c, 5*time.Second) {
			t.Fatal("an idle keep-alive admin connection is still open after 5 s")
		}
		if d := time.Since(start); d > 3*time.Second {
			t.Fatalf("closed after %v, AdminIdleTimeout 200ms", d)
		}
	})
}
