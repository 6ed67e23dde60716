package wire

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	adminapi "github.com/sbkit/sbkit/sbtest/internal/admin"
	"github.com/sbkit/sbkit/sbtest/internal/amqp"
	"github.com/sbkit/sbkit/sbtest/internal/explorer"
	"github.com/sbkit/sbkit/sbtest/internal/modelerr"
)

// The defaults of Options' limits (sbtest.ServerOptions documents them; sbtest's
// DefaultServer... constants have the same values, TestServerDefaultsAreTheWires).
const (
	DefaultMaxFrameSize     = 65536
	DefaultMaxConnections   = 64
	DefaultMaxSessions      = 256
	DefaultMaxLinks         = 32
	DefaultWriteTimeout     = 30 * time.Second
	DefaultMaxHandshakes    = 64
	DefaultHandshakeTimeout = 10 * time.Second
	DefaultAdminIdleTimeout = 60 * time.Second
)

// minServerMaxFrameSize is the smallest frame size AMQP allows a peer to announce.
const minServerMaxFrameSize = 512

// maxWriteBuffer bounds the frames queued for one connection: beyond it the server stops
// reading from that connection (and deliveries wait) until the client reads.
const maxWriteBuffer = 1 << 20

// Options configures a Server: the model it serves and sbtest.ServerOptions' settings,
// which document them (zero means the default, a negative limit none).
type Options struct {
	// Broker is the model the server serves; required.
	Broker Broker
	// Admin is the model the administration API serves; required.
	Admin adminapi.Model
	// Explorer is the model the explorer page serves on the plain-HTTP listener; nil
	// leaves the explorer out (sbtest.ServerOptions.DisableExplorer).
	Explorer explorer.Model
	// AcceptNextSessionTimeout is how long a session link waits for the next available
	// session when the client names none and sets no timeout.
	AcceptNextSessionTimeout time.Duration
	// Listener, when not nil, is served instead of listening on Addr (a test's).
	Listener net.Listener

	Addr                     string
	MaxFrameSize             uint32
	MaxConnections           int
	MaxHandshakes            int
	HandshakeTimeout         time.Duration
	AdminIdleTimeout         time.Duration
	MaxSessionsPerConnection int
	MaxLinksPerSession       int
	WriteTimeout             time.Duration
	AdminHTTPAddr            string
	AdvertisedHost           string
	SASKeys                  map[string]string
	Logger                   *slog.Logger
}

