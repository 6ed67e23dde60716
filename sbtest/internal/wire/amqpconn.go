package wire

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"runtime/debug"
	"sync"
	"time"

	"github.com/sbkit/sbkit/sbtest/internal/amqp"
	"golang.org/x/sync/semaphore"
)

// AMQP error conditions the server sends.
const (
	condDecodeError      amqp.Symbol = "amqp:decode-error"
	condFramingError     amqp.Symbol = "amqp:connection:framing-error"
	condConnectionForced amqp.Symbol = "amqp:connection:forced"
	condNotAllowed       amqp.Symbol = "amqp:not-allowed"
	condNotFound         amqp.Symbol = "amqp:not-found"
	condNotImplemented   amqp.Symbol = "amqp:not-implemented"
	condInternalError    amqp.Symbol = "amqp:internal-error"
	condInvalidField     amqp.Symbol = "amqp:invalid-field"
	condUnattachedHandle amqp.Symbol = "amqp:session:unattached-handle"
	condHandleInUse      amqp.Symbol = "amqp:session:handle-in-use"
	condUnauthorized     amqp.Symbol = "amqp:unauthorized-access"
	condDetachForced     amqp.Symbol = "amqp:link:detach-forced"
	condMessageTooLarge  amqp.Symbol = "amqp:link:message-size-exceeded"
	condLockLost         amqp.Symbol = "com.microsoft:message-lock-lost"
	condTimeout          amqp.Symbol = "com.microsoft:timeout"
	condDeadLetter       amqp.Symbol = "com.microsoft:dead-letter"
	condResourceLimit    amqp.Symbol = "amqp:resource-limit-exceeded"
	condTransferLimit    amqp.Symbol = "amqp:link:transfer-limit-exceeded"
)

const (
	// maxHeartbeat is the longest the server stays silent on a connection whose peer
	// announced no idle timeout.
	maxHeartbeat = 15 * time.Second
	// minHeartbeat bounds how often the server sends heartbeats, whatever idle timeout
	// the client announces.
	minHeartbeat = 50 * time.Millisecond
	// idleTimeout is the idle timeout the server announces: a client that sends nothing
	// (not even the empty frames AMQP uses as heartbeats) for twice as long is considered
	// gone and its connection is closed. The SDK sends a heartbeat every half of it.
	idleTimeout = 60 * time.Second
)

// heartbeatFrame is an empty AMQP frame: size 8, data offset 2, type 0, channel 0.
var heartbeatFrame = []byte{0, 0, 0, 8, 2, 0, 0, 0}

// protoError is a protocol violation: the connection is closed with an AMQP error.
func protoError(cond amqp.Symbol, format string, args ...any) *amqp.Error {
	return &amqp.Error{Condition: cond, Description: fmt.Sprintf(format, args...)}
}

// srvConn is one client connection. Its reader runs in serve; frames are written by a
// writer goroutine from a buffer that any goroutine appends encoded frames to, so writes
// are serialized and batched. Work that takes time (stores, settlements, management
// operations, receive loops) runs in goroutines counted by wg.
type srvConn struct {
	srv *Server
	id  uint64
	nc  net.Conn
	log *slog.Logger

	ctx    context.Context // cancelled when the connection goes down
	cancel context.CancelFunc
	wg     sync.WaitGroup

	peerMaxFrame uint32        // largest frame the client accepts
	peerIdle     time.Duration // client's idle timeout: send something at least this often
	// responses bounds the $management answers that carry messages being built and sent
	// at once (send.go, request): responseBudget bytes.
	responses *semaphore.Weighted

	wmu     sync.Mutex
	wbuf    []byte
	wsig    chan struct{} // buffered(1): wbuf has data
	wroom   chan struct{} // closed by the writer when it takes wbuf; nil when nobody waits
	wclosed bool

	mu       sync.Mutex
	sessions map[uint16]*srvSession
	replies  map[string]*responseLink // response links of $cbs/$management by target address
	rlinks   map[string]*receiverLink // receive links by name, for associated-link-name
	// authorities are the host:port of the client's token audiences by lower-case host
	// (echoAddress).
	authorities map[string]string
	// grants are the valid tokens the client put on $cbs (sas.go), when
	// ServerOptions.SASKeys turns authorization on.
	grants []sasGrant

	// ending holds the sessions the client ended whose end is not answered yet (their
	// earlier frames are still taking effect), guarded by mu.
	ending map[*srvSession]<-chan struct{}
}

