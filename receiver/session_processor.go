package receiver

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/sbkit/sbkit"
	"github.com/sbkit/sbkit/internal/retry"
	"github.com/sbkit/sbkit/internal/shutdown"
	"github.com/sbkit/sbkit/locks"
)

// SessionProcessor processes the sessions of a session-enabled queue or subscription, as
// .NET's ServiceBusSessionProcessor does: it holds up to MaxConcurrentSessions sessions at
// once, and runs each one's messages through a [Processor] of its own (same contract:
// the handler's result settles, markers, middleware, hooks, graceful Close), with
// MaxConcurrentCallsPerSession handlers (default 1: strictly in order). The session lock
// is renewed by a [locks.Engine]; when it is lost, every running handler of the session
// is cancelled with a cause for which [sbkit.IsLockLost] is true, and the session is
// given up. A session is released when idle for SessionIdleTimeout, after
// MaxMessagesPerSession messages, or at once when one of its messages could not be
// settled (see [SessionOptions.MaxConcurrentCallsPerSession]), and the slot accepts the
// next one. Handlers reach the
// session (id, state) through [SessionFrom]. Make one with NewSessionProcessor, start it
// with Run, stop it with Close. Its methods are safe for concurrent use.
type SessionProcessor struct {
	acc     sbkit.SessionAcceptor
	handler sbkit.Handler
	cfg     sessionConfig
	base    config     // the Options resolved: session lock renewal, hooks, retries
	est     *estimates // the sessions' adaptive prefetch measurements, shared

	runs    runGuard[sessionRun]
	breaker *breaker // shared by the sessions; nil without Options.Breaker

	mu      sync.Mutex
	retired Stats                   // message counts of the sessions given up
	live    map[*Processor]struct{} // the processors of the sessions held now

	accepted, released, lost, acceptErrors, renewed atomic.Int64
}

// SessionStats are a SessionProcessor's counters: the message counters of [Stats],
// summed over every session processed (so they reconcile as a Processor's do; gauges
// summed over the sessions held, PeakBuffered the largest of one session), and the
// sessions'.
type SessionStats struct {
	Stats
	SessionsAccepted    int64 // sessions accepted
	SessionsReleased    int64 // sessions given up (idle, bound, lock lost, shutdown)
	SessionLocksLost    int64 // sessions whose lock was lost
	AcceptErrors        int64 // failed accept calls (a timeout waiting for a session is not one)
	SessionLocksRenewed int64 // session lock renewals
	Sessions            int64 // gauge: sessions held now
}

// NewSessionProcessor returns a SessionProcessor that accepts sessions through acc and
// runs handler on every message. A nil options means the defaults. It returns
// ErrNilReceiver for a nil acc, [sbkit.ErrNilHandler] (wrapped) for a nil handler, and an
// error wrapping ErrInvalidOptions for options out of range. It starts no goroutine.
func NewSessionProcessor(acc sbkit.SessionAcceptor, handler sbkit.Handler, options *SessionOptions) (*SessionProcessor, error) {
	if acc == nil {
		return nil, ErrNilReceiver
	}
	if handler == nil {
		return nil, fmt.Errorf("receiver: %w", sbkit.ErrNilHandler)
	}
	cfg, err := newSessionConfig(options)
	if err != nil {
		return nil, err
	}
	base, err := newConfig(&cfg.Options)
	if err != nil {
		return nil, err
	}
	p := &SessionProcessor{acc: acc, handler: handler, cfg: cfg, base: base, est: &estimates{},
		live: make(map[*Processor]struct{})}
	p.breaker = newBreaker(base.breaker, &p.base.hooks) // breaker.go
	return p, nil
}

// Run accepts and processes sessions until ctx ends, Close is called, or accepting fails
// with a permanent error (entity not found, unauthorized). Failed accepts are reported
// (SourceAccept) and retried with ReceiveRetry; a wait for a session that times out is
// not an error. When ctx ends, every held session is shut down as [Processor.Run] does
// (within ShutdownGrace) and released. Run returns nil after Close, ctx's cause when ctx
// ended, the permanent error, ErrClosed after Close, or ErrRunning while another Run is
// active.
func (p *SessionProcessor) Run(ctx context.Context) error {
	r, err := p.runs.start(func() (*sessionRun, error) { return newSessionRun(ctx, p) })
	if err != nil {
		return err
	}
	p.breaker.resume() // breaker.go; serve pauses it
	err = r.serve()
	p.runs.end()
	return err
}

