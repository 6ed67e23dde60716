package sbtest

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/coder/websocket"
	"github.com/sbkit/sbkit/sbtest/internal/amqp"
	"github.com/sbkit/sbkit/sbtest/internal/wire"
)

// wsClient returns an SDK client that tunnels AMQP through a WebSocket to url (ws:// or
// wss://; the SDK's own args.Host, wss://HOST:PORT/$servicebus/websocket, is replaced),
// with the subprotocols offered and an HTTP client that trusts the server, as the SDK's
// example ExampleNewClient_usingWebsocketsAndProxies does.
func wsClient(t *testing.T, srv *Server, url string, subprotocols ...string) *azservicebus.Client {
	t.Helper()
	dial := func(ctx context.Context, args azservicebus.NewWebSocketConnArgs) (net.Conn, error) {
		if !strings.HasSuffix(args.Host, "/$servicebus/websocket") {
			return nil, fmt.Errorf("the SDK asks for %q", args.Host)
		}
		wc, _, err := websocket.Dial(ctx, url, &websocket.DialOptions{Subprotocols: subprotocols, HTTPClient: srv.AdminHTTPClient()})
		if err != nil {
			return nil, err
		}
		// Not ctx: it is the context of the call that opens the connection, and the
		// connection must outlive it (TestServerWebSocketClientOptions).
		return websocket.NetConn(context.Background(), wc, websocket.MessageBinary), nil
	}
	client, err := azservicebus.NewClientFromConnectionString(srv.ConnectionString(), &azservicebus.ClientOptions{NewWebSocketConn: dial})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), wireTimeout)
		defer cancel()
		_ = client.Close(ctx)
	})
	return client
}

// wsURL is the WebSocket URL of srv: on the AMQP port over TLS (wss), or on the
// plain-HTTP port (ws).
func wsURL(srv *Server, tls bool, path string) string {
	if tls {
		return "wss://" + srv.w.Endpoint() + path
	}
	return "ws" + strings.TrimPrefix(srv.AdminHTTPURL(), "http") + path
}

// TestServerWebSocketSDK runs the Go SDK over WebSockets (ClientOptions.NewWebSocketConn)
// on both ports, both paths and both subprotocols: sending, receiving in peek-lock,
// completing, abandoning (the delivery count goes up), renewing, and receiving what a TCP
// client sent, on one connection that counts as one.
func TestServerWebSocketSDK(t *testing.T) {
	srv := NewTestServer(t, &ServerOptions{AdminHTTPAddr: "127.0.0.1:0", Queues: map[string]*EntityOptions{"q": nil}})
	for _, tc := range []struct {
		name, path, proto string
		tls               bool
	}{
		{"wss", "/$servicebus/websocket", "AMQPWSB10", true},
		{"wss-slash", "/$servicebus/websocket/", "amqp", true},
		{"ws", "/$servicebus/websocket/", "AMQPWSB10", false},
		{"ws-no-slash", "/$servicebus/websocket", "amqp", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := wireCtx(t)
			client := wsClient(t, srv, wsURL(srv, tc.tls, tc.path), tc.proto)
			s, err := client.NewSender("q", nil)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close(ctx)
			r, err := client.NewReceiverForQueue("q", nil)
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close(ctx)
			body := strings.Repeat("x", 200_000) // many frames, many WebSocket messages
			if err := s.SendMessage(ctx, &azservicebus.Message{Body: []byte(body), ApplicationProperties: map[string]any{"k": "v"}}, nil); err != nil {
				t.Fatal(err)
			}
			m := receiveN(t, r, 1)[0]
			if string(m.Body) != body || m.ApplicationProperties["k"] != "v" || m.DeliveryCount != 1 {
				t.Fatalf("received %d bytes, properties %v, delivery count %d", len(m.Body), m.ApplicationProperties, m.DeliveryCount)
			}
			if err := r.RenewMessageLock(ctx, m, nil); err != nil {
				t.Fatalf("renew: %v", err)
			}
			if err := r.AbandonMessage(ctx, m, nil); err != nil {
				t.Fatalf("abandon: %v", err)
			}
			m = receiveN(t, r, 1)[0]
			if m.DeliveryCount != 2 {
				t.Fatalf("delivery count after abandon %d, want 2", m.DeliveryCount)
			}
			if err := r.CompleteMessage(ctx, m, nil); err != nil {
				t.Fatalf("complete: %v", err)
			}
			// What a TCP client sends, the WebSocket client receives.
			tcp, err := azservicebus.NewClientFromConnectionString(srv.ConnectionString(), nil)
			if err != nil {
				t.Fatal(err)
			}
			defer tcp.Close(ctx)
			ts, err := tcp.NewSender("q", nil)
			if err != nil {
				t.Fatal(err)
			}
			if err := ts.SendMessage(ctx, &azservicebus.Message{Body: []byte("tcp")}, nil); err != nil {
				t.Fatal(err)
			}
			m = receiveN(t, r, 1)[0]
			if string(m.Body) != "tcp" {
				t.Fatalf("received %q", m.Body)
			}
			if err := r.CompleteMessage(ctx, m, nil); err != nil {
				t.Fatal(err)
			}
			if c := srv.Namespace().mustEntity(t, "q").Counts(); c.Active+c.Locked != 0 {
				t.Fatalf("counts %+v after completing everything", c)
			}
		})
	}
}

