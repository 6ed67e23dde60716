package receiver

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sbkit/sbkit"
	"github.com/sbkit/sbkit/internal/retry"
	"github.com/sbkit/sbkit/internal/shutdown"
	"github.com/sbkit/sbkit/internal/workpool"
	"github.com/sbkit/sbkit/locks"
)

// run is one call of Processor.Run: its goroutines, buffers and shutdown.
type run struct {
	p      *Processor
	cfg    *config
	engine *locks.Engine // nil without renewal
	routes *renewRoutes  // the engine's renewer with MoreReceivers; else nil

	values         context.Context // Run's context's values, never cancelled
	recvCtx        context.Context // ends the receive loop
	stopRecv       context.CancelFunc
	handlerBase    context.Context // parent of every handler's context
	cancelHandlers context.CancelCauseFunc
	stopRunCtx     func() bool // detaches the context.AfterFunc on Run's ctx

	places   *places                   // messages asked for, waiting, handled, held or settling: see limit
	buf      chan *delivery            // received messages waiting for a handler goroutine
	settlers *workpool.Pool[settleJob] // settle goroutines, at most SettleConcurrency
	workers  sync.WaitGroup            // handler goroutines
	holdWG   sync.WaitGroup            // AbandonDelay timers not yet resolved
	cutWG    sync.WaitGroup            // a cut of running handlers in progress
	done     chan struct{}             // closed when Run returns
	stopMu   sync.Once                 // guards reason
	reason   error                     // what Run returns: nil after Close

	// settleBase ends at the shutdown's deadline: settlements still pending then are
	// given up and their messages left to lock expiry.
	settleBase    context.Context
	cancelSettles context.CancelFunc
	deadlines     *shutdown.Deadlines // the cut of handlers and the end of settlements

	mu          sync.Mutex
	cutNow      bool                      // receiving failed: cancel handlers at once
	draining    bool                      // shutdown started: no handler starts, no hold
	handlersEnd bool                      // every handler returned: no cut any more
	cut         bool                      // running handlers were cancelled
	disarm      []func()                  // releases the graces' timers
	live        map[*delivery]struct{}    // peek-lock deliveries not yet claimed
	holds       map[*delivery]*time.Timer // deliveries held before abandoning
	held        atomic.Int64              // len(holds), read without mu by limit
	settling    atomic.Int64              // deliveries a settle goroutine is settling

	cancelledHandlers atomic.Bool
	intake            intake       // the rate of receipt, for moreReceiversOn
	moreOn            atomic.Bool  // moreReceiversOn's latest answer
	leftLocked        atomic.Int64 // messages this run left to lock expiry
}

func newRun(ctx context.Context, p *Processor) (*run, error) {
	cfg := &p.cfg
	r := &run{
		p:      p,
		cfg:    cfg,
		places: newPlaces(),
		buf:    make(chan *delivery, cfg.capacity),
		done:   make(chan struct{}),
		live:   make(map[*delivery]struct{}),
		holds:  make(map[*delivery]*time.Timer),
	}
	r.settlers = workpool.New(cfg.SettleConcurrency, r.settleQueued)
	r.settleBase, r.cancelSettles = context.WithCancel(context.Background())
	r.deadlines = shutdown.New(shutdown.Options{Cut: r.cutHandlers, Reserve: settleReserve, Hard: r.cancelSettles})
	if p.renewer != nil {
		var renewer sbkit.LockRenewer = p.renewer
		if len(cfg.MoreReceivers) > 0 {
			r.routes = newRenewRoutes(p.renewer)
			renewer = r.routes
		}
		e, err := locks.New(renewer, cfg.lockOptions(engineHook{r}, lossHook{r}))
		if err != nil {
			return nil, err
		}
		r.engine = e
	}
	r.values = context.WithoutCancel(ctx)
	r.recvCtx, r.stopRecv = context.WithCancel(r.values)
	// Handlers see Run's values but not its cancellation: shutdown cancels them only
	// after receiving stopped, so that an abandoned message is not received again.
	r.handlerBase, r.cancelHandlers = context.WithCancelCause(context.WithoutCancel(ctx))
	r.stopRunCtx = context.AfterFunc(ctx, func() {
		grace, cancel := shutdown.Grace(cfg.ShutdownGrace)
		r.stop(grace, context.Cause(ctx))
		r.whenOver(cancel)
	})
	return r, nil
}

// stop starts the shutdown (the first call) and arms grace's deadline: running handlers
// are cancelled a settle reserve before it (see settleReserve), and settlements still
// pending at it are given up. A grace without deadline that ends does both at once; one
// that never ends waits for handlers, each settlement bounded by SettleTimeout. Every
// call arms its grace, so a later Close can shorten an earlier shutdown. reason is what
// Run returns; only the first call's counts.
func (r *run) stop(grace context.Context, reason error) {
	r.stopMu.Do(func() {
		r.reason = reason
		r.mu.Lock()
		r.draining = true // from now on no handler starts and nothing is held
		r.mu.Unlock()
		r.stopRecv()
	})
	r.deadlines.Arm(grace)
}

