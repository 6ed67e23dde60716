package sbtest

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sbkit/sbkit/sbtest/internal/amqp"
)

// DefaultServerMaxFrameSize is the largest AMQP frame a Server accepts unless
// ServerOptions.MaxFrameSize says otherwise: 64 KiB, the size the SDK (go-amqp) also
// announces for the frames it accepts. Larger messages travel as multi-frame transfers.
const DefaultServerMaxFrameSize = 65536

// minServerMaxFrameSize is the smallest frame size AMQP allows a peer to announce.
const minServerMaxFrameSize = 512

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

// maxWriteBuffer bounds the frames queued for one connection: beyond it the server stops
// reading from that connection (and deliveries wait) until the client reads.
const maxWriteBuffer = 1 << 20

// ServerOptions configures a Server. The zero value (and nil) means a new empty namespace
// with default options on 127.0.0.1 with a free port.
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
	// (HTTPS) alike, once their handshake is done; default DefaultServerMaxConnections
	// (64), negative means unlimited. An AMQP connection beyond it is opened and closed
	// at once with amqp:resource-limit-exceeded, which the SDK reports without retrying
	// (the service rejects connections beyond its quota the same way); an HTTPS one is
	// closed once its TLS handshake is done and its first bytes are read.
	MaxConnections int
	// MaxHandshakes bounds the connections in their handshake (the first byte, TLS and
	// the first bytes inside it, the AMQP protocol header, SASL and open exchange), which
	// do not count against MaxConnections; default DefaultServerMaxHandshakes (64), negative means unlimited.
	// A connection beyond it closes the one that has waited longest, so sockets that
	// never finish their handshake cannot lock a healthy client out.
	MaxHandshakes int
	// HandshakeTimeout bounds a connection's handshake, after which it is closed; default
	// DefaultServerHandshakeTimeout (10 s). An administration connection must also send
	// each request's header within it.
	HandshakeTimeout time.Duration
	// AdminIdleTimeout is how long an administration (HTTPS) connection may stay idle
	// between requests before the server closes it; default
	// DefaultServerAdminIdleTimeout (60 s). A request must arrive whole within
	// WriteTimeout, and its answer leave within WriteTimeout.
	AdminIdleTimeout time.Duration
	// MaxSessionsPerConnection bounds the sessions of one connection; default
	// DefaultServerMaxSessions (256), negative means the protocol's 65,536. A session
	// beyond it is begun and ended at once with amqp:resource-limit-exceeded. The SDK
	// uses about two sessions per sender or receiver.
	MaxSessionsPerConnection int
	// MaxLinksPerSession bounds the links of one session; default
	// DefaultServerMaxLinks (32), negative means 65,536. A link beyond it is refused
	// (attached and detached at once) with amqp:resource-limit-exceeded. A refused link,
	// whatever the reason, keeps only its handle number (a bit) until the client detaches
	// it. The SDK uses at most two links per session.
	MaxLinksPerSession int
	// WriteTimeout is how long the server waits for a client that reads nothing while
	// the server has frames for it before closing the connection; default
	// DefaultServerWriteTimeout (30 s). While its frames are backed up (more than 1 MiB
	// queued), the server reads nothing more from that connection and sends it no more
	// deliveries.
	WriteTimeout time.Duration
	// AdminHTTPAddr, when not empty, is a second TCP address that serves the
	// administration API and GET /health in plain HTTP, as Microsoft's Service Bus
	// emulator serves them on port 5300 (its samples and SDK administration clients
	// configured for it use http://HOST:5300/); port 0 picks a free one
	// (Server.AdminHTTPURL reports it). A TLS handshake on it is answered as on Addr.
	// Its connections count against MaxConnections and the same timeouts. Default: none,
	// the administration API is served on Addr only, over TLS.
	AdminHTTPAddr string
	// AdvertisedHost is the host name or IP address clients reach the server at:
	// ConnectionString names it, and the administration certificate is valid for it
	// (besides localhost and the loopback addresses). Default: the listener's IP
	// address, or 127.0.0.1 when it listens on every interface ("0.0.0.0", "[::]",
	// ":5672"), since those are not addresses to connect to. A value with a port or
	// characters no host name has is ErrInvalidOptions.
	AdvertisedHost string
	// Logger receives connection, link and error events (never message payloads);
	// default discards.
	Logger *slog.Logger
}

