package main

import (
	"context"
	"errors"
	"fmt"
	"log"
	"log/slog"
	"time"

	"github.com/sbkit/sbkit/dedupe"
	"github.com/sbkit/sbkit/examples/internal/sbenv"
	"github.com/sbkit/sbkit/receiver"
)

// runUntilDone runs p until ctx ends, p has been idle for idle, or duration passes, and
// logs why it stops. The processor's ShutdownGrace then lets the handlers in progress
// finish: cancelling Run's context is the whole shutdown.
func runUntilDone(ctx context.Context, p *receiver.Processor, idle, duration time.Duration, logger *slog.Logger) error {
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	if duration > 0 {
		var cancel context.CancelFunc
		runCtx, cancel = context.WithTimeout(runCtx, duration)
		defer cancel()
	}
	done := make(chan error, 1)
	go func() { done <- p.Run(runCtx) }()
	if err := waitIdle(runCtx, p, idle, done); err != nil { // Run returned by itself
		return err
	}
	reason := fmt.Sprintf("idle for %v", idle)
	switch {
	case ctx.Err() != nil:
		reason = "signal" // or the caller's context
	case runCtx.Err() != nil:
		reason = fmt.Sprintf("ran for %v", duration)
	}
	logger.Info("worker: stopping", "reason", reason)
	stop()
	err := <-done
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		err = nil // the shutdown asked for
	}
	if left := p.Stats().LeftLocked; err == nil && left > 0 {
		err = fmt.Errorf("shutdown: %d messages left locked until their locks expire", left)
	}
	return err
}

// waitIdle returns nil when stop ends or p has handled nothing and holds nothing for
// idle (0: never), and Run's error if Run returns first. A Run that returned because stop
// ended is the shutdown asked for: its result is put back in done for the caller.
func waitIdle(stop context.Context, p *receiver.Processor, idle time.Duration, done chan error) error {
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	last, lastChange := p.Stats(), time.Now()
	for {
		select {
		case <-stop.Done():
			return nil
		case err := <-done:
			if stop.Err() != nil { // both were ready: stop ended Run
				done <- err
				return nil
			}
			return fmt.Errorf("processor stopped: %w", err)
		case now := <-tick.C:
			st := p.Stats()
			if st.Received != last.Received || st.Handled != last.Handled || st.InFlight+st.Buffered+st.Held > 0 {
				last, lastChange = st, now
			} else if idle > 0 && now.Sub(lastChange) >= idle {
				return nil
			}
		}
	}
}

// logStopped logs the outcome of the run: every received message's end, and the error
// that ended it, if any.
func logStopped(logger *slog.Logger, elapsed time.Duration, st receiver.Stats, err error) {
	attrs := []any{"received", st.Received, "completed", st.Completed, "deadLettered", st.DeadLettered,
		"abandoned", st.Abandoned, "locksLost", st.LocksLost, "leftLocked", st.LeftLocked,
		"elapsed", elapsed.Round(time.Millisecond)}
	if err != nil {
		logger.Error("worker: stopped", append(attrs, "error", err)...)
		return
	}
	logger.Info("worker: stopped", attrs...)
}

// printSummary reports what happened to every message; on the in-memory broker it also
// lists the dead-letter queue.
func printSummary(out *log.Logger, elapsed time.Duration, st receiver.Stats, ds dedupe.Stats, conn *sbenv.Conn) {
	out.Printf("worker: %d messages in %v: completed %d (duplicates skipped %d), dead-lettered %d, abandoned %d, locks lost %d, lock renewals %d",
		st.Received, elapsed.Round(10*time.Millisecond), st.Completed, ds.DuplicatesSkipped, st.DeadLettered, st.Abandoned, st.LocksLost, st.Renewed)
	if !conn.InMemory() {
		return
	}
	for _, m := range conn.Queue.DeadLetters() {
		out.Printf("  dead-letter queue: %s  reason %s: %.90s", m.MessageID, deref(m.DeadLetterReason), deref(m.DeadLetterErrorDescription))
	}
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
