package main

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/sbkit/sbkit/dedupe"
	"github.com/sbkit/sbkit/examples/internal/sbenv"
	"github.com/sbkit/sbkit/receiver"
	"github.com/sbkit/sbkit/serialize"
)

// runUntilDone runs p until ctx ends, p has been idle for idle, or duration passes, then
// closes it, giving the handlers in progress up to grace to finish.
func runUntilDone(ctx context.Context, p *receiver.Processor, idle, duration, grace time.Duration) error {
	stop := ctx
	if duration > 0 {
		var cancel context.CancelFunc
		stop, cancel = context.WithTimeout(ctx, duration)
		defer cancel()
	}
	done := make(chan error, 1)
	go func() { done <- p.Run(context.Background()) }() // stopped by Close, so handlers may finish
	err := waitIdle(stop, p, idle, done)
	if err != nil { // Run returned by itself: a permanent receive error
		return err
	}
	closeCtx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	if err := p.Close(closeCtx); err != nil {
		return fmt.Errorf("shutdown: handlers cancelled after %v: %w", grace, err)
	}
	return <-done
}

// waitIdle returns nil when stop ends or p has handled nothing and holds nothing for
// idle (0: never), and Run's error if Run returns first.
func waitIdle(stop context.Context, p *receiver.Processor, idle time.Duration, done <-chan error) error {
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	last, lastChange := p.Stats(), time.Now()
	for {
		select {
		case <-stop.Done():
			return nil
		case err := <-done:
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

// printSummary reports what happened to every message; on the in-memory broker it also
// lists the dead-letter queue.
func printSummary(out *log.Logger, elapsed time.Duration, st receiver.Stats, ds dedupe.Stats, conn *sbenv.Conn) {
	out.Printf("worker: %d messages in %v: completed %d (duplicates skipped %d), dead-lettered %d, abandoned %d, locks lost %d, lock renewals %d",
		st.Received, elapsed.Round(10*time.Millisecond), st.Completed, ds.Duplicates, st.DeadLettered, st.Abandoned, st.LockLost, st.Renewed)
	if !conn.InMemory() {
		return
	}
	for _, m := range conn.Queue.DeadLetters() {
		out.Printf("  dead-letter queue: %s  reason %s: %s", m.MessageID, deref(m.DeadLetterReason), serialize.Truncate(deref(m.DeadLetterErrorDescription), 90))
	}
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