// maxSettleReserve caps the time between the cancellation of running handlers and the
// shutdown's deadline, left for abandoning their messages: a quarter of the time the
// shutdown was given, at most this.
const maxSettleReserve = time.Second

// settleReserve is the time between the cancellation of running handlers and the
// shutdown's deadline, given the time left until it: see maxSettleReserve.
func settleReserve(left time.Duration) time.Duration { return max(0, min(left/4, maxSettleReserve)) }

// isHandlerContext reports whether ctx is (or derives from) the context of one of r's
// handler calls.
func (r *run) isHandlerContext(ctx context.Context) bool {
	s, ok := ctx.Value(settlerKey{}).(*handlerSettler)
	return ok && s.d.r == r
}

// whenOver calls f once the run's shutdown is over.
func (r *run) whenOver(f func()) {
	r.mu.Lock()
	r.disarm = append(r.disarm, f)
	r.mu.Unlock()
}

// serve runs a receive loop on each receiver (the processor's on the calling
// goroutine), then shuts down.
func (r *run) serve() error {
	r.workers.Add(r.cfg.MaxConcurrency)
	for range r.cfg.MaxConcurrency {
		go r.handlerWorker()
	}

	var loops sync.WaitGroup
	for _, src := range r.cfg.MoreReceivers {
		loops.Go(func() { r.link(src, true) })
	}
	r.link(r.p.src, false)
	loops.Wait()
	r.shutdown()
	return r.reason
}

// link runs the receive loop on src (one of MoreReceivers when extra); a permanent
// failure stops the run, with every running handler cancelled at once.
func (r *run) link(src sbkit.MessageReceiver, extra bool) {
	if err := r.receiveLoop(src, extra); err != nil {
		r.mu.Lock()
		r.cutNow = true
		r.mu.Unlock()
		r.stop(context.Background(), err)
	}
}

// receiveLoop calls src.ReceiveMessages, one call at a time, asking for the credits its
// link has open and as many more messages as there are free places, until stopped. The
// places of credits left open stay with the loop, as those messages may still arrive
// for its next call (with several receivers, another loop must not ask for them too).
// The loop of one of MoreReceivers (extra) asks for places only while the gate is open
// (see moreReceiversOn), read before every call; when it closes with credits open, the
// loop asks for those alone (no new credit, no new place) until none is open, then
// waits for the gate. It returns a permanent receive error, the last one when
// ReceiveRetry gives up, or nil.
func (r *run) receiveLoop(src sbkit.MessageReceiver, extra bool) error {
	rs := r.cfg.receiveRetry.Retries()
	window := newReceiveWindow(r.cfg.peekLock)
	open := 0 // places of the credits left open on the link
	defer func() { r.release(open) }()
	for {
		more := 0
		if !extra || r.moreReceiversOn() {
			var ok bool
			if more, ok = r.places.acquire(r.recvCtx, r.limit, r.cfg.maxBatch-open, open == 0); !ok {
				return nil
			}
		}
		if extra && !r.moreReceiversOn() { // off, or turned off while acquire waited
			r.release(more)
			more = 0
			if open == 0 {
				if !retry.Wait(r.recvCtx, idleLinkPoll) {
					return nil
				}
				continue
			}
			// Finish the credits left open: a call for them alone issues no credit.
		}
		n, ok := r.breakerReceive(open + more)
		if !ok { // waits while the circuit breaker is open: breaker.go
			open = 0 // breakerReceive gave back every place
			return nil
		}
		start := time.Now()
		msgs, err := src.ReceiveMessages(r.recvCtx, n, window.ask(n, r.busyFor()))
		took := time.Since(start)
		// Before the messages reach the lock engine, whose renewals write LockedUntil.
		w := window.observe(n, msgs, err)
		got := 0
		for _, m := range msgs {
			if m == nil {
				continue
			}
			got++
			r.buf <- r.newDelivery(src, m)
		}
		r.p.counters.buffered(len(r.buf))
		open = min(n-got, window.open)
		r.release(n - got - open)
		r.p.counters.windowed(w)
		r.p.est.observeReceive(w, got, took)
		r.intake.add(got, start.Add(took))
		r.cfg.hooks.onReceive(r.recvCtx, ReceiveCall{Requested: n, Received: got, Err: err, Duration: took})
		if err == nil {
			rs.Reset()
			continue
		}
		if r.recvCtx.Err() != nil {
			return nil
		}
		r.p.counters.receiveErrors.Add(1)
		r.report(r.recvCtx, &Error{Source: SourceReceive, Err: err})
		if sbkit.IsPermanent(err) && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
			return err
		}
		wait, ok := rs.Next()
		if !ok {
			return err
		}
		if !retry.Wait(r.recvCtx, wait) {
			return nil
		}
	}
}

