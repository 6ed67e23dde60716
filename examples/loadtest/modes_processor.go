package main

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/sbkit/sbkit/examples/internal/sbenv"
	"github.com/sbkit/sbkit/receiver"
)

// processor fills the queue with r.cfg.n messages and a few more (untimed), then measures
// sbkit's processor with concurrency handlers that each take r.cfg.handler and the
// prefetch setting pf ("auto", "none" or a count) until the n-th completion, stops it
// there (in steady state: running handlers finish, buffered messages are abandoned) and
// drains what is left (untimed).
func (r *runner) processor(ctx context.Context, concurrency int, pf string) (Result, error) {
	res := Result{Mode: "processor", Param: concurrency, Kind: KindProcess, Prefetch: pf}
	opts := &receiver.Options{MaxConcurrency: concurrency}
	switch pf {
	case "none":
		opts.DisablePrefetch = true
	case "auto", "":
	default:
		opts.PrefetchCount, _ = strconv.Atoi(pf) // validated by parseFlags
	}
	// More than the processor may hold, so that the queue never runs dry before the n-th
	// completion: the adaptive prefetch holds at most 5 × concurrency.
	total := r.cfg.n + max(5*concurrency, concurrency+opts.PrefetchCount) + 16
	if err := r.fill(ctx, total); err != nil {
		return res, err
	}
	rc, err := r.conn.NewReceiver(azservicebus.ReceiveModePeekLock)
	if err != nil {
		return res, err
	}
	defer rc.Close(context.WithoutCancel(ctx))
	w := &watch{Receiver: rc, want: int64(r.cfg.n), all: make(chan struct{}), progress: r.progress,
		received: make(map[*azservicebus.ReceivedMessage]time.Time)}
	handler := func(ctx context.Context, _ *azservicebus.ReceivedMessage) error {
		select {
		case <-time.After(r.cfg.handler):
			return nil
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
	p, err := receiver.New(w, handler, opts)
	if err != nil {
		return res, err
	}

	r.progress.Start(res.Name(), r.cfg.n)
	start := time.Now()
	runErr := make(chan error, 1)
	go func() { runErr <- p.Run(ctx) }()
	select {
	case <-w.all:
	case err = <-runErr:
		err = fmt.Errorf("processor stopped early: %w", err)
	}
	res.Elapsed = time.Since(start)
	r.progress.Stop()
	atStop := p.Stats()
	if closeErr := p.Close(context.WithoutCancel(ctx)); err == nil {
		err = closeErr
		if err == nil {
			err = <-runErr
		}
	}
	lat, peak := w.results()
	res.Messages, res.PeakInFlightBytes = min(len(lat), r.cfg.n), peak
	summarize(&res, lat)
	st := p.Stats()
	res.PeakBuffered, res.BufferedAtStop, res.AbandonedAtStop = st.PeakBuffered, atStop.Buffered, st.Abandoned
	if st.HandlerErrors+st.SettleErrors+st.LocksLost > 0 {
		res.Errors = int(st.HandlerErrors + st.LocksLost)
		res.FirstErr = fmt.Errorf("%d handler errors, %d settle errors, %d locks lost", st.HandlerErrors, st.SettleErrors, st.LocksLost)
	}
	if err != nil {
		return res, err
	}
	return res, r.drain(ctx, total-int(st.Completed))
}

// watch wraps the processor's receiver to time every message from its receipt to its
// completion, to track the bytes of received messages not yet settled, and to signal
// when want messages were completed. It is safe for concurrent use.
type watch struct {
	sbenv.Receiver
	want     int64
	all      chan struct{} // closed at the want-th completion
	progress *Progress

	completed atomic.Int64
	mu        sync.Mutex
	received  map[*azservicebus.ReceivedMessage]time.Time
	lat       []time.Duration
	held      int64
	peak      int64
}

func (w *watch) ReceiveMessages(ctx context.Context, n int, opts *azservicebus.ReceiveMessagesOptions) ([]*azservicebus.ReceivedMessage, error) {
	msgs, err := w.Receiver.ReceiveMessages(ctx, n, opts)
	now := time.Now()
	w.mu.Lock()
	for _, m := range msgs {
		w.received[m] = now
		w.held += int64(len(m.Body))
	}
	w.peak = max(w.peak, w.held)
	w.mu.Unlock()
	return msgs, err
}

func (w *watch) CompleteMessage(ctx context.Context, m *azservicebus.ReceivedMessage, opts *azservicebus.CompleteMessageOptions) error {
	err := w.Receiver.CompleteMessage(ctx, m, opts)
	if err != nil {
		return err
	}
	now := time.Now()
	w.mu.Lock()
	w.lat = append(w.lat, now.Sub(w.received[m]))
	w.release(m)
	w.mu.Unlock()
	w.progress.Add(1)
	if w.completed.Add(1) == w.want {
		close(w.all)
	}
	return nil
}

func (w *watch) AbandonMessage(ctx context.Context, m *azservicebus.ReceivedMessage, opts *azservicebus.AbandonMessageOptions) error {
	w.mu.Lock()
	w.release(m)
	w.mu.Unlock()
	return w.Receiver.AbandonMessage(ctx, m, opts)
}

// release forgets m; w.mu must be held.
func (w *watch) release(m *azservicebus.ReceivedMessage) {
	if _, ok := w.received[m]; ok {
		delete(w.received, m)
		w.held -= int64(len(m.Body))
	}
}

func (w *watch) results() ([]time.Duration, int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.lat, w.peak
}