// Close stops accepting sessions and shuts every held session down as [Processor.Close]
// does with ctx (running handlers finish until shortly before ctx's deadline, then are
// cancelled and their messages abandoned; settlements still pending at the deadline are
// given up and reported), releases the sessions, and waits for Run to return. It returns
// by ctx's deadline even when the broker does not answer: closing a session receiver
// waits at most until then (and at most SettleTimeout), after which the session stays
// locked at the broker until its lock expires. Called from a handler with the handler's
// context (or one derived from it), Close starts the shutdown and returns nil at once (it
// would wait for its own caller), as [Processor.Close] does: the handler should then
// return; Run returns when the shutdown is over, which ctx's deadline bounds, or else
// ShutdownGrace. Given another context, Close treats the calling handler like any other
// and returns by that context's deadline, as it does while a handler ignores its
// cancelled context (Run returns later, when the handler does): see [Processor.Close].
// Hooks must not call Close.
// It returns ctx.Err() ([context.DeadlineExceeded] when called early) when
// handlers had to be cancelled or settlements given up, nil otherwise. Safe to call
// twice and before Run.
func (p *SessionProcessor) Close(ctx context.Context) error {
	r := p.runs.close()
	if r == nil {
		return nil
	}
	if r.isHandlerContext(ctx) {
		grace, release := handlerGrace(ctx, p.base.ShutdownGrace)
		r.whenOver(release)
		r.stop(grace, nil)
		return nil
	}
	r.stop(ctx, nil)
	if !awaitRun(ctx, r.done) {
		return ctx.Err()
	}
	if r.cancels.Load() {
		if err := ctx.Err(); err != nil {
			return err
		}
		return context.DeadlineExceeded
	}
	return nil
}

// Stats returns the processor's counters. It is safe to call at any time.
func (p *SessionProcessor) Stats() SessionStats {
	p.mu.Lock()
	s := SessionStats{Stats: p.retired, Sessions: int64(len(p.live))}
	for proc := range p.live {
		s.Stats = addStats(s.Stats, proc.Stats())
	}
	p.mu.Unlock()
	s.SessionsAccepted = p.accepted.Load()
	s.SessionsReleased = p.released.Load()
	s.SessionLocksLost = p.lost.Load()
	s.AcceptErrors = p.acceptErrors.Load()
	s.SessionLocksRenewed = p.renewed.Load()
	p.breaker.stats(&s.Stats)
	return s
}

// addStats adds b's counters and gauges to a's: every field of Stats is an int64 that
// sums across processors, except PeakBuffered, of which it keeps the larger.
func addStats(a, b Stats) Stats {
	peak := max(a.PeakBuffered, b.PeakBuffered)
	av, bv := reflect.ValueOf(&a).Elem(), reflect.ValueOf(b)
	for i := range av.NumField() {
		av.Field(i).SetInt(av.Field(i).Int() + bv.Field(i).Int())
	}
	a.PeakBuffered = peak
	return a
}

// sessionRun is one call of SessionProcessor.Run.
type sessionRun struct {
	p           *SessionProcessor
	acceptCtx   context.Context // ends accepting
	stopAccept  context.CancelFunc
	handlerBase context.Context // Run's values, not its cancellation
	engine      *locks.Engine   // nil without session lock renewal
	ids         chan string     // SessionIDs waiting for a slot
	slots       sync.WaitGroup
	closers     sync.WaitGroup // shutdowns of held sessions that stop started
	done        chan struct{}
	stopRunCtx  func() bool

	// closeBase ends when the first of the shutdown's contexts ends (deadlines): closing
	// a session receiver waits no longer, so that a broker that does not answer cannot
	// hold Close past its deadline.
	closeBase context.Context
	endCloses context.CancelFunc
	deadlines *shutdown.Deadlines // calls endCloses

	mu      sync.Mutex
	held    map[*Processor]struct{}
	closing context.Context // set by the first stop: how held and new sessions are shut
	reason  error
	disarm  []func()    // releases the graces' timers, once the run is over
	over    bool        // serve has released the graces
	cancels atomic.Bool // a session's Close had to cancel handlers
}

