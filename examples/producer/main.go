// Command producer is an order service that publishes a burst of orders to a Service Bus
// queue through sbkit's pipelined, batching sender, checks the outcome of every message
// and closes the sender on exit.
//
// It runs against an in-memory broker with a realistic latency model by default. Set
// SBKIT_CONNECTION_STRING (and SBKIT_QUEUE, default "orders") to publish to a real
// namespace instead; the code is the same.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/sbkit/sbkit/examples/internal/orders"
	"github.com/sbkit/sbkit/examples/internal/sbenv"
	"github.com/sbkit/sbkit/examples/internal/telemetry"
	"github.com/sbkit/sbkit/sender"
	"github.com/sbkit/sbkit/serialize"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Getenv); err != nil && !errors.Is(err, flag.ErrHelp) {
		fmt.Fprintln(os.Stderr, "producer:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, stdout io.Writer, getenv func(string) string) error {
	fs := flag.NewFlagSet("producer", flag.ContinueOnError)
	fs.SetOutput(stdout)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), "producer publishes a burst of JSON orders through sbkit's sender and checks every outcome.\n\nFlags:\n")
		fs.PrintDefaults()
		fmt.Fprint(fs.Output(), "\n"+sbenv.EnvHelp)
	}
	n := fs.Int("n", 40, "number of orders to publish")
	first := fs.Int("first", 1001, "number of the first order")
	ttl := fs.Duration("ttl", 24*time.Hour, "time-to-live of each order message")
	var obs telemetry.Flags
	obs.Register(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *n <= 0 || *ttl <= 0 {
		return errors.New("-n and -ttl must be positive")
	}
	tel, err := telemetry.Start(obs, "producer", stdout)
	if err != nil {
		return err
	}
	defer tel.Close(ctx)

	conn, err := sbenv.Open(&sbenv.Options{Getenv: getenv, Latency: sbenv.RealisticLatency})
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	dst, err := conn.NewSender()
	if err != nil {
		return err
	}
	defer dst.Close(context.WithoutCancel(ctx))
	// The OpenTelemetry hook: a span per order, whose context travels in the message.
	hook := tel.Telemetry.Sender(conn.QueueName)
	s, err := sender.New(dst, &sender.Options{DefaultTTL: *ttl, Hooks: []sender.Hook{hook}})
	if err != nil {
		return err
	}
	// Gauges of the messages and bytes in flight; they end with the meter provider (call
	// Unregister if s goes away before it).
	if _, err := hook.Observe(s); err != nil {
		return err
	}
	reg, err := serialize.New(nil)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "publishing %d orders to %s\n", *n, conn)

	start := time.Now()
	var results []*sender.Result
	var failed int
	for _, o := range orders.Generate(*n, *first, start) {
		msg, err := orders.NewMessage(reg, o)
		if err == nil {
			var res *sender.Result
			if res, err = s.SendAsync(ctx, msg); err == nil {
				results = append(results, res)
				continue
			}
		}
		failed++ // not accepted: no outcome will follow
		fmt.Fprintf(stdout, "  %s: not sent: %v\n", o.ID, err)
		if ctx.Err() != nil {
			break
		}
	}

	// Close sends what is still lingering and waits for every outcome (up to 30s).
	closeCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	if err := s.Close(closeCtx); err != nil {
		fmt.Fprintf(stdout, "  close: %v\n", err)
	}
	for _, res := range results {
		if err := res.Err(); err != nil {
			failed++
			fmt.Fprintf(stdout, "  %s: failed after %d attempt(s): %v\n", res.MessageID(), res.Attempts(), err)
		}
	}
	st := s.Stats()
	fmt.Fprintf(stdout, "%d accepted, %d failed in %v (%s, %s)\n", st.Sent, failed, time.Since(start).Round(time.Millisecond),
		orders.Plural(int(st.BatchesSent), "batch request"), orders.Plural(int(st.SendRetries), "retry"))
	if conn.InMemory() {
		fmt.Fprintf(stdout, "queue %q now holds %d messages\n", conn.QueueName, conn.Queue.Counts().Active)
	}
	if failed > 0 {
		return fmt.Errorf("%d of %d orders were not published", failed, *n)
	}
	return nil
}
