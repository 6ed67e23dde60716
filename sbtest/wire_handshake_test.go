package sbtest

import (
	"bufio"
	"context"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	goamqp "github.com/Azure/go-amqp"
)

// inHandshakeOrServed returns how many connections srv holds in their handshake and how
// many administration connections it serves.
func inHandshakeOrServed(srv *Server) (handshaking, admin int) {
	return srv.w.Handshakes(), srv.w.AdminConns()
}

// TestServerPartialHTTPRequestsAreHandshakes: an HTTP connection is in its handshake
// (bounded by MaxHandshakes, not counted against MaxConnections) until its first request
// header is complete, so sockets that send a byte of a request, on the plain-HTTP port
// or inside TLS, cannot take the connections AMQP clients need.
func TestServerPartialHTTPRequestsAreHandshakes(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		dial func(t *testing.T, srv *Server) net.Conn
	}{
		{"plain HTTP port", func(t *testing.T, srv *Server) net.Conn {
			nc, err := net.Dial("tcp", strings.TrimPrefix(srv.AdminHTTPURL(), "http://"))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := io.WriteString(nc, "G"); err != nil {
				t.Fatal(err)
			}
			return nc
		}},
		{"TLS", func(t *testing.T, srv *Server) net.Conn {
			nc, err := tls.Dial("tcp", srv.Addr().String(), &tls.Config{RootCAs: srv.w.CertPool(), ServerName: "127.0.0.1"})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := io.WriteString(nc, "GET "); err != nil {
				t.Fatal(err)
			}
			return nc
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			w := newWire(t, &ServerOptions{Queues: map[string]*EntityOptions{"q": nil}, AdminHTTPAddr: "127.0.0.1:0"})
			for range DefaultServerMaxConnections {
				nc := tc.dial(t, w.srv)
				t.Cleanup(func() { _ = nc.Close() })
			}
			eventually(t, "the partial requests to reach the server", func() bool {
				h, a := inHandshakeOrServed(w.srv)
				return h+a >= DefaultServerMaxConnections
			})
			if h, a := inHandshakeOrServed(w.srv); a != 0 {
				t.Errorf("%d connections with a partial request header served as administration connections (%d in their handshake)", a, h)
			}
			w.healthyClient(t, "q")(t)
			resp, err := http.Get(w.srv.AdminHTTPURL() + "/health")
			if err != nil {
				t.Fatalf("a whole request beside %d partial ones: %v", DefaultServerMaxConnections, err)
			}
			_ = resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("GET /health: %s", resp.Status)
			}
		})
	}
}

// slowConn is a client connection whose writes after the first wait delay, as those of
// a client far away do after each of the server's answers (the first bytes go out with
// the connection).
type slowConn struct {
	net.Conn
	delay  time.Duration
	writes atomic.Int32
}

func (c *slowConn) Write(p []byte) (int, error) {
	if c.writes.Add(1) > 1 {
		time.Sleep(c.delay)
	}
	return c.Conn.Write(p)
}

// floodSilent opens connections to addr that send nothing, as fast as it can, until ctx ends,
// keeping at most 64 of its own open, and returns how many it opened.
func floodSilent(ctx context.Context, addr string) int {
	var ring []net.Conn
	n := 0
	for ctx.Err() == nil {
		nc, err := net.Dial("tcp", addr)
		if err != nil {
			continue
		}
		n++
		ring = append(ring, nc)
		if len(ring) > 64 {
			_ = ring[0].Close()
			ring = ring[1:]
		}
	}
	for _, nc := range ring {
		_ = nc.Close()
	}
	return n
}

// TestServerSlowHandshakeUnderFlood: at MaxHandshakes, a new connection evicts one that
// sent nothing before one whose handshake is under way, so a client whose every round
// trip takes 100 ms connects, over TLS and in plain AMQP, while silent connections
// arrive far faster than MaxHandshakes per 100 ms.
func TestServerSlowHandshakeUnderFlood(t *testing.T) {
	t.Parallel()
	const slow = 100 * time.Millisecond
	w := newWire(t, &ServerOptions{Queues: map[string]*EntityOptions{"q": nil, "slow": nil}, MaxHandshakes: 32})
	addr := w.srv.Addr().String()
	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var opened atomic.Int64
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			opened.Add(int64(floodSilent(ctx, addr)))
		}()
	}
	start := time.Now()
	eventually(t, "the flood to fill the handshakes", func() bool {
		h, _ := inHandshakeOrServed(w.srv)
		return h >= 32
	})
	dial := func() (net.Conn, error) {
		nc, err := net.DialTimeout("tcp", addr, wireTimeout)
		if err != nil {
			return nil, err
		}
		return &slowConn{Conn: nc, delay: slow}, nil
	}
	var failures []string
	const tries = 4
	for i := range tries {
		nc, err := dial()
		if err == nil {
			tc := tls.Client(nc, &tls.Config{RootCAs: w.srv.w.CertPool(), ServerName: "127.0.0.1"})
			_ = tc.SetDeadline(time.Now().Add(wireTimeout))
			var resp *http.Response
			if _, err = io.WriteString(tc, "GET /health HTTP/1.1\r\nHost: sbtest\r\n\r\n"); err == nil {
				if resp, err = http.ReadResponse(bufio.NewReader(tc), nil); err == nil && resp.StatusCode != http.StatusOK {
					err = &net.AddrError{Err: resp.Status}
				}
			}
			_ = tc.Close()
		}
		if err != nil {
			failures = append(failures, "TLS health check "+string(rune('0'+i))+": "+err.Error())
		}
	}
	for i := range tries {
		nc, err := dial()
		if err == nil {
			cctx, cancel := context.WithTimeout(context.Background(), wireTimeout)
			var conn *goamqp.Conn
			if conn, err = goamqp.NewConn(cctx, nc, &goamqp.ConnOptions{SASLType: goamqp.SASLTypeAnonymous(), HostName: "127.0.0.1"}); err == nil {
				var sess *goamqp.Session
				if sess, err = conn.NewSession(cctx, nil); err == nil {
					var snd *goamqp.Sender
					if snd, err = sess.NewSender(cctx, "slow", nil); err == nil {
						err = snd.Send(cctx, goamqp.NewMessage([]byte("slow")), nil)
					}
				}
				_ = conn.Close()
			} else {
				_ = nc.Close()
			}
			cancel()
		}
		if err != nil {
			failures = append(failures, "AMQP connection "+string(rune('0'+i))+": "+err.Error())
		}
	}
	stop()
	wg.Wait()
	rate := float64(opened.Load()) / time.Since(start).Seconds()
	t.Logf("%d silent connections, %.0f/s; MaxHandshakes 32 fill in %v", opened.Load(), rate, time.Duration(32/rate*float64(time.Second)))
	if len(failures) > 0 {
		t.Fatalf("%d of %d slow clients failed under the flood:\n%s", len(failures), 2*tries, strings.Join(failures, "\n"))
	}
	w.healthyClient(t, "q")(t)
}
