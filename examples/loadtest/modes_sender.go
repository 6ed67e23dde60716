package main

import (
	"context"
	"sync"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

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

// latencies is a sender.ResultHook that measures each message from its acceptance (the
// return of SendAsync, after any wait for room in the window) to its outcome. It is safe
// for concurrent use.
type latencies struct {
	progress *Progress
	mu       sync.Mutex
	timings  map[*azservicebus.Message]*timing
	errs     []error
}

type timing struct {
	accepted, done time.Time
	ok             bool
}

func (l *latencies) get(msg *azservicebus.Message) *timing {
	t := l.timings[msg]
	if t == nil {
		t = &timing{}
		l.timings[msg] = t
	}
	return t
}

// accepted records that SendAsync accepted msg.
func (l *latencies) accepted(msg *azservicebus.Message, at time.Time) {
	l.mu.Lock()
	l.get(msg).accepted = at
	l.mu.Unlock()
}

// fail records an error that no hook call reports.
func (l *latencies) fail(err error) {
	l.mu.Lock()
	l.errs = append(l.errs, err)
	l.mu.Unlock()
}

func (l *latencies) OnSendResult(res *sender.Result, err error) {
	end := time.Now()
	l.mu.Lock()
	if err != nil {
		l.errs = append(l.errs, err)
	} else {
		t := l.get(res.Message())
		t.done, t.ok = end, true
	}
	l.mu.Unlock()
	l.progress.Add(1)
}

// results returns the latencies of the successful messages and the errors. An outcome
// that arrived before SendAsync returned counts as zero latency.
func (l *latencies) results() ([]time.Duration, []error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	lat := make([]time.Duration, 0, len(l.timings))
	for _, t := range l.timings {
		if t.ok {
			lat = append(lat, max(0, t.done.Sub(t.accepted)))
		}
	}
	return lat, l.errs
}

// viaSender sends r.cfg.n messages with SendAsync and closes the sender, which waits for
// every outcome.
func (r *runner) viaSender(ctx context.Context, dst sbkit.BatchSender, opts *sender.Options) ([]time.Duration, []error) {
	l := &latencies{progress: r.progress, timings: make(map[*azservicebus.Message]*timing, r.cfg.n)}
	opts.Hooks = []sender.Hook{l}
	s, err := sender.New(dst, opts)
	if err != nil {
		return nil, []error{err}
	}
	for range r.cfg.n {
		msg := r.message()
		if _, err := s.SendAsync(ctx, msg); err != nil { // not accepted: no hook call
			l.fail(err)
			if ctx.Err() != nil {
				break
			}
			continue
		}
		l.accepted(msg, time.Now())
	}
	if err := s.Close(ctx); err != nil && ctx.Err() == nil {
		l.fail(err)
	}
	return l.results()
}