// mustEntity returns the entity at path or fails the test.
func (ns *Namespace) mustEntity(t *testing.T, path string) *Entity {
	t.Helper()
	e, ok := ns.Entity(path)
	if !ok {
		t.Fatalf("no entity %q", path)
	}
	return e
}

// wsDialRaw opens a WebSocket to srv's plain-HTTP port and returns it as a net.Conn of
// binary messages, for speaking raw AMQP through it.
func wsDialRaw(t *testing.T, srv *Server) (net.Conn, *websocket.Conn) {
	return wsDialRawWith(t, srv, nil)
}

// wsDialRawWith is wsDialRaw through the HTTP client hc (nil: the default).
func wsDialRawWith(t *testing.T, srv *Server, hc *http.Client) (net.Conn, *websocket.Conn) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wireTimeout)
	defer cancel()
	wc, _, err := websocket.Dial(ctx, wsURL(srv, false, "/$servicebus/websocket"), &websocket.DialOptions{Subprotocols: []string{"AMQPWSB10"}, HTTPClient: hc})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = wc.CloseNow() })
	nc := websocket.NetConn(context.Background(), wc, websocket.MessageBinary)
	_ = nc.SetDeadline(time.Now().Add(wireTimeout))
	return nc, wc
}

// smallBufferClient is an HTTP client whose sockets have 8 KiB buffers, so that a client
// that does not read backs the server's writes up at once (see dialRawNoRead).
func smallBufferClient() *http.Client {
	d := net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
		var serr error
		err := rc.Control(func(fd uintptr) {
			serr = errors.Join(syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 8192),
				syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_SNDBUF, 8192))
		})
		return errors.Join(err, serr)
	}}
	return &http.Client{Transport: &http.Transport{DialContext: d.DialContext}}
}

