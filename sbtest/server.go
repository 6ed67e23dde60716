package sbtest

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus/admin"
	"github.com/sbkit/sbkit/sbtest/internal/wire"
)

// DefaultServerMaxFrameSize is the largest AMQP frame a Server accepts unless
// ServerOptions.MaxFrameSize says otherwise: 64 KiB, the size the SDK (go-amqp) also
// announces for the frames it accepts. Larger messages travel as multi-frame transfers.
const DefaultServerMaxFrameSize = 65536

// Default resource limits of a Server (ServerOptions). With them one connection holds at
// most 256 × 32 links; a link without credit costs no goroutine.
const (
	DefaultServerMaxConnections = 64
	DefaultServerMaxSessions    = 256
	DefaultServerMaxLinks       = 32
	// DefaultServerWriteTimeout is how long a client may leave the server's frames
	// unread before its connection is closed.
	DefaultServerWriteTimeout = 30 * time.Second
	// DefaultServerMaxHandshakes is how many connections may be in their handshake at
	// once; DefaultServerHandshakeTimeout how long one may take. Both are sbtest's own
	// choices: a client on loopback completes the handshake in milliseconds, 10 s leaves
	// room for a loaded CI machine.
	DefaultServerMaxHandshakes    = 64
	DefaultServerHandshakeTimeout = 10 * time.Second
	// DefaultServerAdminIdleTimeout is how long an administration (HTTPS) connection may
	// stay idle between requests: as long as the idle timeout the server announces on
	// AMQP.
	DefaultServerAdminIdleTimeout = 60 * time.Second
)

// ServerOptions configures a Server. The zero value (and nil) means a new empty namespace
// with default options on 127.0.0.1 with a free port. For every limit, zero means its
// default and a negative value means no limit (for sessions and links, as many as AMQP
// can number: 65,536; for a timeout, none).
type ServerOptions struct {
	// Addr is the TCP address to listen on; default "127.0.0.1:0" (a free port).
	Addr string
	// Namespace is the entity model the server serves; nil means a new one made with
	// NamespaceOptions. The same Namespace can be inspected, faulted and slowed down
	// (SetLatency) while clients talk to it.
	Namespace *Namespace
	// NamespaceOptions configures the namespace made when Namespace is nil.
	NamespaceOptions *NamespaceOptions
	// Queues are created in the namespace before the server starts (nil options mean
	// defaults).
	Queues map[string]*EntityOptions
	// Topics are created in the namespace, with their subscriptions, before the server
	// starts.
	Topics map[string]TopicOptions
	// MaxFrameSize is the largest AMQP frame the server accepts and announces in its open
	// frame; default DefaultServerMaxFrameSize (64 KiB), minimum 512. The SDK announces
	// 64 KiB for the frames it accepts, and the server never sends larger ones.
	MaxFrameSize uint32
	// MaxConnections bounds the connections served at once, AMQP and administration
	// (HTTP and HTTPS) alike, once their handshake is done; default
	// DefaultServerMaxConnections (64), negative means unlimited. An AMQP connection
	// beyond it is opened and closed at once with amqp:resource-limit-exceeded, which the
	// SDK reports without retrying (the service rejects connections beyond its quota the
	// same way); an HTTP one is closed once its first request header is complete.
	MaxConnections int
	// MaxHandshakes bounds the connections in their handshake (the first byte, TLS, the
	// AMQP protocol header, SASL and open exchange, or an HTTP connection's first request
	// header), which do not count against MaxConnections; default
	// DefaultServerMaxHandshakes (64), negative means unlimited. A connection beyond it
	// closes one of those that got least far (nothing received, then no valid protocol
	// header: TLS not done, no "AMQP"), the one of them that has waited longest, so
	// sockets that never finish their handshake cannot lock a healthy client out, nor a
	// flood of silent ones a slow client.
	MaxHandshakes int
	// HandshakeTimeout bounds a connection's handshake, after which it is closed; default
	// DefaultServerHandshakeTimeout (10 s), negative means none. An HTTP connection must
	// also send each request's header within it.
	HandshakeTimeout time.Duration
	// AdminIdleTimeout is how long an administration (HTTPS) connection may stay idle
	// between requests before the server closes it; default
	// DefaultServerAdminIdleTimeout (60 s), negative means none. A request must arrive
	// whole within WriteTimeout, and its answer leave within WriteTimeout.
	AdminIdleTimeout time.Duration
	// MaxSessionsPerConnection bounds the sessions of one connection; default
	// DefaultServerMaxSessions (256), negative means unlimited (AMQP's 65,536). A session
	// beyond it is begun and ended at once with amqp:resource-limit-exceeded. The SDK
	// uses about two sessions per sender or receiver.
	MaxSessionsPerConnection int
	// MaxLinksPerSession bounds the links of one session; default
	// DefaultServerMaxLinks (32), negative means unlimited (AMQP's 65,536). A link beyond
	// it is refused (attached and detached at once) with amqp:resource-limit-exceeded. A
	// refused link, whatever the reason, keeps only its handle number (a bit) until the
	// client detaches it. The SDK uses at most two links per session.
	MaxLinksPerSession int
	// WriteTimeout is how long the server waits for a client that reads nothing while
	// the server has frames for it before closing the connection; default
	// DefaultServerWriteTimeout (30 s), negative means none. While its frames are backed
	// up (more than 1 MiB queued), the server reads nothing more from that connection and
	// sends it no more deliveries.
	WriteTimeout time.Duration
	// AdminHTTPAddr, when not empty, is a second TCP address that serves the
	// administration API and GET /health in plain HTTP, as Microsoft's Service Bus
	// emulator serves them on port 5300 (its samples and SDK administration clients
	// configured for it use http://HOST:5300/); port 0 picks a free one
	// (Server.AdminHTTPURL reports it). A TLS handshake on it is answered as on Addr. It
	// also serves AMQP over WebSockets (ws://) and the HTTP data plane, as Addr does over
	// TLS (see the package documentation), and the explorer, a web page at / that shows
	// the entities, their counts and messages and sends, re-drives, purges and deletes
	// messages as a client would (sbtest/internal/explorer), as open as the
	// administration API.
	// Its connections count against MaxConnections and the same timeouts. Default: none,
	// the administration API is served on Addr only, over TLS.
	AdminHTTPAddr string
	// DisableExplorer leaves the explorer page out of the AdminHTTPAddr listener, which
	// then serves the administration API and GET /health only. Default false.
	DisableExplorer bool
	// AdvertisedHost is the host name or IP address clients reach the server at:
	// ConnectionString names it, and the administration certificate is valid for it
	// (besides localhost and the loopback addresses). Default: the listener's IP
	// address, or 127.0.0.1 when it listens on every interface ("0.0.0.0", "[::]",
	// ":5672"), since those are not addresses to connect to. A value with a port or
	// characters no host name has is ErrInvalidOptions.
	AdvertisedHost string
	// SASKeys, when not empty, turns on shared access signature authorization, as the
	// service checks it: key names and their keys (a namespace's shared access
	// policies). An AMQP client must put a token signed with one of them on $cbs for an
	// entity before it attaches a link to it (else amqp:unauthorized-access, and 401 on
	// $cbs for a token with a wrong signature, key name, expiry or resource), and each
	// administration request needs one in its Authorization header (else 401); GET
	// /health needs none. A link is detached with amqp:unauthorized-access once the last
	// token that covers its entity expires (the SDKs put a new one before), as the
	// service drops them. ConnectionString then names the first key in the order of
	// names. Default: none, every token is accepted and the administration API is open,
	// as Microsoft's emulator is.
	SASKeys map[string]string
	// Logger receives connection, link and error events (never message payloads);
	// default discards.
	Logger *slog.Logger
}