// Server is an in-process Azure Service Bus emulator that speaks AMQP 1.0 on a TCP socket,
// like httptest.Server does for HTTP: the unmodified azservicebus client connects to it
// with ConnectionString and talks to the entities of a sbtest Namespace, the same model
// (semantics, faults, latency, inspection) that sbtest offers in memory.
//
// What the wire emulates: SASL ANONYMOUS (credentials are ignored; the $cbs put-token
// exchange succeeds for any entity that exists and answers 404 for one that does not,
// as the service does, so the SDK reports CodeNotFound), connections, sessions, links, multi-frame transfers, flow
// control (link credit, drain, session windows), sending single messages and batches,
// receiving in peek-lock and receive-and-delete modes from queues, subscriptions and
// their dead-letter queues, settlement by disposition (complete, abandon, defer,
// dead-letter, release), lock tokens as delivery tags, and the $management operations
// renew-lock, peek-message, schedule-message, cancel-scheduled-message,
// receive-by-sequence-number and update-disposition. Service Bus sessions: the SDK's
// AcceptSession* and AcceptNextSession* (a receive link with the session filter; the
// server echoes the accepted session id and its lock expiry, and waits for the next
// available session up to the link's com.microsoft:timeout, then refuses with
// com.microsoft:timeout, which the SDK reports as CodeTimeout), SessionReceiver
// receive, settle, peek and receive-deferred, and the $management operations
// renew-session-lock, get-session-state and set-session-state, matched to the session
// by the request's associated-link-name. A session the broker lost is, for the SDK, a
// link to recover: it re-accepts the session by id, so a call after a lost session lock
// either succeeds on the re-accepted session or fails with
// com.microsoft:session-cannot-be-locked when another receiver took it.
//
// TLS: the port also serves AMQP over TLS ("amqps", AMQP 1.0 part 5.2) and the
// administration API over HTTPS, with a self-signed certificate generated at start
// (CertificatePEM); after the TLS handshake the client's first bytes tell AMQP from HTTP.
// So an SDK without emulator support (which speaks only TLS) connects with
// ConnectionString minus UseDevelopmentEmulator=true, trusting the certificate.
//
// The administration API (the ATOM/XML REST API of the SDK's admin client): build the
// admin client from ConnectionString with AdminClientOptions. It creates, gets, updates, lists and
// deletes queues, topics, subscriptions and rules, and reports runtime properties; which
// properties are modelled and which only reported back is listed in
// server_admin_props.go. An empty server plus an admin client is a complete workflow.
// GET /health answers 200 {"status":"healthy"}. With ServerOptions.AdminHTTPAddr both
// are also served in plain HTTP on a second port, as Microsoft's emulator serves them
// on port 5300, for the clients and samples written for it (wire_endpoint.go).
//
// What it does not: AMQP over web sockets (the SDKs' proxy and port-443 transport),
// authorization
// (any token is accepted, on both protocols), the AMQP rule operations (use the admin API
// or the model), transactions, and the other $management operations (answered with
// status 501).
// Messages keep what the SDK's Message cannot carry (a value or sequence body, several
// data sections, message and delivery annotations, footer, priority, a message-id or
// correlation-id that is not a string, user-id, content-encoding, group-sequence) and
// are delivered as sent, plus the broker's annotations (SDK live
// tests TestSender_SendAMQPMessageWith*); in memory they appear in
// ReceivedMessage.RawAMQPMessage. A peek-lock delivery carries its lock token both as the
// delivery tag and as the x-opt-lock-token delivery annotation.
//
// Locks outlive their link as on the service and in sbtest's Receiver: when a receiver
// link detaches, a session ends or a connection drops, the locks it holds are kept until
// LockedUntil, renewed and settled by lock token through $management from any other
// link meanwhile, and the messages come back after that without their delivery counted
// (seeds 000 and 004). A session receiver's session and messages are released at once.
// Messages without a time-to-live (or with
// one above the 49.7 days a header ttl can carry) are sent without a header ttl, as the
// service does, so the SDK reports TimeToLive 0 and ExpiresAt equal to EnqueuedTime for
// them (sbkit.MessageExpiresAt reads that as unknown).
//
// Entities are looked up when a link attaches, so entities added to the Namespace after
// NewServer are reachable too; a link address may be the entity path or a URI
// (amqps://host[:port]/path), in any letter case (wire_address.go). An unsuccessful
// $management response names its error in the errorCondition application property, as
// the service does (com.microsoft:message-lock-lost, com.microsoft:session-lock-lost,
// com.microsoft:message-not-found, ...). Deleting an entity (DeleteQueue, DeleteTopic,
// DeleteSubscription, or the admin API) detaches the links attached to it with
// amqp:not-found, which the SDK reports without retrying; an entity created again with
// the same name is a new one, reached by new links.
//
// Frames on one session take effect in the order they arrived, while the latency
// model's waits of pipelined sends and settlements overlap: a transfer is stored (or
// refused with a reason) before a later detach, end or close takes effect and is
// answered, a settlement takes effect before a later detach releases the link's locks,
// and sequence numbers follow arrival order (Service Bus docs, "Message sequencing and
// timestamps": the sequence number is the true order of arrival). A pre-settled transfer
// or settlement is therefore applied even when the client detaches or closes right after
// it.
//
// Resources are bounded per client (ServerOptions): 64 connections, AMQP and
// administration alike, 256 sessions per connection and 32 links per session by
// default, each refused beyond its limit with amqp:resource-limit-exceeded, which the
// SDK reports without retrying; a refused link keeps only its handle number until the
// client detaches it; a receiving link runs a goroutine only while it has credit.
// Connections in their handshake do not count against MaxConnections: at most
// MaxHandshakes (64) wait at once, each at most HandshakeTimeout (10 s), a new one
// closing the one that has waited longest. A temporary accept error (EMFILE) is waited
// out. A credit of 1000 unanswered deliveries per sending link (the server grants more
// as it answers, so a slow entity pushes back on the client). At most about 1 MiB of
// frames is queued per connection: while a client leaves more unread, the server reads
// nothing more from it and sends it no deliveries, and after WriteTimeout (30 s) it
// closes the connection; a disposition never costs more answers than the deliveries it
// settles plus one. An idle timeout of 60 s is announced (a client silent for 120 s is
// disconnected; the SDK sends heartbeats); an administration connection idle for
// AdminIdleTimeout (60 s) is closed. The administration API keeps nothing of a deleted
// entity, creates at most 10,000 queues and topics and 2,000 subscriptions per topic,
// and refuses the descriptions the service refuses (UserMetadata over 1,024
// characters, more than 12 authorization rules). What one message can cost is bounded
// in the model: its rules' evaluation (RuleEvaluationFailedReason) and its forwarded
// copies (NamespaceOptions.MaxForwardCopies).
//
// Faults injected into the namespace apply as in memory; the client sees them as the
// service would send them: CodeLockLost as com.microsoft:message-lock-lost (status 410 on
// $management), which the SDK reports as CodeLockLost; CodeUnauthorizedAccess and
// ErrMessageTooLarge as themselves; transient faults (TransientError) as
// com.microsoft:timeout (status 503 on $management), which the SDK retries by itself
// (ClientOptions.RetryOptions, 4 s apart by default) before it reports CodeTimeout. A
// settlement the SDK retries after such an answer is reported as successful (go-amqp
// considers the delivery settled), so test settlement failures with CodeLockLost faults.
// A Hang fault blocks until the link or connection closes, and with it the frames that
// arrived after it on the same session: the client's context bounds the client, not the
// server.
//
// Hostile input (malformed or oversize frames, protocol violations) closes the offending
// connection with an AMQP error; the server and its other connections keep working.
// All methods are safe for concurrent use.
type Server struct {
	ns       *Namespace
	ln       net.Listener
	log      *slog.Logger
	maxFrame uint32
	limits   serverLimits
	admin    *adminServer // the administration API on the same port (wire_https.go)
	host     string       // the advertised host (wire_endpoint.go)

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	connID atomic.Uint64

	mu         sync.Mutex
	conns      map[*srvConn]struct{}
	adminConns map[net.Conn]struct{} // administration connections served (wire_https.go)
	handshakes handshakes            // connections in their handshake (wire_limits.go)
	closed     bool
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

// newServer is NewServer serving on ln when it is not nil (a test's listener).
func newServer(opts *ServerOptions, ln net.Listener) (*Server, error) {
	var o ServerOptions
	if opts != nil {
		o = *opts
	}
	if o.Addr == "" {
		o.Addr = "127.0.0.1:0"
	}
	if o.MaxFrameSize == 0 {
		o.MaxFrameSize = DefaultServerMaxFrameSize
	}
	if o.MaxFrameSize < minServerMaxFrameSize {
		return nil, fmt.Errorf("%w: MaxFrameSize %d is below %d", ErrInvalidOptions, o.MaxFrameSize, minServerMaxFrameSize)
	}
	if err := checkAdvertisedHost(o.AdvertisedHost); err != nil {
		return nil, err
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	limits := resolveLimits(&o)
	ns := o.Namespace
	if ns == nil {
		ns = NewNamespace(o.NamespaceOptions)
	}
	if err := ns.declare(o.Queues, o.Topics); err != nil {
		return nil, fmt.Errorf("sbtest: NewServer: %w", err)
	}
	var err error
	if ln == nil {
		if ln, err = net.Listen("tcp", o.Addr); err != nil {
			return nil, fmt.Errorf("sbtest: server: %w", err)
		}
	}
	plain, err := listenAdminHTTP(o.AdminHTTPAddr)
	if err != nil {
		_ = ln.Close()
		return nil, err
	}
	s := &Server{
		ns:         ns,
		ln:         ln,
		host:       advertisedHost(o.AdvertisedHost, ln.Addr()),
		log:        o.Logger,
		maxFrame:   o.MaxFrameSize,
		limits:     limits,
		conns:      make(map[*srvConn]struct{}),
		adminConns: make(map[net.Conn]struct{}),
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	if s.admin, err = newAdminServer(s, plain); err != nil {
		_ = ln.Close()
		if plain != nil {
			_ = plain.Close()
		}
		return nil, err
	}
	s.wg.Add(1)
	go s.acceptLoop(ln, s.handle)
	s.log.Info("sbtest server listening", "addr", ln.Addr().String())
	return s, nil
}

// ConnectionString returns a Service Bus connection string for the server that the
// unmodified SDK accepts: Endpoint=sb://HOST:PORT;SharedAccessKeyName=sbtest;
// SharedAccessKey=sbtest;UseDevelopmentEmulator=true, with HOST the advertised host
// (ServerOptions.AdvertisedHost; by default the listener's IP, 127.0.0.1 on every
// interface) and PORT the listener's (the emulator flag makes the SDK use plain TCP).
func (s *Server) ConnectionString() string {
	return fmt.Sprintf("Endpoint=sb://%s;SharedAccessKeyName=sbtest;SharedAccessKey=sbtest;UseDevelopmentEmulator=true", s.endpoint(s.ln.Addr()))
}

// Addr returns the address the server listens on.
func (s *Server) Addr() net.Addr { return s.ln.Addr() }

// Namespace returns the namespace the server serves, for inspection, fault injection and
// the latency model.
func (s *Server) Namespace() *Namespace { return s.ns }

// Close stops listening, closes every connection and waits until every goroutine of the
// server has returned, or until ctx ends: then it returns ctx.Err() and the goroutines
// finish in the background. The locks the connections' receivers hold are kept until
// they expire, as on the service. Safe to call twice; later calls wait again and return
// nil once everything has stopped.
func (s *Server) Close(ctx context.Context) error {
	s.mu.Lock()
	first := !s.closed
	s.closed = true
	conns := make([]*srvConn, 0, len(s.conns))
	for c := range s.conns {
		conns = append(conns, c)
	}
	pending := s.handshakes.conns()
	s.mu.Unlock()

	var err error
	if first {
		err = s.ln.Close()
		s.cancel()
		s.admin.close()
		for _, c := range conns {
			c.abort()
		}
		for _, nc := range pending {
			_ = nc.Close()
		}
		if errors.Is(err, net.ErrClosed) {
			err = nil
		}
	}
	done := make(chan struct{})
	go func() {
		s.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-ctx.Done():
		return ctx.Err()
	}
	if first {
		s.log.Info("sbtest server closed")
	}
	return err
}

// acceptLoop accepts connections on ln until it closes and serves each with handle,
// which must call s.wg.Done when it returns. A temporary error (out of file
// descriptors, a connection aborted before it was accepted) is waited out, 5 ms doubling
// to 1 s, as net/http's Server.Serve does; any other error ends the loop.
func (s *Server) acceptLoop(ln net.Listener, handle func(net.Conn, *handshake)) {
	defer s.wg.Done()
	var delay time.Duration
	for {
		nc, err := ln.Accept()
		if err != nil {
			if s.ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return
			}
			var te interface{ Temporary() bool }
			if !errors.As(err, &te) || !te.Temporary() {
				s.log.Error("sbtest server accept failed, no longer accepting", "err", err)
				return
			}
			delay = min(max(2*delay, 5*time.Millisecond), time.Second)
			s.log.Warn("sbtest server accept failed, retrying", "err", err, "delay", delay)
			select {
			case <-time.After(delay):
			case <-s.ctx.Done():
				return
			}
			continue
		}
		delay = 0
		hs, ok := s.startHandshake(nc)
		if !ok {
			_ = nc.Close()
			return
		}
		s.wg.Add(1)
		go handle(nc, hs)
	}
}

// handle serves a new connection: the first byte tells TLS (AMQP or the administration
// API inside, serveTLS) from plain AMQP; the handshake of either must end by
// HandshakeTimeout, and counts against MaxHandshakes until then.
func (s *Server) handle(nc net.Conn, hs *handshake) {
	defer s.wg.Done()
	defer s.endHandshake(hs)
	deadline := time.Now().Add(s.limits.handshakeTimeout)
	pc, isTLS := peekFirst(nc, deadline)
	switch {
	case pc == nil:
		_ = nc.Close()
	case isTLS:
		s.serveTLS(pc, deadline, hs)
	default:
		s.serveConn(pc, deadline, hs)
	}
}

// serveConn runs an AMQP connection: its handshake hs by deadline, then, unless
// MaxConnections are served already, until it ends.
func (s *Server) serveConn(nc net.Conn, deadline time.Time, hs *handshake) {
	c := newSrvConn(s, nc)
	br := bufio.NewReaderSize(nc, 64*1024)
	admitted := false
	err := c.handshake(br, deadline, func() *amqp.Error {
		s.mu.Lock()
		defer s.mu.Unlock()
		switch {
		case s.closed:
			return protoError(condConnectionForced, "sbtest: server: closing")
		case !s.admitLocked():
			return s.refusal()
		}
		s.conns[c] = struct{}{}
		s.endHandshakeLocked(hs) // served: no longer one a new connection may close
		admitted = true
		return nil
	})
	if err == nil {
		c.serve(br)
	} else {
		c.log.Debug("handshake failed", "err", err)
		c.abort()
	}
	if admitted {
		s.mu.Lock()
		delete(s.conns, c)
		s.mu.Unlock()
	}
}