// TestServerWebSocketLimits holds the tunnel to the TCP path's limits: a connection is
// counted once its AMQP open is done (MaxConnections refuses the next with
// amqp:resource-limit-exceeded), an upgraded tunnel that never sends the AMQP header is
// closed after HandshakeTimeout and counts against MaxHandshakes meanwhile, an upgrade
// request that never completes its header is closed too, a huge header is refused, an
// oversize AMQP frame closes the tunnel with amqp:framing-error, a text message closes it,
// and Close ends every tunnel at once.
func TestServerWebSocketLimits(t *testing.T) {
	t.Run("connections counted once open", func(t *testing.T) {
		srv := NewTestServer(t, &ServerOptions{AdminHTTPAddr: "127.0.0.1:0", MaxConnections: 1, Queues: map[string]*EntityOptions{"q": nil}})
		nc, _ := wsDialRaw(t, srv)
		// The client sees the 101 a moment before the server has handed the connection
		// over from HTTP (which counts it) to the tunnel's handshake (which does not).
		eventually(t, "the upgraded connection to be a handshake", func() bool {
			return srv.handshakeCount() == 1 && srv.adminConnCount() == 0
		})
		// Upgraded but not open: not counted, so a TCP client still gets in.
		tcp := newWireOn(t, srv)
		if n := srv.connCount(); n != 1 {
			t.Fatalf("%d connections counted, want 1 (the TCP client)", n)
		}
		_ = tcp
		c := &rawConn{t: t, nc: nc, br: bufio.NewReader(nc)}
		c.write([]byte(amqp.ProtoHeaderAMQP))
		c.header(amqp.ProtoHeaderAMQP)
		c.writeFrame(amqp.FrameTypeAMQP, 0, &amqp.Open{ContainerID: "ws"}, nil)
		if _, ok := c.readFrame().Body.(*amqp.Open); !ok {
			t.Fatal("no open answered")
		}
		if cond := c.expectClose(); cond != condResourceLimit {
			t.Fatalf("close condition %q, want %q", cond, condResourceLimit)
		}
	})
	t.Run("silent after upgrade", func(t *testing.T) {
		srv := NewTestServer(t, &ServerOptions{AdminHTTPAddr: "127.0.0.1:0", HandshakeTimeout: 300 * time.Millisecond})
		nc, _ := wsDialRaw(t, srv)
		eventually(t, "the tunnel to count as a handshake", func() bool { return srv.handshakeCount() == 1 })
		start := time.Now()
		_ = nc.SetReadDeadline(time.Now().Add(wireTimeout))
		if _, err := nc.Read(make([]byte, 1)); err == nil {
			t.Fatal("a silent tunnel was answered")
		}
		if d := time.Since(start); d > wireTimeout/2 {
			t.Fatalf("a silent tunnel lived %v", d)
		}
		eventually(t, "the handshake to end", func() bool { return srv.handshakeCount() == 0 })
	})
	t.Run("silent tunnels evicted at MaxHandshakes", func(t *testing.T) {
		srv := NewTestServer(t, &ServerOptions{AdminHTTPAddr: "127.0.0.1:0", MaxHandshakes: 2, HandshakeTimeout: -1})
		first, _ := wsDialRaw(t, srv)
		eventually(t, "one handshake", func() bool { return srv.handshakeCount() == 1 })
		wsDialRaw(t, srv) // its HTTP request is a handshake of its own while it lasts
		eventually(t, "two handshakes", func() bool { return srv.handshakeCount() == 2 })
		wsDialRaw(t, srv)
		_ = first.SetReadDeadline(time.Now().Add(wireTimeout))
		if _, err := first.Read(make([]byte, 1)); err == nil {
			t.Fatal("the oldest silent tunnel was answered, not evicted")
		}
	})
	t.Run("slow upgrade request", func(t *testing.T) {
		srv := NewTestServer(t, &ServerOptions{AdminHTTPAddr: "127.0.0.1:0", HandshakeTimeout: 300 * time.Millisecond})
		nc, err := net.Dial("tcp", srv.w.AdminHTTPAddr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		_, _ = nc.Write([]byte("GET /$servicebus/websocket HTTP/1.1\r\nHost: x\r\n")) // and no more
		_ = nc.SetReadDeadline(time.Now().Add(wireTimeout))
		start := time.Now()
		_, _ = nc.Read(make([]byte, 512))
		if d := time.Since(start); d > wireTimeout/2 {
			t.Fatalf("a slow upgrade request lived %v", d)
		}
	})
	t.Run("huge header", func(t *testing.T) {
		srv := NewTestServer(t, &ServerOptions{AdminHTTPAddr: "127.0.0.1:0"})
		ctx := wireCtx(t)
		h := http.Header{"X-Big": []string{strings.Repeat("a", 2*wire.MaxHeaderBytes)}}
		_, resp, err := websocket.Dial(ctx, wsURL(srv, false, "/$servicebus/websocket"), &websocket.DialOptions{HTTPHeader: h})
		if err == nil {
			t.Fatal("an upgrade with a huge header was accepted")
		}
		if resp == nil || resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
			t.Fatalf("response %v, want status 431", resp)
		}
	})
	t.Run("oversize frame", func(t *testing.T) {
		srv := NewTestServer(t, &ServerOptions{AdminHTTPAddr: "127.0.0.1:0"})
		nc, _ := wsDialRaw(t, srv)
		c := &rawConn{t: t, nc: nc, br: bufio.NewReader(nc)}
		c.open()
		// A frame header announcing 16 MiB, far above the 64 KiB the server announced.
		c.write([]byte{0x01, 0x00, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00})
		if cond := c.expectClose(); cond != condFramingError {
			t.Fatalf("close condition %q, want %q", cond, condFramingError)
		}
	})
	t.Run("text message", func(t *testing.T) {
		srv := NewTestServer(t, &ServerOptions{AdminHTTPAddr: "127.0.0.1:0"})
		_, wc := wsDialRaw(t, srv)
		ctx := wireCtx(t)
		if err := wc.Write(ctx, websocket.MessageText, []byte(amqp.ProtoHeaderAMQP)); err != nil {
			t.Fatal(err)
		}
		if _, _, err := wc.Read(ctx); websocket.CloseStatus(err) != websocket.StatusUnsupportedData {
			t.Fatalf("after a text message: %v, want close status 1003", err)
		}
	})
	t.Run("never reads", func(t *testing.T) {
		srv := NewTestServer(t, &ServerOptions{AdminHTTPAddr: "127.0.0.1:0", WriteTimeout: 300 * time.Millisecond})
		nc, _ := wsDialRawWith(t, srv, smallBufferClient())
		c := &rawConn{t: t, nc: nc, br: bufio.NewReader(nc)}
		c.open()
		eventually(t, "the tunnel to count", func() bool { return srv.connCount() == 1 })
		c.beginSession(100)
		// Ask for echoes without reading them: the server's frames back up, it stops
		// reading, and it closes the tunnel after WriteTimeout.
		burst := echoFlows(t)
		start := time.Now()
		for {
			if _, err := nc.Write(burst); err != nil {
				break
			}
			if time.Since(start) > wireTimeout {
				t.Fatal("the server kept reading from a tunnel that reads nothing")
			}
		}
		eventually(t, "the tunnel to be dropped", func() bool { return srv.connCount() == 0 })
	})
	t.Run("close ends tunnels", func(t *testing.T) {
		base := runtime.NumGoroutine()
		srv, err := NewServer(&ServerOptions{AdminHTTPAddr: "127.0.0.1:0"})
		if err != nil {
			t.Fatal(err)
		}
		nc, _ := wsDialRaw(t, srv)
		c := &rawConn{t: t, nc: nc, br: bufio.NewReader(nc)}
		c.open()
		silent, _ := wsDialRaw(t, srv) // upgraded, never speaks
		_ = silent
		// The tunnels' sockets are closed at once: no close handshake waits for clients
		// that do not answer one (the library waits up to 5 s for each).
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		if err := srv.Close(ctx); err != nil {
			t.Fatalf("Close with open tunnels: %v", err)
		}
		_ = nc.Close()
		_ = silent.Close()
		noGoroutinesAbove(t, base)
	})
}

