// Command worker fulfils the orders waiting in a Service Bus queue with sbkit's processor:
// bounded concurrency, automatic lock renewal, duplicate skipping (dedupe, in-memory
// store), typed JSON decoding that dead-letters what cannot be decoded (serialize), an
// expiry policy, and a graceful shutdown on SIGINT or SIGTERM.
//
// It runs against an in-memory broker with a realistic latency model by default, with a
// backlog of orders already queued: among them a duplicate, a malformed message, an
// invalid order, one that expires in the queue and a bulk order that outlives its lock.
// It stops when the queue has been idle for -idle. Set SBKIT_CONNECTION_STRING (and
// SBKIT_QUEUE, default "orders") to work on a real namespace instead; the code is the same.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/sbkit/sbkit"
	"github.com/sbkit/sbkit/dedupe"
	"github.com/sbkit/sbkit/examples/internal/sbenv"
	"github.com/sbkit/sbkit/receiver"
	"github.com/sbkit/sbkit/sbtest"
	"github.com/sbkit/sbkit/serialize"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Getenv); err != nil && !errors.Is(err, flag.ErrHelp) {
		fmt.Fprintln(os.Stderr, "worker:", err)
		os.Exit(1)
	}
}

// run works until ctx ends, the queue is idle for -idle, or -duration passes, then shuts
// down gracefully and prints a summary.
func run(ctx context.Context, args []string, stdout io.Writer, getenv func(string) string) error {
	fs := flag.NewFlagSet("worker", flag.ContinueOnError)
	fs.SetOutput(stdout)
	concurrency := fs.Int("concurrency", 4, "orders fulfilled at the same time")
	unit := fs.Duration("unit", 10*time.Millisecond, "time to pick and pack one unit of an order")
	idle := fs.Duration("idle", time.Second, "stop once no message has been handled for this long (0: never)")
	duration := fs.Duration("duration", 0, "stop after this long (0: no limit)")
	grace := fs.Duration("grace", 10*time.Second, "on shutdown, how long orders in progress may take to finish")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *concurrency <= 0 || *unit < 0 || *idle < 0 || *duration < 0 || *grace < 0 {
		return errors.New("-concurrency must be positive and durations not negative")
	}
	out := log.New(stdout, "", 0) // safe for concurrent use by handlers

	conn, err := sbenv.Open(&sbenv.Options{Getenv: getenv, Latency: sbenv.RealisticLatency, Queue: backlogQueue})
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if conn.InMemory() {
		if err := fillBacklog(ctx, conn); err != nil {
			return err
		}
	}
	rc, err := conn.NewReceiver(azservicebus.ReceiveModePeekLock)
	if err != nil {
		return err
	}
	defer rc.Close(context.WithoutCancel(ctx))

	reg, err := serialize.New(nil)
	if err != nil {
		return err
	}
	dupes, err := dedupe.New(nil, &dedupe.Options{ // nil store: in-memory, this process only
		Entity: conn.QueueName,
		Hooks: dedupe.Hooks{OnDuplicate: func(_ context.Context, _ string, m *azservicebus.ReceivedMessage) {
			out.Printf("  skipped    %s: already fulfilled (duplicate delivery)", m.MessageID)
		}},
	})
	if err != nil {
		return err
	}
	f := &fulfiller{out: out, unit: *unit}
	handler := sbkit.Chain(
		serialize.Handler(reg, f.fulfil, serialize.OnDecodeError(f.undecodable)),
		receiver.Expiry(&receiver.ExpiryOptions{Policy: receiver.ExpiredDeadLetter, Deadline: true}),
		dupes.Middleware(),
	)
	renewFor := 30 * time.Minute
	p, err := receiver.New(rc, handler, &receiver.Options{
		MaxConcurrency:             *concurrency,
		MaxAutoLockRenewalDuration: &renewFor,
		AbandonDelay:               receiver.ExponentialAbandonDelay(time.Second, time.Minute),
		OnError: func(e *receiver.Error) {
			if e.Source != receiver.SourceHandler { // handler outcomes are printed by the handler
				out.Printf("  error      %v", e)
			}
		},
	})
	if err != nil {
		return err
	}

	out.Printf("worker: %d at a time from the %s", *concurrency, conn)
	start := time.Now()
	err = runUntilDone(ctx, p, *idle, *duration, *grace)
	printSummary(out, time.Since(start), p.Stats(), dupes.Stats(), conn)
	return err
}

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

// backlogQueue configures the in-memory queue. The 1s lock is short so that the bulk
// order outlives it and the processor's lock renewal shows; real queues default to 60s.
var backlogQueue = &sbtest.EntityOptions{
	LockDuration:           time.Second,
	MaxDeliveryCount:       5,
	DeadLetterOnExpiration: true,
}
