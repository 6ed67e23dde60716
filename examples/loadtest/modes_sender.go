package main

import (
	"context"
	"sync"
	"time"

	"github.com/sbkit/sbkit"
	"github.com/sbkit/sbkit/sender"
)

// pipelined sends through sbkit's sender with at most window single-message requests in
// flight (batching off).
func (r *runner) pipelined(ctx context.Context, window int) (Result, error) {
	return r.sendMode(ctx, "pipelined", window, func(ctx context.Context, s sbkit.BatchSender) ([]time.Duration, []error) {
		return r.viaSender(ctx, s, &sender.Options{MaxInFlightMessages: window, DisableBatching: true})
	})
}

// batched sends through sbkit's sender with its default window and batching on.
func (r *runner) batched(ctx context.Context) (Result, error) {
	return r.sendMode(ctx, "batched", 0, func(ctx context.Context, s sbkit.BatchSender) ([]time.Duration, []error) {
		return r.viaSender(ctx, s, &sender.Options{})
	})
}

// latencies is a sender.SendResultHook that collects each message's latency from its
// acceptance (after any wait for room in the window) to its outcome, and the errors. It
// is safe for concurrent use.
type latencies struct {
	progress *Progress
	mu       sync.Mutex
	lat      []time.Duration
	errs     []error
}

// fail records an error that no hook call reports.
func (l *latencies) fail(err error) {
	l.mu.Lock()
	l.errs = append(l.errs, err)
	l.mu.Unlock()
}

var _ sender.SendResultHook = (*latencies)(nil)

func (l *latencies) OnSendResult(_ context.Context, e sender.SendResult) {
	l.mu.Lock()
	if e.Err != nil {
		l.errs = append(l.errs, e.Err)
	} else {
		l.lat = append(l.lat, e.Duration)
	}
	l.mu.Unlock()
	l.progress.Add(1)
}

// results returns the latencies of the successful messages and the errors.
func (l *latencies) results() ([]time.Duration, []error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lat, l.errs
}

// viaSender sends r.cfg.n messages with SendAsync and closes the sender, which waits for
// every outcome.
func (r *runner) viaSender(ctx context.Context, dst sbkit.BatchSender, opts *sender.Options) ([]time.Duration, []error) {
	l := &latencies{progress: r.progress, lat: make([]time.Duration, 0, r.cfg.n)}
	opts.Hooks = []sender.Hook{l}
	s, err := sender.New(dst, opts)
	if err != nil {
		return nil, []error{err}
	}
	for range r.cfg.n {
		// A message that is not accepted is reported to the hook too.
		if _, err := s.SendAsync(ctx, r.message()); err != nil && ctx.Err() != nil {
			break
		}
	}
	if err := s.Close(ctx); err != nil && ctx.Err() == nil {
		l.fail(err)
	}
	return l.results()
}