// newWireOn connects an SDK client over TCP to srv and makes it open its connection.
func newWireOn(t *testing.T, srv *Server) *wired {
	t.Helper()
	w := &wired{srv: srv, client: mustClient(t, srv)}
	ctx := wireCtx(t)
	s := w.sender(t, "q")
	if err := s.SendMessage(ctx, &azservicebus.Message{Body: []byte("tcp")}, nil); err != nil {
		t.Fatal(err)
	}
	return w
}

func mustClient(t *testing.T, srv *Server) *azservicebus.Client {
	t.Helper()
	client, err := azservicebus.NewClientFromConnectionString(srv.ConnectionString(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), wireTimeout)
		defer cancel()
		_ = client.Close(ctx)
	})
	return client
}

// handshakeCount is how many connections are in their handshake.
func (s *Server) handshakeCount() int {
	return s.w.Handshakes()
}

// BenchmarkServerTransports sends and receives one message at a time (send, peek-lock
// receive, complete) with the Go SDK over TCP (the baseline), over WebSockets in the
// clear and over TLS, and with the HTTP data plane (Send Message, Peek-Lock Message,
// Delete Message), in the same run: what the tunnel and HTTP cost per message.
func BenchmarkServerTransports(b *testing.B) {
	srv := NewTestServer(b, &ServerOptions{AdminHTTPAddr: "127.0.0.1:0", Queues: map[string]*EntityOptions{"q": nil}})
	amqpRoundTrips := func(b *testing.B, client *azservicebus.Client) {
		ctx := context.Background()
		s, err := client.NewSender("q", nil)
		if err != nil {
			b.Fatal(err)
		}
		defer s.Close(ctx)
		r, err := client.NewReceiverForQueue("q", nil)
		if err != nil {
			b.Fatal(err)
		}
		defer r.Close(ctx)
		b.ResetTimer()
		start := time.Now()
		for range b.N {
			if err := s.SendMessage(ctx, &azservicebus.Message{Body: []byte("bench")}, nil); err != nil {
				b.Fatal(err)
			}
			ms, err := r.ReceiveMessages(ctx, 1, nil)
			if err != nil {
				b.Fatal(err)
			}
			if err := r.CompleteMessage(ctx, ms[0], nil); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "msgs/s")
	}
	b.Run("tcp", func(b *testing.B) {
		client, err := azservicebus.NewClientFromConnectionString(srv.ConnectionString(), nil)
		if err != nil {
			b.Fatal(err)
		}
		defer client.Close(context.Background())
		amqpRoundTrips(b, client)
	})
	for _, tls := range []bool{false, true} {
		name := "ws"
		if tls {
			name = "wss"
		}
		b.Run(name, func(b *testing.B) {
			url := wsURL(srv, tls, "/$servicebus/websocket")
			dial := func(ctx context.Context, _ azservicebus.NewWebSocketConnArgs) (net.Conn, error) {
				wc, _, err := websocket.Dial(ctx, url, &websocket.DialOptions{Subprotocols: []string{"AMQPWSB10"}, HTTPClient: srv.AdminHTTPClient()})
				if err != nil {
					return nil, err
				}
				return websocket.NetConn(ctx, wc, websocket.MessageBinary), nil
			}
			client, err := azservicebus.NewClientFromConnectionString(srv.ConnectionString(), &azservicebus.ClientOptions{NewWebSocketConn: dial})
			if err != nil {
				b.Fatal(err)
			}
			defer client.Close(context.Background())
			amqpRoundTrips(b, client)
		})
	}
	b.Run("http", func(b *testing.B) {
		hc := &http.Client{}
		base := srv.AdminHTTPURL() + "/q/messages"
		call := func(method, url string, body string, want int) *http.Response {
			req, _ := http.NewRequest(method, url, strings.NewReader(body))
			resp, err := hc.Do(req)
			if err != nil {
				b.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != want {
				b.Fatalf("%s %s: %d, want %d", method, url, resp.StatusCode, want)
			}
			return resp
		}
		b.ResetTimer()
		start := time.Now()
		for range b.N {
			call("POST", base, "bench", http.StatusCreated)
			resp := call("POST", base+"/head?timeout=5", "", http.StatusCreated)
			call("DELETE", resp.Header.Get("Location"), "", http.StatusOK)
		}
		b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "msgs/s")
	})
}

