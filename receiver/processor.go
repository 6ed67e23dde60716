package receiver

import (
	"context"
	"fmt"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/sbkit/sbkit"
)

// Processor receives messages in a loop and runs a handler on each, with bounded
// concurrency, automatic settlement and automatic lock renewal. Make one with New, start it
// with Run, stop it with Close. Its methods are safe for concurrent use.
type Processor struct {
	src     sbkit.MessageReceiver
	renewer sbkit.LockRenewer
	handler sbkit.Handler
	cfg     config
	est     *estimates // the adaptive prefetch's measurements; shared by a SessionProcessor's sessions
	// settled, when set, is told once of each peek-lock message when the processor is
	// done with its lock: err is nil when the broker settled the message, else why it was
	// not (lock lost, settlement failed for good, shutdown deadline). A SessionProcessor
	// sets it: a session's next message waits for the previous one's settlement.
	settled func(m *azservicebus.ReceivedMessage, err error)
	// breaker is the circuit breaker (nil: none); a SessionProcessor's sessions share
	// its own, which it reports in its Stats (ownsBreaker false).
	breaker     *breaker
	ownsBreaker bool

	runs runGuard[run]

	counters counters
}

// New returns a Processor that receives from src and runs handler on every message. A nil
// options means the defaults. In peek-lock mode with lock renewal on (the default), src
// must implement [sbkit.LockRenewer], as [*azservicebus.Receiver] does. New returns
// ErrNilReceiver, an error wrapping [sbkit.ErrNilHandler], ErrNoLockRenewer, or an error
// wrapping ErrInvalidOptions. New starts no goroutine.
func New(src sbkit.MessageReceiver, handler sbkit.Handler, options *Options) (*Processor, error) {
	if src == nil {
		return nil, ErrNilReceiver
	}
	if handler == nil {
		return nil, fmt.Errorf("receiver: %w", sbkit.ErrNilHandler)
	}
	cfg, err := newConfig(options)
	if err != nil {
		return nil, err
	}
	if err := checkMoreReceivers(src, cfg.MoreReceivers); err != nil {
		return nil, err
	}
	p := &Processor{src: src, handler: handler, cfg: cfg, est: &estimates{}}
	p.breaker, p.ownsBreaker = newBreaker(cfg.breaker, &p.cfg.hooks), cfg.breaker != nil
	if cfg.renew {
		r, ok := src.(sbkit.LockRenewer)
		if !ok {
			return nil, ErrNoLockRenewer
		}
		p.renewer = r
	}
	return p, nil
}

// Run receives and processes messages until ctx ends, Close is called, or receiving
// fails with a permanent error ([sbkit.IsPermanent]: entity not found, unauthorized,
// receiver closed). Transient receive errors are reported and retried with backoff.
//
// Before returning, Run shuts down: it stops receiving, abandons the messages waiting for
// a handler, lets running handlers finish for [Options.ShutdownGrace] after ctx ended (or
// as Close's context allows; not at all when receiving failed), then cancels the
// handlers' contexts with a cause wrapping ErrClosed (and ctx's cause or the receive
// error) and abandons their messages, performs the pending settlements until the
// shutdown's deadline (see Close), and stops every goroutine it started. So cancelling
// ctx alone is a graceful shutdown that ends within ShutdownGrace. Handlers' contexts
// carry ctx's values but are cancelled only by this shutdown or a lost lock, after
// receiving has stopped, so that an abandoned message is not received again.
//
// Run returns nil after Close, ctx's error ([context.Cause]) when ctx ended, the permanent
// receive error, ErrClosed when called after Close, or ErrRunning while another Run is
// active. It may be called again after it returned, unless Close was called.
func (p *Processor) Run(ctx context.Context) error {
	r, err := p.runs.start(func() (*run, error) { return newRun(ctx, p) })
	if err != nil {
		return err
	}
	p.breakerStart() // breaker.go
	err = r.serve()
	p.breakerEnd()
	p.runs.end()
	close(r.done)
	return err
}

// Close stops the processor gracefully and returns by ctx's deadline:
//
//   - receiving stops at once, and messages waiting for a handler or held by
//     [Options.AbandonDelay] are abandoned at once;
//   - running handlers may finish until a settle reserve before ctx's deadline (a
//     quarter of the time left, at most 1 s), then their contexts are cancelled
//     (cause ErrClosed) and their messages abandoned;
//   - at ctx's deadline, settlements still pending (a broker that does not answer) are
//     given up: their messages stay locked at the broker until their locks expire, and
//     each is counted in [Stats.LeftLocked] and reported as an [*Error] wrapping
//     [ErrLeftLocked]. No message is silently forgotten.
//
// A ctx without deadline that ends does all of this at once; a ctx that never ends
// ([context.Background]) waits for every handler, and bounds each settlement only by
// [Options.SettleTimeout]. Close waits for Run to return, but no longer than a moment
// (100 ms) past ctx's end: a handler that ignores its cancelled context keeps Run
// running after Close returned, and Run returns when that handler does.
//
// Called from a handler with the handler's context (or one derived from it), Close
// starts the shutdown and returns nil at once without waiting (it would wait for its own
// caller): the handler should then return; Run returns when the shutdown is over. That
// shutdown lasts until ctx's deadline, or for [Options.ShutdownGrace] when ctx has none,
// as when Run's context ends; the handler's return, which ends its context, does not cut
// it short. Close tells its caller by that context (Go gives goroutines no identity to
// tell them by): called from a handler with another context, Close treats the handler
// like any other, cutting it and abandoning its message, and returns by ctx's deadline
// (never, when ctx cannot end). Hooks must not call Close.
//
// Close returns ctx.Err() ([context.DeadlineExceeded] when called early) when handlers had
// to be cancelled or settlements given up, nil otherwise. Close is safe to call twice and
// before Run; Run fails with ErrClosed afterwards.
func (p *Processor) Close(ctx context.Context) error {
	if r := p.runs.current(); r != nil && r.isHandlerContext(ctx) {
		grace, release := handlerGrace(ctx, p.cfg.ShutdownGrace)
		r.whenOver(release)
		p.shut(grace)
		return nil
	}
	_, wait := p.shut(ctx)
	return wait()
}

// handlerGrace is the context of a shutdown that a handler started by calling Close
// with its own context, ctx: ctx's values and deadline (or shutdownGrace from now when it
// has none, negative for no limit) without its cancellation, since ctx ends when the
// handler returns. release frees its timer.
func handlerGrace(ctx context.Context, shutdownGrace time.Duration) (grace context.Context, release context.CancelFunc) {
	grace = context.WithoutCancel(ctx)
	if deadline, ok := ctx.Deadline(); ok {
		return context.WithDeadline(grace, deadline)
	}
	if shutdownGrace >= 0 {
		return context.WithTimeout(grace, shutdownGrace)
	}
	return grace, func() {}
}

// shut starts closing p with ctx and returns at once: receiving has stopped. wait waits
// for Run to return and gives Close's result. r is the run being shut, nil when none.
func (p *Processor) shut(ctx context.Context) (r *run, wait func() error) {
	r = p.runs.close()
	if r == nil {
		return nil, func() error { return nil }
	}
	r.stop(ctx, nil)
	return r, func() error {
		if !awaitRun(ctx, r.done) {
			return ctx.Err()
		}
		if r.cancelledHandlers.Load() || r.leftLocked.Load() > 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
			return context.DeadlineExceeded
		}
		return nil
	}
}