func newSessionRun(ctx context.Context, p *SessionProcessor) (*sessionRun, error) {
	r := &sessionRun{p: p, done: make(chan struct{}), held: make(map[*Processor]struct{})}
	if p.base.peekLock && !p.base.DisableAutoLockRenewal {
		e, err := locks.New(nil, p.base.lockOptions(sessionEngineHook{p}, nil))
		if err != nil {
			return nil, err
		}
		r.engine = e
	}
	if ids := p.cfg.SessionIDs; len(ids) > 0 {
		r.ids = make(chan string, len(ids))
		for _, id := range ids {
			r.ids <- id
		}
	}
	r.acceptCtx, r.stopAccept = context.WithCancel(context.WithoutCancel(ctx))
	r.handlerBase = context.WithoutCancel(ctx)
	r.closeBase, r.endCloses = context.WithCancel(context.Background())
	r.deadlines = shutdown.New(shutdown.Options{Hard: r.endCloses})
	r.stopRunCtx = context.AfterFunc(ctx, func() {
		grace, cancel := shutdown.Grace(p.base.ShutdownGrace)
		r.stop(grace, context.Cause(ctx))
		r.whenOver(cancel)
	})
	return r, nil
}

// serve runs the slots until they all stop, then releases what Run started.
func (r *sessionRun) serve() error {
	slots := r.p.cfg.MaxConcurrentSessions
	if r.ids != nil {
		slots = min(slots, cap(r.ids))
	}
	r.slots.Add(slots)
	for range slots {
		go r.slot()
	}
	r.slots.Wait()
	r.closers.Wait()
	r.stopRunCtx()
	if r.engine != nil {
		_ = r.engine.Close(context.Background())
	}
	r.deadlines.Disarm()
	r.mu.Lock()
	r.over = true
	disarm := r.disarm
	r.mu.Unlock()
	for _, f := range disarm {
		f()
	}
	r.endCloses()
	r.p.breaker.pause() // breaker.go
	close(r.done)
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.reason
}

// whenOver calls f once the run is over: now if it is.
func (r *sessionRun) whenOver(f func()) {
	r.mu.Lock()
	over := r.over
	if !over {
		r.disarm = append(r.disarm, f)
	}
	r.mu.Unlock()
	if over {
		f()
	}
}

// stop ends accepting and starts shutting the held sessions with ctx (the first call's
// ctx also shuts sessions accepted meanwhile), without waiting: Run returns when they
// are shut. When ctx ends, closing session receivers waits no longer. reason is what
// Run returns; only the first call's counts.
func (r *sessionRun) stop(ctx context.Context, reason error) {
	r.mu.Lock()
	if r.closing == nil {
		r.closing, r.reason = ctx, reason
	}
	held := slices.Collect(maps.Keys(r.held))
	if len(held) > 0 { // never once the slots are over: nothing is held then
		r.closers.Add(len(held))
	}
	r.mu.Unlock()
	r.deadlines.Arm(ctx)
	r.stopAccept()
	for _, proc := range held {
		r.closeSession(ctx, proc)
	}
}

// closeSession starts shutting a held session down for stop (its receiving stops now)
// and records, once it is over, whether handlers had to be cancelled. The caller has
// added it to closers.
func (r *sessionRun) closeSession(ctx context.Context, proc *Processor) {
	_, wait := proc.shut(ctx)
	go func() {
		defer r.closers.Done()
		err := wait()
		if _, hasDeadline := ctx.Deadline(); err != nil && (hasDeadline || ctx.Err() != nil) {
			r.cancels.Store(true) // (a ctx that cannot end cancelled nothing: the session's lock loss did)
		}
	}()
}

