package receiver

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/cenkalti/backoff/v4"

	"github.com/sbkit/sbkit"
	"github.com/sbkit/sbkit/locks"
)

// run is one call of Processor.Run: its goroutines, buffers and shutdown.
type run struct {
	p      *Processor
	cfg    *config
	engine *locks.Engine // nil without renewal

	recvCtx        context.Context // ends the receive loop
	stopRecv       context.CancelFunc
	handlerBase    context.Context // parent of every handler's context
	cancelHandlers context.CancelCauseFunc
	stopRunCtx     func() bool // detaches the context.AfterFunc on Run's ctx

	credits chan struct{}   // one token per message received and not yet handled
	buf     chan *delivery  // received messages waiting for a handler goroutine
	settles chan settleJob  // settlements waiting for a settle goroutine
	workers sync.WaitGroup  // handler goroutines
	settler sync.WaitGroup  // settle goroutines
	holdWG  sync.WaitGroup  // AbandonDelay timers not yet resolved
	done    chan struct{}   // closed when Run returns
	stopMu  sync.Once       // guards grace and reason
	grace   context.Context // how long running handlers may finish
	reason  error           // what Run returns: nil after Close

	mu       sync.Mutex
	draining bool                      // shutdown started: no handler starts, no hold
	live     map[*delivery]struct{}    // peek-lock deliveries not yet claimed
	holds    map[*delivery]*time.Timer // deliveries held before abandoning

	cancelledHandlers atomic.Bool
}

func newRun(ctx context.Context, p *Processor) (*run, error) {
	cfg := &p.cfg
	r := &run{
		p:       p,
		cfg:     cfg,
		credits: make(chan struct{}, cfg.capacity),
		buf:     make(chan *delivery, cfg.capacity),
		settles: make(chan settleJob, cfg.SettleConcurrency),
		done:    make(chan struct{}),
		live:    make(map[*delivery]struct{}),
		holds:   make(map[*delivery]*time.Timer),
	}
	if p.renewer != nil {
		var lo locks.Options
		if cfg.LockRenewal != nil {
			lo = *cfg.LockRenewal
		}
		limit := cfg.renewLimit
		lo.MaxAutoLockRenewalDuration = &limit
		lo.Logger = cfg.Logger
		lo.OnRenewError = func(m *azservicebus.ReceivedMessage, err error) {
			p.counters.renewErrors.Add(1)
			r.report(&Error{Source: SourceRenew, Message: m, Err: err})
		}
		e, err := locks.New(p.renewer, &lo)
		if err != nil {
			return nil, err
		}
		r.engine = e
	}
	r.recvCtx, r.stopRecv = context.WithCancel(context.WithoutCancel(ctx))
	// Handlers see Run's values but not its cancellation: shutdown cancels them only
	// after receiving stopped, so that an abandoned message is not received again.
	r.handlerBase, r.cancelHandlers = context.WithCancelCause(context.WithoutCancel(ctx))
	r.stopRunCtx = context.AfterFunc(ctx, func() { r.stop(ctx, context.Cause(ctx)) })
	return r, nil
}

// stop starts the shutdown; grace bounds the wait for running handlers and reason is what
// Run returns. Only the first call counts.
func (r *run) stop(grace context.Context, reason error) {
	r.stopMu.Do(func() {
		r.grace, r.reason = grace, reason
		r.stopRecv()
	})
}

// serve runs the receive loop on the calling goroutine, then shuts down.
func (r *run) serve() error {
	r.workers.Add(r.cfg.MaxConcurrency)
	for range r.cfg.MaxConcurrency {
		go r.handlerWorker()
	}
	r.settler.Add(r.cfg.SettleConcurrency)
	for range r.cfg.SettleConcurrency {
		go r.settleWorker()
	}

	if err := r.receiveLoop(); err != nil {
		r.stop(cancelledContext, err)
	}
	r.shutdown()
	return r.reason
}

var cancelledContext = func() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}()

// receiveLoop calls ReceiveMessages, one call at a time, asking for as many messages as
// there are free places, until stopped. It returns a permanent receive error, or nil.
func (r *run) receiveLoop() error {
	var bo backoff.BackOff
	for {
		n, ok := r.acquire()
		if !ok {
			return nil
		}
		msgs, err := r.p.src.ReceiveMessages(r.recvCtx, n, nil)
		got := 0
		for _, m := range msgs {
			if m == nil {
				continue
			}
			got++
			r.buf <- r.newDelivery(m)
		}
		r.release(n - got)
		if err == nil {
			bo = nil
			continue
		}
		if r.recvCtx.Err() != nil {
			return nil
		}
		r.p.counters.receiveErrors.Add(1)
		if sbkit.IsPermanent(err) && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
			r.report(&Error{Source: SourceReceive, Err: err})
			return err
		}
		r.report(&Error{Source: SourceReceive, Err: err})
		if bo == nil {
			bo = r.cfg.ReceiveBackOff()
		}
		wait := bo.NextBackOff()
		if wait == backoff.Stop {
			return err
		}
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-r.recvCtx.Done():
			t.Stop()
			return nil
		}
	}
}

// acquire waits for one free place, takes every other free place up to maxBatch, and
// returns how many it took; false when the loop must stop.
func (r *run) acquire() (int, bool) {
	select {
	case r.credits <- struct{}{}:
	case <-r.recvCtx.Done():
		return 0, false
	}
	n := 1
	for n < r.cfg.maxBatch {
		select {
		case r.credits <- struct{}{}:
			n++
		default:
			return n, true
		}
	}
	return n, true
}

func (r *run) release(n int) {
	for range n {
		<-r.credits
	}
}

// shutdown runs after the receive loop stopped: see Processor.Run.
func (r *run) shutdown() {
	r.mu.Lock()
	r.draining = true
	r.mu.Unlock()
	close(r.buf)
	if r.cfg.peekLock {
		for d := range r.buf { // waiting messages return at once
			r.abandonNow(d)
		}
	}

	handlersDone := make(chan struct{})
	go func() { r.workers.Wait(); close(handlersDone) }()
	select {
	case <-handlersDone:
	case <-r.grace.Done():
		r.cancelledHandlers.Store(true)
		cause := ErrClosed
		if r.reason != nil {
			cause = fmt.Errorf("%w: %w", ErrClosed, r.reason)
		}
		r.cancelHandlers(cause)
		r.mu.Lock()
		running := make([]*delivery, 0, len(r.live))
		for d := range r.live {
			running = append(running, d)
		}
		r.mu.Unlock()
		for _, d := range running {
			r.abandonNow(d)
		}
		<-handlersDone
	}

	r.flushHolds()
	r.holdWG.Wait()
	close(r.settles)
	r.settler.Wait()
	if r.engine != nil {
		_ = r.engine.Close(context.Background())
		r.p.counters.renewed.Add(r.engine.Stats().Renewed)
	}
	r.stopRunCtx()
	r.cancelHandlers(nil)
	r.stopRecv()
}

// abandonNow claims d and queues its abandonment, unless it is settled already.
func (r *run) abandonNow(d *delivery) {
	if d.claim() {
		r.settles <- settleJob{d: d, action: sbkit.ActionAbandon}
	}
}

func (r *run) report(e *Error) {
	r.cfg.Logger.Warn("receiver: error", "source", e.Source.String(), "error", e.Err)
	if r.cfg.OnError != nil {
		r.cfg.OnError(e)
	}
}

func (r *run) heldCount() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.holds)
}
