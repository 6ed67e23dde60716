package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/sbkit/sbkit"
	"github.com/sbkit/sbkit/examples/internal/sbenv"
)

// runner runs the modes against one connection, whose in-memory broker's round trip is
// rtt (0 on a real namespace).
type runner struct {
	cfg      *config
	conn     *sbenv.Conn
	progress *Progress
	rtt      time.Duration
	body     []byte
}

func newRunner(cfg *config, conn *sbenv.Conn, progress *Progress, rtt time.Duration) *runner {
	body := make([]byte, cfg.size)
	for i := range body {
		body[i] = 'a' + byte(i%26)
	}
	return &runner{cfg: cfg, conn: conn, progress: progress, rtt: rtt, body: body}
}

// message returns a new message with a fresh MessageID; senders may modify it.
func (r *runner) message() *azservicebus.Message {
	id := sbkit.NewMessageID()
	return &azservicebus.Message{MessageID: &id, Body: r.body}
}

// sendMode runs one send mode with a metered sender. send must send r.cfg.n messages
// and return the per-message latencies of the successful ones and the errors of the
// failed ones. The queue is drained afterwards, untimed.
func (r *runner) sendMode(ctx context.Context, mode string, param int,
	send func(ctx context.Context, s sbkit.BatchSender) (lat []time.Duration, errs []error)) (Result, error) {
	res := Result{Mode: mode, Param: param, Kind: KindSend, RTT: r.rtt}
	s, err := r.conn.NewSender()
	if err != nil {
		return res, err
	}
	defer s.Close(context.WithoutCancel(ctx))
	m := &meter{BatchSender: s}
	r.progress.Start(res.Name(), r.cfg.n)
	start := time.Now()
	lat, errs := send(ctx, m)
	res.Elapsed = time.Since(start)
	r.progress.Stop()
	res.Messages, res.Errors = len(lat), len(errs)
	res.PeakInFlightBytes = m.peak.Load()
	summarize(&res, lat)
	if err := ctx.Err(); err != nil {
		return res, err
	}
	if len(errs) > 0 {
		res.FirstErr = errs[0]
	}
	return res, r.drain(ctx, res.Messages)
}

// sequential sends one message at a time and waits for each outcome.
func (r *runner) sequential(ctx context.Context) (Result, error) {
	return r.sendMode(ctx, "sequential", 0, func(ctx context.Context, s sbkit.BatchSender) ([]time.Duration, []error) {
		lat := make([]time.Duration, 0, r.cfg.n)
		var errs []error
		for range r.cfg.n {
			t0 := time.Now()
			if err := s.SendMessage(ctx, r.message(), nil); err != nil {
				errs = append(errs, err)
				if ctx.Err() != nil {
					break
				}
			} else {
				lat = append(lat, time.Since(t0))
			}
			r.progress.Add(1)
		}
		return lat, errs
	})
}

// goroutines starts one goroutine per message, all at once: fast, and unbounded in
// memory and in requests in flight.
func (r *runner) goroutines(ctx context.Context) (Result, error) {
	return r.sendMode(ctx, "goroutines", 0, func(ctx context.Context, s sbkit.BatchSender) ([]time.Duration, []error) {
		var (
			mu   sync.Mutex
			lat  = make([]time.Duration, 0, r.cfg.n)
			errs []error
			wg   sync.WaitGroup
		)
		for range r.cfg.n {
			msg := r.message()
			wg.Go(func() {
				t0 := time.Now()
				err := s.SendMessage(ctx, msg, nil)
				d := time.Since(t0)
				mu.Lock()
				if err != nil {
					errs = append(errs, err)
				} else {
					lat = append(lat, d)
				}
				mu.Unlock()
				r.progress.Add(1)
			})
		}
		wg.Wait()
		return lat, errs
	})
}

// drain removes n messages from the queue (receive-and-delete), untimed, so that the next
// mode starts from an empty queue. It gives up when the queue stays empty for 5 seconds.
func (r *runner) drain(ctx context.Context, n int) error {
	rc, err := r.conn.NewReceiver(azservicebus.ReceiveModeReceiveAndDelete)
	if err != nil {
		return err
	}
	defer rc.Close(context.WithoutCancel(ctx))
	for got := 0; got < n; {
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		msgs, err := rc.ReceiveMessages(rctx, min(n-got, 1000), nil)
		cancel()
		got += len(msgs)
		switch {
		case ctx.Err() != nil:
			return ctx.Err()
		case errors.Is(err, context.DeadlineExceeded) || (err == nil && len(msgs) == 0):
			return fmt.Errorf("drain: queue empty after %d of %d messages", got, n)
		case err != nil:
			return fmt.Errorf("drain: %w", err)
		}
	}
	return nil
}

// fill puts n messages in the queue with batches, untimed, for the processor modes.
func (r *runner) fill(ctx context.Context, n int) error {
	s, err := r.conn.NewSender()
	if err != nil {
		return err
	}
	defer s.Close(context.WithoutCancel(ctx))
	for sent := 0; sent < n; {
		b, err := s.NewBatch(ctx, nil)
		if err != nil {
			return fmt.Errorf("fill: %w", err)
		}
		for sent+int(b.NumMessages()) < n {
			if err := b.AddMessage(r.message(), nil); errors.Is(err, azservicebus.ErrMessageTooLarge) {
				break
			} else if err != nil {
				return fmt.Errorf("fill: %w", err)
			}
		}
		if b.NumMessages() == 0 {
			return fmt.Errorf("fill: a %d-byte message does not fit in a batch", len(r.body))
		}
		if err := s.SendBatch(ctx, b, nil); err != nil {
			return fmt.Errorf("fill: %w", err)
		}
		sent += int(b.NumMessages())
	}
	return nil
}
