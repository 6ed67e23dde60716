package sbtest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
)

// DefaultServerMaxFrameSize is the largest AMQP frame a Server accepts unless
// ServerOptions.MaxFrameSize says otherwise: 64 KiB, the size the SDK (go-amqp) also
// announces for the frames it accepts. Larger messages travel as multi-frame transfers.
const DefaultServerMaxFrameSize = 65536

// minServerMaxFrameSize is the smallest frame size AMQP allows a peer to announce.
const minServerMaxFrameSize = 512

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
	Topics map[string]ServerTopic
	// MaxFrameSize is the largest AMQP frame the server accepts and announces in its open
	// frame; default DefaultServerMaxFrameSize (64 KiB), minimum 512. The SDK announces
	// 64 KiB for the frames it accepts, and the server never sends larger ones.
	MaxFrameSize uint32
	// Logger receives connection, link and error events (never message payloads);
	// default discards.
	Logger *slog.Logger
}

// ServerTopic declares a topic and its subscriptions for ServerOptions.Topics.
type ServerTopic struct {
	// Options are the topic's options; nil means defaults.
	Options *EntityOptions
	// Subscriptions maps subscription names to their options (nil means defaults).
	Subscriptions map[string]*EntityOptions
}

// Server is an in-process Azure Service Bus emulator that speaks AMQP 1.0 on a TCP socket,
// like httptest.Server does for HTTP: the unmodified azservicebus client connects to it
// with ConnectionString and talks to the entities of a sbtest Namespace, the same model
// (semantics, faults, latency, inspection) that sbtest offers in memory.
//
// What the wire emulates: SASL ANONYMOUS (credentials are ignored; the $cbs put-token
// exchange always succeeds), connections, sessions, links, multi-frame transfers, flow
// control (link credit, drain, session windows), sending single messages and batches,
// receiving in peek-lock and receive-and-delete modes from queues, subscriptions and
// their dead-letter queues, settlement by disposition (complete, abandon, defer,
// dead-letter, release), lock tokens as delivery tags, and the $management operations
// renew-lock, peek-message, schedule-message, cancel-scheduled-message,
// receive-by-sequence-number and update-disposition.
//
// What it does not: TLS and web sockets (plain TCP on loopback), authorization (any
// token is accepted), sessions (a receiver link asking for a session is refused with
// amqp:not-implemented), rules and filters (every subscription gets every message),
// transactions, and the other $management operations (answered with status 501).
// Messages with an AMQP value or sequence body are refused: the model stores byte bodies.
//
// Locks follow the connection as in sbtest's Receiver: a receiver link that detaches, a
// session that ends or a connection that drops releases the locks it holds (the messages
// come back without their delivery counted). Messages without a time-to-live (or with
// one above the 49.7 days a header ttl can carry) are sent without a header ttl, as the
// service does, so the SDK reports TimeToLive 0 and ExpiresAt equal to EnqueuedTime for
// them (sbkit.MessageExpiresAt reads that as unknown).
//
// Entities are looked up when a link attaches, so entities added to the Namespace after
// NewServer are reachable too. Limits per connection: 4096 sessions, 1024 links per
// session, a credit of 1000 unanswered deliveries per sending link (the server grants
// more as it answers, so a slow entity pushes back on the client), and an idle timeout of
// 60 s announced (a client silent for 120 s is disconnected; the SDK sends heartbeats).
//
// Faults injected into the namespace apply as in memory; the client sees them as the
// service would send them: CodeLockLost as com.microsoft:message-lock-lost (status 410 on
// $management), which the SDK reports as CodeLockLost; CodeUnauthorizedAccess and
// ErrMessageTooLarge as themselves; transient faults (TransientError) as
// com.microsoft:timeout (status 503 on $management), which the SDK retries by itself
// (ClientOptions.RetryOptions, 4 s apart by default) before it reports CodeTimeout. A
// settlement the SDK retries after such an answer is reported as successful (go-amqp
// considers the delivery settled), so test settlement failures with CodeLockLost faults.
// A Hang fault blocks until the link or connection closes: the client's context bounds
// the client, not the server.
//
// Hostile input (malformed or oversize frames, protocol violations) closes the offending
// connection with an AMQP error; the server and its other connections keep working.
// All methods are safe for concurrent use.
type Server struct {
	ns       *Namespace
	ln       net.Listener
	log      *slog.Logger
	maxFrame uint32

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	connID atomic.Uint64

	mu     sync.Mutex
	conns  map[*srvConn]struct{}
	closed bool
}