func newSrvConn(s *Server, nc net.Conn) *srvConn {
	id := s.connID.Add(1)
	c := &srvConn{
		srv:          s,
		id:           id,
		nc:           nc,
		log:          s.log.With("conn", id),
		peerMaxFrame: minServerMaxFrameSize,
		wsig:         make(chan struct{}, 1),
		sessions:     make(map[uint16]*srvSession),
		ending:       make(map[*srvSession]<-chan struct{}),
		replies:      make(map[string]*responseLink),
		responses:    semaphore.NewWeighted(responseBudget),
	}
	c.ctx, c.cancel = context.WithCancel(s.ctx)
	return c
}

// abort tears the connection down from outside (Server.Close).
func (c *srvConn) abort() {
	c.cancel()
	_ = closeNow(c.nc)
}

// serve runs the connection, its handshake done (br holds what the client sent after
// it), until it ends, then releases everything it holds and waits for its goroutines.
func (c *srvConn) serve(br *bufio.Reader) {
	c.log.Debug("connection accepted", "remote", c.nc.RemoteAddr().String())
	c.wg.Add(1)
	go c.writeLoop()
	err := c.readLoop(br)
	// What the client sent before its close (or before the connection dropped) takes
	// effect, and is answered, before the close frame.
	c.closeSessions()
	var amqpErr *amqp.Error
	switch {
	case err == nil, errors.Is(err, errConnClosedByPeer):
		c.log.Debug("connection closed")
		c.writeFrame(0, &amqp.Close{}, nil)
	case errors.As(err, &amqpErr):
		c.log.Warn("connection closed with error", "condition", string(amqpErr.Condition), "description", amqpErr.Description)
		c.writeFrame(0, &amqp.Close{Error: amqpErr}, nil)
	case c.ctx.Err() != nil, errors.Is(err, io.EOF), errors.Is(err, net.ErrClosed), errors.Is(err, io.ErrUnexpectedEOF):
		c.log.Debug("connection dropped", "err", err)
	default:
		c.log.Warn("connection failed", "err", err)
	}
	c.shutdownWriter()
	c.cancel()
	c.wg.Wait()
	_ = c.nc.Close()
}

// goWork runs fn in a goroutine that the connection waits for when it ends. A panic in
// fn (a bug of the server, triggered by a client) is logged and ends this connection
// only.
func (c *srvConn) goWork(what string, fn func()) {
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		defer func() {
			if p := recover(); p != nil {
				c.log.Error("panic in "+what, "panic", p, "stack", string(debug.Stack()))
				c.abort()
			}
		}()
		fn()
	}()
}

// errConnClosedByPeer ends the read loop after the client's close frame was answered.
var errConnClosedByPeer = errors.New("sbtest: server: connection closed by the client")

// handshake performs the protocol header exchange, SASL ANONYMOUS and the open exchange
// by deadline. Between the client's open and the answer it asks admit, whose error (a
// limit) follows the answer in a close frame and is returned.
func (c *srvConn) handshake(br *bufio.Reader, deadline time.Time, admit func() *amqp.Error) error {
	_ = c.nc.SetDeadline(deadline)
	defer func() { _ = c.nc.SetDeadline(time.Time{}) }()

	hdr, err := amqp.ReadProtoHeader(br)
	if err == nil && string(hdr[:]) == amqp.ProtoHeaderSASL {
		if err := c.sasl(br); err != nil {
			return err
		}
		hdr, err = amqp.ReadProtoHeader(br)
	}
	if err != nil && !errors.Is(err, amqp.ErrMalformed) {
		return err
	}
	if string(hdr[:]) != amqp.ProtoHeaderAMQP {
		// Answer with the header we support, then close (part 2.2).
		_, _ = c.nc.Write([]byte(amqp.ProtoHeaderAMQP))
		return fmt.Errorf("sbtest: server: unsupported protocol header %q: %w", hdr[:], amqp.ErrMalformed)
	}
	if _, err := c.nc.Write([]byte(amqp.ProtoHeaderAMQP)); err != nil {
		return err
	}
	fr, err := amqp.ReadFrame(br, c.srv.maxFrame)
	if err != nil {
		return err
	}
	open, ok := fr.Body.(*amqp.Open)
	if !ok || fr.Type != amqp.FrameTypeAMQP {
		return protoError(condNotAllowed, "expected an open frame, got %T", fr.Body)
	}
	if open.MaxFrameSize != nil {
		c.peerMaxFrame = max(*open.MaxFrameSize, minServerMaxFrameSize)
	} else {
		c.peerMaxFrame = 1 << 31
	}
	if open.IdleTimeOut != nil && *open.IdleTimeOut > 0 {
		c.peerIdle = time.Duration(*open.IdleTimeOut) * time.Millisecond
	}
	reply := &amqp.Open{
		ContainerID:  fmt.Sprintf("sbtest-%d", c.id),
		MaxFrameSize: amqp.Ptr(c.srv.maxFrame),
		ChannelMax:   amqp.Ptr(c.srv.limits.channelMax()),
		IdleTimeOut:  amqp.Ptr(uint32(idleTimeout / time.Millisecond)),
	}
	b, err := amqp.AppendFrame(nil, amqp.Frame{Type: amqp.FrameTypeAMQP, Body: reply})
	if err != nil {
		return err
	}
	refusal := admit()
	if refusal != nil {
		if b, err = amqp.AppendFrame(b, amqp.Frame{Type: amqp.FrameTypeAMQP, Body: &amqp.Close{Error: refusal}}); err != nil {
			return err
		}
	}
	if _, err = c.nc.Write(b); err != nil {
		return err
	}
	if refusal != nil {
		return refusal
	}
	return nil
}