// TestServerWebSocketClientOptions: the SDK with Server.WebSocketClientOptions talks to
// the server over wss:// from the connection string alone, and its connection outlives
// the context of the call that opened it.
func TestServerWebSocketClientOptions(t *testing.T) {
	srv := NewTestServer(t, &ServerOptions{Queues: map[string]*EntityOptions{"q": nil}})
	client, err := azservicebus.NewClientFromConnectionString(srv.ConnectionString(), srv.WebSocketClientOptions())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close(context.Background())
	s, err := client.NewSender("q", nil)
	if err != nil {
		t.Fatal(err)
	}
	first, cancel := context.WithTimeout(context.Background(), wireTimeout)
	if err := s.SendMessage(first, &azservicebus.Message{Body: []byte("one")}, nil); err != nil {
		t.Fatal(err)
	}
	cancel() // the context the connection was opened with ends
	ctx := wireCtx(t)
	if err := s.SendMessage(ctx, &azservicebus.Message{Body: []byte("two")}, nil); err != nil {
		t.Fatal(err)
	}
	r, err := client.NewReceiverForQueue("q", &azservicebus.ReceiverOptions{ReceiveMode: azservicebus.ReceiveModeReceiveAndDelete})
	if err != nil {
		t.Fatal(err)
	}
	if got := receiveN(t, r, 2); string(got[0].Body) != "one" || string(got[1].Body) != "two" {
		t.Fatalf("received %q, %q", got[0].Body, got[1].Body)
	}
	if n := srv.w.ConnsOpened(); n != 1 {
		t.Fatalf("the client opened %d connections, want 1", n)
	}
}