// NewServer creates the entities of opts in the namespace, listens on opts.Addr and
// starts serving. nil options mean defaults. It returns ErrInvalidOptions (wrapped) for a
// MaxFrameSize below 512, the namespace's error for an entity it cannot create
// (ErrExists, ErrInvalidOptions), or the listener's error. Stop the server with Close.
func NewServer(opts *ServerOptions) (*Server, error) {
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
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	ns := o.Namespace
	if ns == nil {
		ns = NewNamespace(o.NamespaceOptions)
	}
	if err := declareEntities(ns, o.Queues, o.Topics); err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", o.Addr)
	if err != nil {
		return nil, fmt.Errorf("sbtest: server: %w", err)
	}
	s := &Server{
		ns:       ns,
		ln:       ln,
		log:      o.Logger,
		maxFrame: o.MaxFrameSize,
		conns:    make(map[*srvConn]struct{}),
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.wg.Add(1)
	go s.acceptLoop()
	s.log.Info("sbtest server listening", "addr", ln.Addr().String())
	return s, nil
}

func declareEntities(ns *Namespace, queues map[string]*EntityOptions, topics map[string]ServerTopic) error {
	for name, qo := range queues {
		if _, err := ns.NewQueue(name, qo); err != nil {
			return err
		}
	}
	for name, st := range topics {
		t, err := ns.NewTopic(name, st.Options)
		if err != nil {
			return err
		}
		for sub, so := range st.Subscriptions {
			if _, err := t.NewSubscription(sub, so); err != nil {
				return err
			}
		}
	}
	return nil
}

// ConnectionString returns a Service Bus connection string for the server that the
// unmodified SDK accepts: Endpoint=sb://127.0.0.1:PORT;SharedAccessKeyName=sbtest;
// SharedAccessKey=sbtest;UseDevelopmentEmulator=true (the emulator flag makes the SDK use
// plain TCP).
func (s *Server) ConnectionString() string {
	return fmt.Sprintf("Endpoint=sb://%s;SharedAccessKeyName=sbtest;SharedAccessKey=sbtest;UseDevelopmentEmulator=true", s.ln.Addr().String())
}

// Addr returns the address the server listens on.
func (s *Server) Addr() net.Addr { return s.ln.Addr() }

// Namespace returns the namespace the server serves, for inspection, fault injection and
// the latency model.
func (s *Server) Namespace() *Namespace { return s.ns }

// Close stops listening, closes every connection (releasing the locks their receivers
// hold) and waits until every goroutine of the server has returned. Safe to call twice;
// later calls return nil.
func (s *Server) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	conns := make([]*srvConn, 0, len(s.conns))
	for c := range s.conns {
		conns = append(conns, c)
	}
	s.mu.Unlock()

	err := s.ln.Close()
	s.cancel()
	for _, c := range conns {
		c.abort()
	}
	s.wg.Wait()
	s.log.Info("sbtest server closed")
	if errors.Is(err, net.ErrClosed) {
		err = nil
	}
	return err
}

func (s *Server) acceptLoop() {
	defer s.wg.Done()
	for {
		nc, err := s.ln.Accept()
		if err != nil {
			if s.ctx.Err() == nil && !errors.Is(err, net.ErrClosed) {
				s.log.Error("sbtest server accept failed", "err", err)
			}
			return
		}
		c := newSrvConn(s, nc)
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			_ = nc.Close()
			continue
		}
		s.conns[c] = struct{}{}
		s.wg.Add(1)
		s.mu.Unlock()
		go func() {
			defer s.wg.Done()
			c.serve()
			s.mu.Lock()
			delete(s.conns, c)
			s.mu.Unlock()
		}()
	}
}
