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
//
// What happens to each order is told on stdout; the log goes to stderr through log/slog,
// as a worker in production would log: its start and stop at Info, every error and lost
// lock at Warn, settlements at Debug (-log-level), never payloads.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/sbkit/sbkit"
	"github.com/sbkit/sbkit/dedupe"
	"github.com/sbkit/sbkit/examples/internal/sbenv"
	"github.com/sbkit/sbkit/examples/internal/telemetry"
	"github.com/sbkit/sbkit/receiver"
	"github.com/sbkit/sbkit/sbtest"
	"github.com/sbkit/sbkit/serialize"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr, os.Getenv); err != nil && !errors.Is(err, flag.ErrHelp) {
		fmt.Fprintln(os.Stderr, "worker:", err)
		os.Exit(1)
	}
}

// run works until ctx ends, the queue is idle for -idle, or -duration passes, then shuts
// down gracefully and prints a summary. The story of the orders goes to stdout, the log
// (-log-level) to stderr.
func run(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string) error {
	fs := flag.NewFlagSet("worker", flag.ContinueOnError)
	fs.SetOutput(stdout)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), "worker fulfils the orders of a queue with sbkit's processor, then stops when idle.\n\nFlags:\n")
		fs.PrintDefaults()
		fmt.Fprint(fs.Output(), "\n"+sbenv.EnvHelp)
	}
	concurrency := fs.Int("concurrency", 4, "orders fulfilled at the same time")
	unit := fs.Duration("unit", 10*time.Millisecond, "time to pick and pack one unit of an order")
	idle := fs.Duration("idle", time.Second, "stop once no message has been handled for this long (0: never)")
	duration := fs.Duration("duration", 0, "stop after this long (0: no limit)")
	grace := fs.Duration("grace", 10*time.Second, "on shutdown, how long orders in progress may take to finish")
	lock := fs.Duration("lock", time.Second, "in-memory broker: the queue's lock duration (short, so that the bulk order needs renewals)")
	var level slog.Level
	fs.TextVar(&level, "log-level", slog.LevelInfo, "log to stderr from this level: debug adds settlements, renewals and duplicates; warn only problems")
	var obs telemetry.Flags
	obs.Register(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *concurrency <= 0 || *unit < 0 || *idle < 0 || *duration < 0 || *grace < 0 || *lock <= 0 {
		return errors.New("-concurrency and -lock must be positive, durations not negative")
	}
	out := log.New(stdout, "", 0) // safe for concurrent use by handlers
	// The log: the worker's lifecycle at Info; at Warn what went wrong (failed receives,
	// handler errors, failed settlements and renewals, lost locks, undecodable messages,
	// store errors); at Debug each settlement, renewal and skipped duplicate. sbkit never
	// logs payloads, and logs nothing at all without a Logger.
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	tel, err := telemetry.Start(obs, "worker", stdout)
	if err != nil {
		return err
	}
	defer tel.Close(ctx)

	queue := &sbtest.EntityOptions{LockDuration: *lock, MaxDeliveryCount: 5, DeadLetterOnExpiration: true}
	conn, err := sbenv.Open(&sbenv.Options{Getenv: getenv, Latency: sbenv.RealisticLatency, Queue: queue})
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if conn.InMemory() {
		if err := fillBacklog(ctx, conn, tel.Telemetry.Sender(conn.QueueName)); err != nil {
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
	// The OpenTelemetry hook: a span per handler call in the producer's trace, lock and
	// duplicate events, and the processor's metrics.
	hook := tel.Telemetry.Processor(conn.QueueName, "")
	store, err := dedupe.NewMemoryStore(nil) // this process only; use redisdedupe for many workers
	if err != nil {
		return err
	}
	dupes, err := dedupe.New(store, &dedupe.Options{
		Entity: conn.QueueName,
		Logger: logger,
		Hooks: []dedupe.Hook{hook, dedupe.DuplicateHookFunc(func(_ context.Context, e dedupe.Duplicate) {
			out.Printf("  skipped    %s: already fulfilled (duplicate delivery)", e.Message.MessageID)
		})},
	})
	if err != nil {
		return err
	}
	f := &fulfiller{out: out, unit: *unit}
	typed, err := serialize.Handler(reg, f.fulfil, &serialize.HandlerOptions{
		Hooks:  []serialize.Hook{serialize.DecodeErrorHookFunc(f.undecodable)},
		Logger: logger,
	})
	if err != nil {
		return err
	}
	handler := sbkit.Chain(
		typed,
		receiver.Expiry(&receiver.ExpiryOptions{Policy: receiver.ExpiredDeadLetter, Deadline: true}),
		dupes.Middleware(),
	)
	p, err := receiver.New(rc, handler, &receiver.Options{
		MaxConcurrency:             *concurrency,
		MaxAutoLockRenewalDuration: 30 * time.Minute,
		AbandonDelay:               receiver.ExponentialAbandonDelay(time.Second, time.Minute),
		ShutdownGrace:              *grace,
		Hooks:                      []receiver.Hook{hook},
		Logger:                     logger, // errors and lost locks at Warn
	})
	if err != nil {
		return err
	}
	// Gauges of running handlers, buffered and held messages; they end with the meter
	// provider (call Unregister if p goes away before it).
	if _, err := hook.Observe(p); err != nil {
		return err
	}

	out.Printf("worker: %d at a time from the %s", *concurrency, conn)
	logger.Info("worker: started", "queue", conn.QueueName, "concurrency", *concurrency, "inMemory", conn.InMemory())
	start := time.Now()
	err = runUntilDone(ctx, p, *idle, *duration, logger)
	elapsed := time.Since(start)
	logStopped(logger, elapsed, p.Stats(), err)
	printSummary(out, elapsed, p.Stats(), dupes.Stats(), conn)
	return err
}