// Check applies the defaults of Addr, MaxFrameSize and Logger and returns
// modelerr.ErrInvalidOptions (wrapped) for a MaxFrameSize below 512, an AdvertisedHost
// that is not a host name or IP address, or an AcceptNextSessionTimeout that is not
// positive. New calls it; sbtest calls it first, before
// it creates the entities, so that bad options change nothing.
func (o *Options) Check() error {
	if o.AcceptNextSessionTimeout <= 0 {
		return fmt.Errorf("%w: AcceptNextSessionTimeout %v is not positive", modelerr.ErrInvalidOptions, o.AcceptNextSessionTimeout)
	}
	if o.Addr == "" {
		o.Addr = "127.0.0.1:0"
	}
	if o.MaxFrameSize == 0 {
		o.MaxFrameSize = DefaultMaxFrameSize
	}
	if o.MaxFrameSize < minServerMaxFrameSize {
		return fmt.Errorf("%w: MaxFrameSize %d is below %d", modelerr.ErrInvalidOptions, o.MaxFrameSize, minServerMaxFrameSize)
	}
	if err := checkAdvertisedHost(o.AdvertisedHost); err != nil {
		return err
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return nil
}

// Server is the emulator's server: sbtest.Server is one, and documents it. All methods
// are safe for concurrent use.
type Server struct {
	broker   Broker
	ln       net.Listener
	log      *slog.Logger
	maxFrame uint32
	limits   serverLimits
	admin    *adminServer      // the administration API on the same port (https.go)
	host     string            // the advertised host (endpoint.go)
	sasKeys  map[string]string // Options.SASKeys, copied (sas.go)
	// acceptNext is Options.AcceptNextSessionTimeout.
	acceptNext time.Duration

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	connID atomic.Uint64

	mu         sync.Mutex
	conns      map[*srvConn]struct{}
	adminConns map[net.Conn]struct{} // administration connections served (https.go)
	handshakes handshakes            // connections in their handshake (limits.go)
	closed     bool
}

// New listens on o.Addr (or serves o.Listener) and starts serving. It returns Check's
// error, or the listener's. Stop the server with Close.
func New(o Options) (*Server, error) {
	if o.Broker == nil || o.Admin == nil {
		return nil, fmt.Errorf("%w: a server needs a Broker and an Admin", modelerr.ErrInvalidOptions)
	}
	if err := o.Check(); err != nil {
		return nil, err
	}
	limits := resolveLimits(&o)
	ln := o.Listener
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
		broker:     o.Broker,
		ln:         ln,
		host:       advertisedHost(o.AdvertisedHost, ln.Addr()),
		log:        o.Logger,
		maxFrame:   o.MaxFrameSize,
		limits:     limits,
		sasKeys:    maps.Clone(o.SASKeys),
		acceptNext: o.AcceptNextSessionTimeout,
		conns:      make(map[*srvConn]struct{}),
		adminConns: make(map[net.Conn]struct{}),
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	if s.admin, err = newAdminServer(s, plain, o.Admin, o.Explorer); err != nil {
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

// ConnectionString is sbtest.Server.ConnectionString, which documents it.
func (s *Server) ConnectionString() string {
	name, key := "sbtest", "sbtest"
	if len(s.sasKeys) > 0 {
		name = slices.Sorted(maps.Keys(s.sasKeys))[0]
		key = s.sasKeys[name]
	}
	return fmt.Sprintf("Endpoint=sb://%s;SharedAccessKeyName=%s;SharedAccessKey=%s;UseDevelopmentEmulator=true", s.endpoint(s.ln.Addr()), name, key)
}

// Addr is sbtest.Server.Addr, which documents it.
func (s *Server) Addr() net.Addr { return s.ln.Addr() }

// Close is sbtest.Server.Close, which documents it.
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

// handle serves a new connection of the AMQP port: TLS (AMQP or the administration API
// inside), or plain AMQP.
func (s *Server) handle(nc net.Conn, hs *handshake) { s.serveByFirstByte(nc, hs, s.serveConn) }

// serveByFirstByte serves a new connection: its first byte tells a TLS handshake (AMQP or
// the administration API inside, serveTLS) from what the listener serves in the clear
// (plain). The handshake of either must end by HandshakeTimeout, and counts against
// MaxHandshakes until then.
func (s *Server) serveByFirstByte(nc net.Conn, hs *handshake, plain func(net.Conn, time.Time, *handshake)) {
	defer s.wg.Done()
	defer s.endHandshake(hs)
	deadline := time.Now().Add(s.limits.handshakeTimeout)
	pc, isTLS := peekFirst(nc, deadline)
	if pc != nil {
		s.progressed(hs, handshakeStarted)
	}
	switch {
	case pc == nil:
		_ = nc.Close()
	case isTLS:
		s.serveTLS(pc, deadline, hs)
	default:
		plain(pc, deadline, hs)
	}
}

// serveConn runs an AMQP connection: its handshake hs by deadline, then, unless
// MaxConnections are served already, until it ends.
func (s *Server) serveConn(nc net.Conn, deadline time.Time, hs *handshake) {
	c := newSrvConn(s, nc)
	br := bufio.NewReaderSize(nc, 64*1024)
	_ = nc.SetReadDeadline(deadline)
	if head, err := br.Peek(len(amqpHeaderPrefix)); err == nil && string(head) == amqpHeaderPrefix {
		s.progressed(hs, handshakeProtocol)
	}
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