// Server is an in-process Azure Service Bus emulator that speaks AMQP 1.0 on a TCP socket
// (and the administration API over HTTPS on the same port), as httptest.Server does for
// HTTP: the unmodified SDKs connect with ConnectionString and talk to the entities of a
// Namespace. What it emulates, what it does not and how faults reach the client are in
// the package documentation ("On the wire"); what a client can make it hold is bounded
// by ServerOptions. All methods are safe for concurrent use.
type Server struct {
	ns *Namespace
	w  *wire.Server // the server, which sees ns through the adapters of seam.go
}

// NewServer creates the entities of opts in the namespace, listens on opts.Addr and
// starts serving. nil options mean defaults. It returns ErrInvalidOptions (wrapped) for a
// MaxFrameSize below 512, the namespace's error for an entity it cannot create
// (ErrExists, ErrInvalidOptions), or the listener's error. Stop the server with Close.
func NewServer(opts *ServerOptions) (*Server, error) { return newServer(opts, nil) }

// NewTestServer returns NewServer(opts) for the test tb, failing it when the server
// cannot start, and closes the server when the test ends (tb.Cleanup, so after the
// cleanups registered later, such as a client's): a Close that fails or takes longer
// than a minute fails the test.
func NewTestServer(tb testing.TB, opts *ServerOptions) *Server {
	tb.Helper()
	srv, err := NewServer(opts)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := srv.Close(ctx); err != nil {
			tb.Errorf("sbtest: closing the test server: %v", err)
		}
	})
	return srv
}

// newServer is NewServer serving on ln when it is not nil (a test's).
func newServer(opts *ServerOptions, ln net.Listener) (*Server, error) {
	var o ServerOptions
	if opts != nil {
		o = *opts
	}
	wo := wireOptions(o, ln)
	if err := wo.Check(); err != nil {
		return nil, err
	}
	ns := o.Namespace
	if ns == nil {
		ns = NewNamespace(o.NamespaceOptions)
	}
	if err := ns.declare(o.Queues, o.Topics); err != nil {
		return nil, fmt.Errorf("sbtest: NewServer: %w", err)
	}
	wo.Broker, wo.Admin = wireBroker{ns}, adminModel{ns}
	if !o.DisableExplorer {
		wo.Explorer = explorerModel{adminModel{ns}}
	}
	w, err := wire.New(wo)
	if err != nil {
		return nil, err
	}
	return &Server{ns: ns, w: w}, nil
}