// TestServerWebSocketFramesInOrder: the AMQP byte stream may be split at any byte across
// WebSocket messages ("AMQP WebSocket Binding" 2.2); transfers split so, followed by a
// detach, are all stored, in arrival order, and answered before the detach, as over TCP
// (TestServerAnswersTransfersBeforeDetach), with the latency model's waits overlapping.
func TestServerWebSocketFramesInOrder(t *testing.T) {
	const n = 20
	srv := NewTestServer(t, &ServerOptions{AdminHTTPAddr: "127.0.0.1:0", Queues: map[string]*EntityOptions{"q": nil},
		NamespaceOptions: &NamespaceOptions{Latency: Latency{RoundTrip: 3 * time.Millisecond}}})
	nc, _ := wsDialRaw(t, srv)
	c := &rawConn{t: t, nc: nc, br: bufio.NewReader(nc)}
	c.open()
	c.beginAndAttach()
	var b []byte
	for i := range uint32(n) {
		msg, _ := (&amqp.Message{Data: [][]byte{[]byte(fmt.Sprint(i))}}).MarshalBinary()
		var err error
		b, err = amqp.AppendFrame(b, amqp.Frame{Type: amqp.FrameTypeAMQP, Body: &amqp.Transfer{Handle: 0, DeliveryID: amqp.Ptr(i),
			DeliveryTag: []byte{byte(i)}, MessageFormat: amqp.Ptr(uint32(0))}, Payload: msg})
		if err != nil {
			t.Fatal(err)
		}
	}
	b, err := amqp.AppendFrame(b, amqp.Frame{Type: amqp.FrameTypeAMQP, Body: &amqp.Detach{Handle: 0, Closed: true}})
	if err != nil {
		t.Fatal(err)
	}
	for len(b) > 0 { // 7-byte WebSocket messages: every frame split across several
		k := min(7, len(b))
		c.write(b[:k])
		b = b[k:]
	}
	accepted := 0
	for done := false; !done; {
		switch f := c.readFrame().Body.(type) {
		case *amqp.Disposition:
			last := f.First
			if f.Last != nil {
				last = *f.Last
			}
			accepted += int(last - f.First + 1)
		case *amqp.Detach:
			done = true
		}
	}
	if accepted != n {
		t.Fatalf("%d of %d transfers accepted before the detach's answer", accepted, n)
	}
	r, err := srv.Namespace().NewReceiverForQueue("q", &ReceiverOptions{ReceiveMode: azservicebus.ReceiveModeReceiveAndDelete})
	if err != nil {
		t.Fatal(err)
	}
	got := receiveN(t, r, n)
	for i, m := range got {
		if string(m.Body) != fmt.Sprint(i) {
			t.Fatalf("message %d is %q: not in arrival order", i, m.Body)
		}
	}
}