// sasl answers the SASL header and accepts whatever mechanism the client picks among the
// offered ones (ANONYMOUS); credentials are not checked.
func (c *srvConn) sasl(br *bufio.Reader) error {
	b := []byte(amqp.ProtoHeaderSASL)
	b, err := amqp.AppendFrame(b, amqp.Frame{Type: amqp.FrameTypeSASL, Body: &amqp.SASLMechanisms{
		Mechanisms: []amqp.Symbol{"ANONYMOUS", "MSSBCBS", "PLAIN"},
	}})
	if err != nil {
		return err
	}
	if _, err := c.nc.Write(b); err != nil {
		return err
	}
	fr, err := amqp.ReadFrame(br, minServerMaxFrameSize*16)
	if err != nil {
		return err
	}
	if _, ok := fr.Body.(*amqp.SASLInit); !ok || fr.Type != amqp.FrameTypeSASL {
		return protoError(condNotAllowed, "expected sasl-init, got %T", fr.Body)
	}
	b, err = amqp.AppendFrame(nil, amqp.Frame{Type: amqp.FrameTypeSASL, Body: &amqp.SASLOutcome{Code: amqp.SASLCodeOK}})
	if err != nil {
		return err
	}
	_, err = c.nc.Write(b)
	return err
}

// readLoop reads and dispatches frames until the connection ends. A returned [*amqp.Error]
// is sent to the client in a close frame.
func (c *srvConn) readLoop(br *bufio.Reader) error {
	var deadlineSet time.Time
	for {
		// Backpressure: a client that does not read our frames gets nothing more read,
		// so its connection's memory stays bounded; the writer closes the connection after
		// WriteTimeout. The idle deadline is set after the wait, which may be long.
		if !c.waitWritable(c.ctx) {
			if err := c.ctx.Err(); err != nil {
				return err
			}
			// The writer stopped (its client went away): nothing more is queued, and
			// what the client sent before still takes effect, until the read fails.
		}
		if now := time.Now(); now.Sub(deadlineSet) > time.Second {
			_ = c.nc.SetReadDeadline(now.Add(2 * idleTimeout))
			deadlineSet = now
		}
		fr, err := amqp.ReadFrame(br, c.srv.maxFrame)
		if err != nil {
			if c.ctx.Err() != nil {
				return c.ctx.Err()
			}
			var ne net.Error
			switch {
			case errors.As(err, &ne) && ne.Timeout():
				return protoError(condResourceLimit, "idle for more than %v", 2*idleTimeout)
			case errors.Is(err, amqp.ErrFrameTooLarge):
				return protoError(condFramingError, "frame larger than the negotiated %d bytes", c.srv.maxFrame)
			case errors.Is(err, amqp.ErrMalformed):
				return protoError(condDecodeError, "%v", err)
			}
			return err
		}
		if fr.Body == nil {
			continue // heartbeat
		}
		if fr.Type != amqp.FrameTypeAMQP {
			return protoError(condFramingError, "unexpected frame type %d after open", fr.Type)
		}
		if err := c.dispatch(fr); err != nil {
			return err
		}
	}
}