// limit is how many places the run may use now. A place is held by every message from
// the receive call that asks for it until its handler returned and its settlement is
// over: requested, buffered, running, held by AbandonDelay, settling. The limit is
// MaxConcurrency + PrefetchCount; with the adaptive prefetch, MaxConcurrency + the
// prefetch the estimates give + the messages held or settling (so that they do not
// starve the buffer the prefetch is sized for), the last three together at most the
// adaptive ceiling (64 × MaxConcurrency). Settlements count by message, not by settle
// goroutine: however settlements are run, the limit holds.
func (r *run) limit() int {
	if !r.cfg.adaptive {
		return r.cfg.capacity
	}
	return r.cfg.MaxConcurrency + min(r.cfg.ceiling, r.prefetch()+int(r.held.Load()+r.settling.Load()))
}

// prefetch is the current prefetch: PrefetchCount, or the adaptive one.
func (r *run) prefetch() int {
	if !r.cfg.adaptive {
		return r.cfg.PrefetchCount
	}
	return r.p.est.prefetch(r.cfg.MaxConcurrency, r.cfg.SettleConcurrency, r.cfg.prefetchInitial, r.cfg.ceiling)
}

// busyFor is how long the messages waiting for a handler keep the handlers busy, at
// the rate the estimates give: zero until it has been measured.
func (r *run) busyFor() time.Duration {
	rate, ok := r.p.est.rate(r.cfg.MaxConcurrency, r.cfg.SettleConcurrency)
	if !ok || rate <= 0 {
		return 0
	}
	return time.Duration(float64(len(r.buf)) / rate * float64(time.Second))
}

// release gives back n places.
func (r *run) release(n int) { r.places.release(n) }

// shutdown runs after the receive loop stopped: see Processor.Run.
func (r *run) shutdown() {
	r.mu.Lock()
	r.draining = true
	r.mu.Unlock()
	if r.cutNow {
		r.cutHandlers()
	}
	close(r.buf)
	if r.cfg.peekLock {
		for d := range r.buf { // waiting messages return at once
			r.abandonNow(d)
			r.unref(d) // it reaches no handler goroutine
		}
	}
	r.workers.Wait()
	r.mu.Lock()
	r.handlersEnd = true
	r.mu.Unlock()
	r.cutWG.Wait()

	r.flushHolds()
	r.holdWG.Wait()
	r.settlers.Close()
	r.settlers.Wait()
	if r.engine != nil {
		_ = r.engine.Close(context.Background())
	}
	r.deadlines.Disarm()
	r.mu.Lock()
	for _, f := range r.disarm {
		f()
	}
	r.mu.Unlock()
	r.stopRunCtx()
	r.cancelHandlers(nil)
	r.cancelSettles()
	r.stopRecv()
}

// cutHandlers cancels the contexts of running handlers (cause ErrClosed) and abandons
// their messages, once, unless every handler has returned already.
func (r *run) cutHandlers() {
	r.mu.Lock()
	if r.cut || r.handlersEnd {
		r.mu.Unlock()
		return
	}
	r.cut = true
	r.cutWG.Add(1)
	running := make([]*delivery, 0, len(r.live))
	for d := range r.live {
		running = append(running, d)
	}
	r.mu.Unlock()
	defer r.cutWG.Done()
	r.cancelledHandlers.Store(true)
	cause := ErrClosed
	if r.reason != nil {
		cause = fmt.Errorf("%w: %w", ErrClosed, r.reason)
	}
	r.cancelHandlers(cause)
	if r.cfg.peekLock {
		for _, d := range running {
			r.abandonNow(d)
		}
	}
}

// abandonNow claims d and queues its abandonment, unless it is settled already.
func (r *run) abandonNow(d *delivery) {
	if d.claim() {
		r.queue(settleJob{d: d, action: sbkit.ActionAbandon})
	}
}

// report logs e and hands it to the error hooks.
func (r *run) report(ctx context.Context, e *Error) {
	r.cfg.Logger.Warn("receiver: error", e.logArgs()...)
	r.cfg.hooks.onError(ctx, e)
}

// engineHook is the processor's own hook on its lock engine, before the user's: it
// counts renewals and reports failed attempts.
type engineHook struct{ r *run }

func (h engineHook) OnRenew(context.Context, locks.Renewal) { h.r.p.counters.renewed.Add(1) }

func (h engineHook) OnRenewError(ctx context.Context, e *locks.RenewError) {
	h.r.p.counters.renewErrors.Add(1)
	if e.WillRetry { // a final failure is reported as the lock's loss
		h.r.report(ctx, &Error{Source: SourceRenew, Message: e.Message, Err: e.Err})
	}
}

// lossHook is the processor's own hook on its lock engine, after the user's: it hands a
// lost lock to its delivery (the context given to Add), which cancels the handler. The
// user's hooks hear of the loss first, while the handler still runs, so that they can
// attach it to what its start began (a trace's span, which its end closes).
type lossHook struct{ r *run }

func (h lossHook) OnLockLost(ctx context.Context, e locks.LockLoss) {
	if d, ok := ctx.Value(deliveryKey{}).(*delivery); ok {
		d.lost(e.Cause)
	}
}

func (r *run) heldCount() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.holds)
}