// Namespace returns the namespace the server serves, for inspection, fault injection and
// the latency model.
func (s *Server) Namespace() *Namespace { return s.ns }

// ConnectionString returns a Service Bus connection string for the server that the
// unmodified SDK accepts: Endpoint=sb://HOST:PORT;SharedAccessKeyName=sbtest;
// SharedAccessKey=sbtest;UseDevelopmentEmulator=true, with HOST the advertised host
// (ServerOptions.AdvertisedHost; by default the listener's IP, 127.0.0.1 on every
// interface) and PORT the listener's (the emulator flag makes the SDK use plain TCP).
//
// With ServerOptions.SASKeys, it names the first key in the order of names and its key.
func (s *Server) ConnectionString() string { return s.w.ConnectionString() }

// Addr returns the address the server listens on.
func (s *Server) Addr() net.Addr { return s.w.Addr() }

// AdminHTTPURL returns the base URL of the plain-HTTP administration API
// (ServerOptions.AdminHTTPAddr) with the advertised host and the listener's port,
// http://HOST:PORT, or "" when the server has none. GET AdminHTTPURL()+"/health"
// answers 200 while the server serves.
func (s *Server) AdminHTTPURL() string { return s.w.AdminHTTPURL() }

// AdminClientOptions returns the options that let the unmodified SDK admin client talk
// to the server's administration API:
//
//	ac, err := admin.NewClientFromConnectionString(srv.ConnectionString(), srv.AdminClientOptions())
//
// Its only setting is an HTTP transport that trusts the server's self-signed
// certificate (generated when the server starts). Each call returns a new transport;
// its idle connections close when the server closes.
func (s *Server) AdminClientOptions() *admin.ClientOptions { return s.w.AdminClientOptions() }

// CertificatePEM returns the server's self-signed TLS certificate in PEM, generated when
// the server starts, for clients to trust: clients speaking AMQP over TLS (the SDKs
// without emulator support, given a connection string without UseDevelopmentEmulator)
// and the administration API's. How each language trusts it: SSL_CERT_FILE (OpenSSL:
// Python's uamqp), NODE_EXTRA_CA_CERTS (Node.js), REQUESTS_CA_BUNDLE (Python's admin
// client), curl --cacert, a Java trust store (keytool -importcert), the OS store (.NET),
// or a tls.Config's RootCAs in Go (with ServerName set to the host: go-amqp would name
// the server host:port).
func (s *Server) CertificatePEM() []byte { return s.w.CertificatePEM() }

// AdminHTTPClient returns an *http.Client that trusts the server's certificate, for
// talking to the administration API at https://ADDR/ with other tools.
func (s *Server) AdminHTTPClient() *http.Client { return s.w.AdminHTTPClient() }

// WebSocketClientOptions returns client options that make the unmodified SDK tunnel AMQP
// through a WebSocket to the server (ClientOptions.NewWebSocketConn, as in the SDK's
// example ExampleNewClient_usingWebsocketsAndProxies): over TLS to the URL the SDK
// builds from the connection string, wss://HOST:PORT/$servicebus/websocket, trusting the
// server's certificate.
//
//	client, err := azservicebus.NewClientFromConnectionString(srv.ConnectionString(), srv.WebSocketClientOptions())
//
// Each call returns new options; the tunnels end when the client or the server closes.
func (s *Server) WebSocketClientOptions() *azservicebus.ClientOptions {
	return s.w.WebSocketClientOptions()
}

// Close stops listening, closes every connection and waits until every goroutine of the
// server has returned, or until ctx ends: then it returns ctx.Err() and the goroutines
// finish in the background. The locks the connections' receivers hold are kept until
// they expire, as on the service. Safe to call twice; later calls wait again and return
// nil once everything has stopped.
func (s *Server) Close(ctx context.Context) error { return s.w.Close(ctx) }

// wireOptions is o as the wire server takes it, serving on ln when it is not nil.
// Namespace, NamespaceOptions, Queues, Topics and DisableExplorer are the model's, which
// newServer applies (TestWireOptionsCopyEveryServerOption).
func wireOptions(o ServerOptions, ln net.Listener) wire.Options {
	return wire.Options{
		Listener:                 ln,
		Addr:                     o.Addr,
		MaxFrameSize:             o.MaxFrameSize,
		MaxConnections:           o.MaxConnections,
		MaxHandshakes:            o.MaxHandshakes,
		HandshakeTimeout:         o.HandshakeTimeout,
		AdminIdleTimeout:         o.AdminIdleTimeout,
		MaxSessionsPerConnection: o.MaxSessionsPerConnection,
		MaxLinksPerSession:       o.MaxLinksPerSession,
		WriteTimeout:             o.WriteTimeout,
		AdminHTTPAddr:            o.AdminHTTPAddr,
		AdvertisedHost:           o.AdvertisedHost,
		SASKeys:                  o.SASKeys,
		Logger:                   o.Logger,
		AcceptNextSessionTimeout: DefaultAcceptNextSessionTimeout,
	}
}
