package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/sbkit/sbkit/examples/internal/sbenv"
	"github.com/sbkit/sbkit/receiver"
)

// processor fills the queue with more messages than it uses (untimed), then runs sbkit's
// processor with concurrency handlers that each take r.cfg.handler and the prefetch
// setting pf ("auto", "none" or a count): a warm-up (see warmUp), then r.cfg.n timed
// completions, after which it stops it (in steady state: running handlers finish,
// buffered messages are abandoned) and drains what is left (untimed).
func (r *runner) processor(ctx context.Context, concurrency int, pf string) (Result, error) {
	res := Result{Mode: "processor", Param: concurrency, Kind: KindProcess, Prefetch: pf, RTT: r.rtt, Handler: r.cfg.handler}
	opts := &receiver.Options{MaxConcurrency: concurrency}
	switch pf {
	case "none":
		opts.DisablePrefetch = true
	case "auto", "":
	default:
		opts.PrefetchCount, _ = strconv.Atoi(pf) // validated by parseFlags
	}
	// More than the processor may hold, so that the queue never runs dry before the last
	// timed completion: the adaptive processor holds at most 65 × concurrency.
	warm := r.warmUp(concurrency)
	total := warm + r.cfg.n + max(65*concurrency, concurrency+opts.PrefetchCount) + 16
	if err := r.fill(ctx, total); err != nil {
		return res, err
	}
	rc, err := r.conn.NewReceiver(azservicebus.ReceiveModePeekLock)
	if err != nil {
		return res, err
	}
	defer rc.Close(context.WithoutCancel(ctx))
	w := &watch{Receiver: rc, warm: int64(warm), want: int64(warm + r.cfg.n), warmed: make(chan struct{}),
		all: make(chan struct{}), progress: r.progress, received: make(map[*azservicebus.ReceivedMessage]time.Time)}
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

	r.progress.Start(res.Name(), warm+r.cfg.n)
	runErr := make(chan error, 1)
	go func() { runErr <- p.Run(ctx) }()
	var start time.Time
	select {
	case <-w.warmed:
		start = time.Now()
		select {
		case <-w.all:
		case err = <-runErr:
			err = stoppedEarly(err)
		}
	case err = <-runErr:
		err = stoppedEarly(err)
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
	lat = lat[:res.Messages]
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

// stoppedEarly is the error of a processor whose Run returned err before its last
// timed completion.
func stoppedEarly(err error) error {
	if err == nil {
		return errors.New("processor stopped early")
	}
	return fmt.Errorf("processor stopped early: %w", err)
}

// warmUp is how many completions a processor with concurrency handlers is given to reach
// its steady state before it is timed, at most r.cfg.n: what its handlers drain in three
// round trips (the adaptive prefetch's first measurements and first full receive), and a
// tenth of r.cfg.n on a real namespace, whose round trip is not known in advance.
func (r *runner) warmUp(concurrency int) int {
	w := concurrency
	if r.cfg.handler > 0 {
		w += int(3 * r.rtt * time.Duration(concurrency) / r.cfg.handler)
	}
	if !r.conn.InMemory() {
		w = max(w, r.cfg.n/10)
	}
	return min(r.cfg.n, w)
}

// watch wraps the processor's receiver to time every message after the warm-up from its
// receipt to its completion, to track the bytes of received messages not yet settled,
// and to signal the end of the warm-up and the want-th completion. It is safe for
// concurrent use.
type watch struct {
	sbenv.Receiver
	warm     int64         // completions before the timed ones
	want     int64         // completions in all
	warmed   chan struct{} // closed at the warm-th completion
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
	n := w.completed.Add(1)
	w.mu.Lock()
	if n > w.warm {
		w.lat = append(w.lat, now.Sub(w.received[m]))
	}
	w.release(m)
	w.mu.Unlock()
	w.progress.Add(1)
	switch n {
	case w.want:
		close(w.all)
	case w.warm:
		close(w.warmed)
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