// isHandlerContext reports whether ctx is (or derives from) the context of a handler
// call of one of r's sessions.
func (r *sessionRun) isHandlerContext(ctx context.Context) bool {
	owner, ok := ctx.Value(sessionRunKey{}).(*sessionRun)
	return ok && owner == r
}

// sessionRunKey marks the contexts of a sessionRun's handler calls.
type sessionRunKey struct{}

// slot accepts sessions one after the other and processes each until it is released.
func (r *sessionRun) slot() {
	defer r.slots.Done()
	rs := r.p.base.receiveRetry.Retries()
	for r.acceptCtx.Err() == nil {
		if !r.breakerAccept() { // no session while the circuit breaker is open: breaker.go
			continue
		}
		sr, id, err := r.accept()
		if err != nil {
			if r.acceptCtx.Err() != nil || isAcceptTimeout(err) {
				continue
			}
			r.p.acceptErrors.Add(1)
			r.report(&Error{Source: SourceAccept, Err: err})
			if sbkit.IsPermanent(err) {
				r.fail(err)
				return
			}
			wait, ok := rs.Next()
			if !ok { // ReceiveRetry.MaxRetries consecutive failures
				r.fail(err)
				return
			}
			if !retry.Wait(r.acceptCtx, wait) {
				return
			}
			continue
		}
		rs.Reset()
		r.process(sr)
		if id != "" {
			r.ids <- id
		}
	}
}

// fail ends Run with err: accepting stops and held sessions shut at once.
func (r *sessionRun) fail(err error) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	r.stop(ctx, err)
}

// accept takes the next session: the next id of SessionIDs, or the next available one.
func (r *sessionRun) accept() (sbkit.SessionReceiver, string, error) {
	if r.ids == nil {
		sr, err := r.p.acc.AcceptNextSession(r.acceptCtx)
		return sr, "", err
	}
	var id string
	select {
	case id = <-r.ids:
	case <-r.acceptCtx.Done():
		return nil, "", r.acceptCtx.Err()
	}
	sr, err := r.p.acc.AcceptSession(r.acceptCtx, id)
	if err != nil {
		r.ids <- id
		return nil, "", err
	}
	return sr, id, nil
}

// isAcceptTimeout reports whether err is a wait for a session that timed out: no session
// came, which is not a failure.
func isAcceptTimeout(err error) bool {
	var sbErr *azservicebus.Error
	return errors.As(err, &sbErr) && sbErr.Code == azservicebus.CodeTimeout
}

// process runs one session's Processor until the session is released, then releases
// the session receiver.
func (r *sessionRun) process(sr sbkit.SessionReceiver) {
	p := r.p
	p.accepted.Add(1)
	var running sessionHandlers
	var proc *Processor
	var once sync.Once
	release := func(string) {
		once.Do(func() {
			go func() { _ = proc.Close(r.releaseCtx()) }()
		})
	}
	src := newSessionSource(sr, &p.cfg, release)
	session := Session(sr)
	handler := func(ctx context.Context, m *azservicebus.ReceivedMessage) error {
		if !p.base.peekLock {
			// ReceiveAndDelete: nothing is settled, so the message ends with its handler.
			defer src.ended(m, nil)
		}
		ctx, done := running.start(ctx)
		defer done()
		ctx = context.WithValue(ctx, sessionRunKey{}, r)
		return p.handler(context.WithValue(ctx, sessionKey{}, session), m)
	}
	proc, err := New(src, handler, &p.cfg.inner)
	if err != nil { // the options were validated by NewSessionProcessor
		r.report(&Error{Source: SourceAccept, Err: err})
		r.closeReceiver(sr)
		return
	}
	proc.est = p.est
	proc.breaker = p.breaker
	proc.settled = src.ended
	var lostOnce atomic.Bool
	onLost := func(cause error) {
		if lostOnce.CompareAndSwap(false, true) {
			p.lost.Add(1)
			running.lose(cause)
			r.report(&Error{Source: SourceRenew, Err: fmt.Errorf("session %q: %w", sr.SessionID(), cause)})
		}
	}
	var slock *sessionLock
	if r.engine != nil {
		slock = &sessionLock{e: r.engine, ctx: r.handlerBase, sr: sr, lost: func(cause error) {
			onLost(cause)
			// Its handlers are cancelled already: their messages' settlements fail as
			// lock lost, within SettleTimeout.
			ctx, cancel := context.WithTimeout(context.Background(), p.base.SettleTimeout)
			defer cancel()
			_ = proc.Close(ctx)
		}}
		if err := slock.track(); err != nil {
			r.report(&Error{Source: SourceRenew, Err: fmt.Errorf("session %q: %w", sr.SessionID(), err)})
		}
		src.activity = func() { _ = slock.track() }
	}

	r.mu.Lock()
	closing := r.closing
	r.held[proc] = struct{}{}
	if closing != nil {
		r.closers.Add(1)
	}
	r.mu.Unlock()
	p.mu.Lock()
	p.live[proc] = struct{}{}
	p.mu.Unlock()
	if closing != nil { // Run is stopping: this session was accepted too late
		r.closeSession(closing, proc)
	}

	runErr := proc.Run(r.handlerBase)
	if sbkit.IsLockLost(runErr) {
		onLost(runErr)
	}
	if slock != nil {
		slock.stop()
	}
	r.mu.Lock()
	delete(r.held, proc)
	r.mu.Unlock()
	r.closeReceiver(sr)
	p.mu.Lock()
	delete(p.live, proc)
	p.retired = addStats(p.retired, proc.Stats())
	p.mu.Unlock()
	p.released.Add(1)
}