func (c *srvConn) dispatch(fr amqp.Frame) (err error) {
	defer func() {
		// A bug of the server must not take the process (the test binary) down with a
		// client's input: the connection ends with an internal error, the rest goes on.
		if p := recover(); p != nil {
			c.log.Error("panic while handling a frame", "frame", fmt.Sprintf("%T", fr.Body), "panic", p, "stack", string(debug.Stack()))
			err = protoError(condInternalError, "internal error handling %T", fr.Body)
		}
	}()
	switch body := fr.Body.(type) {
	case *amqp.Begin:
		return c.begin(fr.Channel, body)
	case *amqp.End:
		return c.end(fr.Channel, body)
	case *amqp.Close:
		if body.Error != nil {
			c.log.Debug("client closed with error", "condition", string(body.Error.Condition))
		}
		return errConnClosedByPeer // answered by serve once the sessions have ended
	case *amqp.Open:
		return protoError(condNotAllowed, "second open frame")
	case *amqp.Attach, *amqp.Flow, *amqp.Transfer, *amqp.Disposition, *amqp.Detach:
		s := c.session(fr.Channel)
		if s == nil {
			return protoError(condNotAllowed, "frame %T on channel %d, which has no session", fr.Body, fr.Channel)
		}
		if s.refused {
			return nil // sent before the client saw the refusal
		}
		return s.handle(fr)
	default:
		return protoError(condNotAllowed, "unexpected frame body %T", fr.Body)
	}
}

func (c *srvConn) session(ch uint16) *srvSession {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.sessions[ch]
}

// begin starts a session. The server answers on the same channel number as the client's.
func (c *srvConn) begin(ch uint16, b *amqp.Begin) error {
	if chMax := c.srv.limits.channelMax(); ch > chMax {
		return protoError(condNotAllowed, "channel %d above channel-max %d", ch, chMax)
	}
	if b.RemoteChannel != nil {
		return protoError(condNotAllowed, "begin with remote-channel %d: the server starts no sessions", *b.RemoteChannel)
	}
	c.mu.Lock()
	if c.sessions[ch] != nil {
		c.mu.Unlock()
		return protoError(condNotAllowed, "channel %d already has a session", ch)
	}
	s := newSrvSession(c, ch, b)
	// Beyond the limit the session is begun and ended at once with an error; it keeps
	// its channel (ignoring frames that crossed the end) until the client's end.
	s.refused = len(c.sessions) >= c.srv.limits.sessions
	c.sessions[ch] = s
	c.mu.Unlock()
	c.writeFrame(ch, &amqp.Begin{
		RemoteChannel:  amqp.Ptr(ch),
		NextOutgoingID: 0,
		IncomingWindow: sessionWindow,
		OutgoingWindow: sessionWindow,
		HandleMax:      amqp.Ptr(c.srv.limits.handleMax()),
	}, nil)
	if s.refused {
		c.log.Info("session refused", "channel", ch, "limit", c.srv.limits.sessions)
		c.writeFrame(ch, &amqp.End{Error: protoError(condResourceLimit,
			"sbtest: server: the connection has %d sessions (ServerOptions.MaxSessionsPerConnection)", c.srv.limits.sessions)}, nil)
	}
	return nil
}

// end ends a session at the client's request, detaching its links.
func (c *srvConn) end(ch uint16, e *amqp.End) error {
	c.mu.Lock()
	s := c.sessions[ch]
	delete(c.sessions, ch)
	c.mu.Unlock()
	if s == nil {
		// go-amqp sends End for a session it abandoned when the context of NewSession
		// ended, even when its Begin never left the client. There is nothing to end, and
		// answering would make the client drop the connection over an unknown channel.
		c.log.Debug("end on a channel with no session, ignored", "channel", ch)
		return nil
	}
	if e.Error != nil {
		c.log.Debug("client ended session with error", "channel", ch, "condition", string(e.Error.Condition))
	}
	var reply *amqp.End
	if !s.refused { // a refused session's end was sent with the refusal
		reply = &amqp.End{}
	}
	ended := s.close(reply)
	c.mu.Lock()
	defer c.mu.Unlock()
	for other, done := range c.ending {
		if chanClosed(done) {
			delete(c.ending, other)
		}
	}
	if !chanClosed(ended) {
		c.ending[s] = ended
	}
	return nil
}

// chanClosed reports whether ch is closed.
func chanClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// closeSessions closes every session when the connection goes down, and waits until
// every frame they received has taken effect: the waits before the effects end early,
// as the links stopped.
func (c *srvConn) closeSessions() {
	c.mu.Lock()
	ss := make([]*srvSession, 0, len(c.sessions))
	for _, s := range c.sessions {
		ss = append(ss, s)
	}
	c.sessions = map[uint16]*srvSession{}
	ended := make([]<-chan struct{}, 0, len(ss)+len(c.ending))
	for _, ch := range c.ending {
		ended = append(ended, ch)
	}
	c.mu.Unlock()
	for _, s := range ss {
		ended = append(ended, s.close(nil))
	}
	for _, ch := range ended {
		<-ch
	}
}

