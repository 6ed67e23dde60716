package wire

import (
	"bufio"
	"context"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/coder/websocket"
)

// AMQP over WebSockets: the SDKs of every language can tunnel AMQP through a WebSocket
// to wss://HOST/$servicebus/websocket (the Go SDK's Namespace builds that URL for
// ClientOptions.NewWebSocketConn; .NET's and Python's clients add a trailing slash), with
// the subprotocol "AMQPWSB10" ("AMQP WebSocket Binding (WSB) Version 1.0", OASIS), which
// the Go SDK's example spells "amqp". Each binary message carries a piece of the AMQP
// byte stream, in order ("AMQP WebSocket Binding" 2.2: the stream may be split at any
// byte). The server accepts the upgrade on every port that serves HTTP (the AMQP port
// over TLS, and ServerOptions.AdminHTTPAddr in the clear) and hands the tunnel to the
// same AMQP connection code as a TCP connection, so every limit holds: the upgrade
// request's header comes within HandshakeTimeout and MaxHandshakes (as any HTTP
// request's), the AMQP handshake inside it counts against MaxHandshakes and ends by a
// new HandshakeTimeout, the open connection counts against MaxConnections, and frames
// left unread end it after WriteTimeout.
//
// The framing is github.com/coder/websocket's, the library the Go SDK's own WebSocket
// example uses (azservicebus's go.mod requires it at the same version).

// webSocketPaths are the paths the upgrade is accepted at.
var webSocketPaths = []string{"/$servicebus/websocket", "/$servicebus/websocket/"}

// webSocketSubprotocols are the subprotocols offered to clients, in order of preference:
// the binding's name, then the Go SDK example's.
var webSocketSubprotocols = []string{"AMQPWSB10", "amqp"}

// WebSocketClientOptions is sbtest.Server.WebSocketClientOptions, which documents it.
func (s *Server) WebSocketClientOptions() *azservicebus.ClientOptions {
	hc := s.AdminHTTPClient()
	return &azservicebus.ClientOptions{NewWebSocketConn: func(ctx context.Context, args azservicebus.NewWebSocketConnArgs) (net.Conn, error) {
		wc, _, err := websocket.Dial(ctx, args.Host, &websocket.DialOptions{Subprotocols: webSocketSubprotocols[:1], HTTPClient: hc})
		if err != nil {
			return nil, err
		}
		// Not ctx, which the SDK's example passes: it is the context of the call that opens
		// the connection (azservicebus internal/namespace.go), and NetConn's context bounds
		// the connection's life.
		return websocket.NetConn(context.Background(), wc, websocket.MessageBinary), nil
	}}
}

// isWebSocketPath reports whether path is where AMQP over WebSockets is served.
func isWebSocketPath(path string) bool {
	for _, p := range webSocketPaths {
		if strings.EqualFold(path, p) {
			return true
		}
	}
	return false
}

// serveWebSocket upgrades r to a WebSocket carrying AMQP and serves the AMQP connection
// in it until it ends. A request that is not an upgrade gets the library's answer (426
// Upgrade Required, or 400 for a malformed upgrade) and its connection goes on serving
// HTTP.
func (s *Server) serveWebSocket(w http.ResponseWriter, r *http.Request) {
	hw := &hijackRecorder{ResponseWriter: w}
	wc, err := websocket.Accept(hw, r, &websocket.AcceptOptions{
		Subprotocols: webSocketSubprotocols,
		// A browser page (rhea in a page, an explorer) connects from its own origin; what
		// protects the namespace is the AMQP connection's own $cbs authorization
		// (ServerOptions.SASKeys), not the origin.
		InsecureSkipVerify: true,
		// Compression costs a flate state per connection and buys nothing on loopback.
		CompressionMode: websocket.CompressionDisabled,
	})
	if err != nil {
		s.log.Debug("WebSocket upgrade refused", "remote", r.RemoteAddr, "err", err)
		return
	}
	if hw.conn == nil { // the library hijacked through another path: nothing to bound by
		_ = wc.CloseNow()
		return
	}
	// The socket (or TLS connection) under the read-ahead header, which the library has
	// consumed: closeNow aborts a tlsConn without its close_notify.
	raw := unwrapHead(hw.conn)
	// The HTTP server's request deadlines stay on a hijacked connection: the AMQP
	// connection sets its own.
	_ = raw.SetDeadline(time.Time{})
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		_ = closeNow(raw)
		return
	}
	s.wg.Add(1) // Close waits for the tunnelled connection as for a TCP one
	s.mu.Unlock()
	defer s.wg.Done()
	hs, ok := s.startHandshake(abortConn{raw})
	if !ok {
		_ = closeNow(raw)
		return
	}
	defer s.endHandshake(hs)
	s.progressed(hs, handshakeStarted) // its upgrade request was whole and valid
	nc := &wsConn{Conn: websocket.NetConn(s.ctx, wc, websocket.MessageBinary), raw: raw}
	s.serveConn(nc, time.Now().Add(s.limits.handshakeTimeout), hs)
}

// wsConn is an AMQP connection tunnelled in a WebSocket. Close ends the WebSocket with a
// close handshake (bounded by the library's timeouts); abort closes the socket under it
// at once, for connections torn down from outside (closeNow).
type wsConn struct {
	net.Conn
	raw net.Conn
}

func (c *wsConn) abort() error { return closeNow(c.raw) }

// abortConn is a connection whose Close is closeNow: what the handshake list closes to
// evict a connection or to stop the server must not wait for the client.
type abortConn struct{ net.Conn }

func (c abortConn) Close() error { return closeNow(c.Conn) }

// hijackRecorder is an http.ResponseWriter that remembers the connection the WebSocket
// library hijacks, so that the server can close it without a close handshake and clear
// the HTTP server's deadlines on it.
type hijackRecorder struct {
	http.ResponseWriter
	conn net.Conn
}

func (h *hijackRecorder) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	nc, brw, err := http.NewResponseController(h.ResponseWriter).Hijack()
	if err == nil {
		h.conn = nc
	}
	return nc, brw, err
}

func (h *hijackRecorder) Unwrap() http.ResponseWriter { return h.ResponseWriter }