// releaseCtx bounds the shutdown of a released session (idle or at its bound): its
// running handlers may finish within ShutdownGrace.
func (r *sessionRun) releaseCtx() context.Context {
	if g := r.p.base.ShutdownGrace; g >= 0 {
		ctx, cancel := context.WithTimeout(context.Background(), g)
		context.AfterFunc(ctx, cancel)
		return ctx
	}
	return context.Background()
}

// closeReceiver releases a session receiver, bounded by SettleTimeout and by the
// shutdown's context. When it fails the session stays locked until its lock expires.
func (r *sessionRun) closeReceiver(sr sbkit.SessionReceiver) {
	ctx, cancel := context.WithTimeout(r.closeBase, r.p.base.SettleTimeout)
	defer cancel()
	if err := sr.Close(ctx); err != nil {
		r.p.base.Logger.Warn("receiver: closing a session receiver failed; the session stays locked until its lock expires", "session", sr.SessionID(), "error", err)
	}
}

func (r *sessionRun) report(e *Error) {
	args := e.logArgs()
	if e.Message != nil && e.Message.SessionID != nil {
		args = append(args, "session", *e.Message.SessionID)
	}
	r.p.base.Logger.Warn("receiver: error", args...)
	r.p.base.hooks.onError(r.handlerBase, e)
}

// sessionEngineHook counts the session lock engine's renewals in the processor's stats.
type sessionEngineHook struct{ p *SessionProcessor }

func (h sessionEngineHook) OnRenew(context.Context, locks.Renewal) { h.p.renewed.Add(1) }

// sessionHandlers are the running handlers of one session, so that a lost session lock
// cancels them all, with its cause, before anything else can cancel them.
type sessionHandlers struct {
	mu      sync.Mutex
	lost    error
	next    int
	cancels map[int]context.CancelCauseFunc
}

// start derives a handler's context from ctx; done must be called when the handler
// returns.
func (s *sessionHandlers) start(ctx context.Context) (_ context.Context, done func()) {
	ctx, cancel := context.WithCancelCause(ctx)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.lost != nil {
		cancel(s.lost)
		return ctx, func() {}
	}
	if s.cancels == nil {
		s.cancels = make(map[int]context.CancelCauseFunc)
	}
	id := s.next
	s.next++
	s.cancels[id] = cancel
	return ctx, func() {
		s.mu.Lock()
		delete(s.cancels, id)
		s.mu.Unlock()
		cancel(nil)
	}
}

// lose cancels every running handler, and those that start later, with cause.
func (s *sessionHandlers) lose(cause error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.lost != nil {
		return
	}
	s.lost = cause
	for _, cancel := range s.cancels {
		cancel(cause)
	}
}