// registerReply makes l the link that receives responses addressed to addr.
func (c *srvConn) registerReply(addr string, l *responseLink) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.replies[addr] = l
}

func (c *srvConn) unregisterReply(addr string, l *responseLink) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.replies[addr] == l {
		delete(c.replies, addr)
	}
}

func (c *srvConn) replyLink(addr string) *responseLink {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.replies[addr]
}

// writeFrame encodes a frame and queues it for the writer. It reports false when the
// connection no longer writes. Encoding errors are bugs of the server; they are logged
// and the connection is aborted.
func (c *srvConn) writeFrame(ch uint16, body amqp.Performative, payload []byte) bool {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if c.wclosed {
		return false
	}
	n := len(c.wbuf)
	b, err := amqp.AppendFrame(c.wbuf, amqp.Frame{Type: amqp.FrameTypeAMQP, Channel: ch, Body: body, Payload: payload})
	if err != nil {
		c.wbuf = c.wbuf[:n]
		c.log.Error("encoding a frame failed", "frame", fmt.Sprintf("%T", body), "err", err)
		c.wclosed = true
		c.abort()
		return false
	}
	c.wbuf = b
	select {
	case c.wsig <- struct{}{}:
	default:
	}
	return true
}

// waitWritable waits until fewer than maxWriteBuffer bytes are queued for the client. It
// reports false when ctx ends or the connection no longer writes. Writers that can wait
// (the reader, deliveries, settlement answers) call it first, so what one connection
// queues stays near maxWriteBuffer however much its client sends without reading.
func (c *srvConn) waitWritable(ctx context.Context) bool {
	for {
		c.wmu.Lock()
		if c.wclosed {
			c.wmu.Unlock()
			return false
		}
		if len(c.wbuf) < maxWriteBuffer {
			c.wmu.Unlock()
			return true
		}
		if c.wroom == nil {
			c.wroom = make(chan struct{})
		}
		ch := c.wroom
		c.wmu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return false
		}
	}
}

// shutdownWriter stops accepting frames, lets the writer flush what is queued (a close
// frame, typically) and waits for it.
func (c *srvConn) shutdownWriter() {
	c.wmu.Lock()
	c.wclosed = true
	c.wmu.Unlock()
	select {
	case c.wsig <- struct{}{}:
	default:
	}
}

// writeLoop writes queued frames in batches and heartbeats when the connection is idle.
func (c *srvConn) writeLoop() {
	defer c.wg.Done()
	beat := maxHeartbeat
	if c.peerIdle > 0 {
		beat = max(min(beat, c.peerIdle/2), minHeartbeat)
	}
	ticker := time.NewTicker(beat)
	defer ticker.Stop()
	var spare []byte
	wrote := false
	for {
		var stop bool
		select {
		case <-c.wsig:
		case <-ticker.C:
			if !wrote {
				c.wmu.Lock()
				if len(c.wbuf) == 0 && !c.wclosed {
					c.wbuf = append(c.wbuf, heartbeatFrame...)
				}
				c.wmu.Unlock()
			}
			wrote = false
		case <-c.ctx.Done():
			stop = true
		}
		c.wmu.Lock()
		buf := c.wbuf
		c.wbuf = spare[:0]
		closed := c.wclosed
		if c.wroom != nil {
			close(c.wroom)
			c.wroom = nil
		}
		c.wmu.Unlock()
		if len(buf) > 0 {
			_ = c.nc.SetWriteDeadline(time.Now().Add(c.srv.limits.writeTimeout))
			if _, err := c.nc.Write(buf); err != nil {
				c.log.Debug("write failed", "err", err)
				c.wmu.Lock()
				c.wclosed = true
				if c.wroom != nil {
					close(c.wroom)
					c.wroom = nil
				}
				c.wmu.Unlock()
				if ne := net.Error(nil); errors.As(err, &ne) && ne.Timeout() {
					c.abort() // a client that does not read loses its connection (WriteTimeout)
					return
				}
				// A client that closed its end may have sent frames still unread: they take
				// effect, the reader going on until the close frame or the stream's end.
				// AMQP 1.0 part 2 section 2.4.3 "Closing A Connection": a peer continues to read until it receives the partner's close frame.
				return
			}
			wrote = true
		}
		spare = buf
		// Once closed, nothing more is queued (writeFrame and the heartbeat check
		// wclosed under wmu): what was taken with closed set is the last of it. The
		// socket closes in serve.
		if stop || closed {
			return
		}
	}
}
