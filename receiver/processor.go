package receiver

import (
	"context"
	"errors"
	"sync"

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

	mu     sync.Mutex
	cur    *run
	closed bool

	counters counters
}

// New returns a Processor that receives from src and runs handler on every message. A nil
// options means the defaults. In peek-lock mode with lock renewal on (the default), src
// must implement sbkit.LockRenewer, as *azservicebus.Receiver does. New returns
// ErrNilReceiver, ErrNilHandler, ErrNoLockRenewer, or an error wrapping ErrInvalidOptions.
// New starts no goroutine.
func New(src sbkit.MessageReceiver, handler sbkit.Handler, options *Options) (*Processor, error) {
	if src == nil {
		return nil, ErrNilReceiver
	}
	if handler == nil {
		return nil, ErrNilHandler
	}
	cfg, err := newConfig(options)
	if err != nil {
		return nil, err
	}
	p := &Processor{src: src, handler: handler, cfg: cfg}
	if cfg.peekLock && cfg.renewLimit != 0 {
		r, ok := src.(sbkit.LockRenewer)
		if !ok {
			return nil, ErrNoLockRenewer
		}
		p.renewer = r
	}
	return p, nil
}

// Run receives and processes messages until ctx ends, Close is called, or receiving
// fails with a permanent error (sbkit.IsPermanent: entity not found, unauthorized,
// receiver closed). Transient receive errors are reported and retried with backoff.
//
// Before returning, Run shuts down: it stops receiving, abandons the messages waiting for
// a handler, waits for running handlers (until Close's context ends; not at all when ctx
// ended or receiving failed), then cancels the handlers' contexts with a cause wrapping
// ErrClosed (and ctx's cause or the receive error) and abandons their messages at once,
// performs the pending settlements, and stops every goroutine it started. Handlers'
// contexts carry ctx's values but are cancelled only by this shutdown or a lost lock,
// after receiving has stopped, so that an abandoned message is not received again.
//
// Run returns nil after Close, ctx's error (context.Cause) when ctx ended, the permanent
// receive error, ErrClosed when called after Close, or ErrRunning while another Run is
// active. It may be called again after it returned, unless Close was called.
func (p *Processor) Run(ctx context.Context) error {
	if ctx == nil {
		return errors.New("receiver: nil context")
	}
	p.mu.Lock()
	switch {
	case p.closed:
		p.mu.Unlock()
		return ErrClosed
	case p.cur != nil:
		p.mu.Unlock()
		return ErrRunning
	}
	r, err := newRun(ctx, p)
	if err != nil {
		p.mu.Unlock()
		return err
	}
	p.cur = r
	p.mu.Unlock()

	err = r.serve()

	p.mu.Lock()
	p.cur = nil
	p.mu.Unlock()
	close(r.done)
	return err
}

// Close stops the processor gracefully: receiving stops at once, messages waiting for a
// handler are abandoned at once, running handlers may finish until ctx ends, then their
// contexts are cancelled (cause ErrClosed) and their messages abandoned. Close waits for
// Run to return, so a handler that ignores its cancelled context delays Close. It returns
// ctx.Err() when handlers had to be cancelled, nil otherwise. Close is safe to call twice
// and before Run; Run fails with ErrClosed afterwards.
func (p *Processor) Close(ctx context.Context) error {
	if ctx == nil {
		ctx = context.Background()
	}
	p.mu.Lock()
	p.closed = true
	r := p.cur
	p.mu.Unlock()
	if r == nil {
		return nil
	}
	r.stop(ctx, nil)
	<-r.done
	if r.cancelledHandlers.Load() {
		return ctx.Err()
	}
	return nil
}
