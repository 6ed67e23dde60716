// Command outage compares what a downstream outage costs a queue under four ways of
// handling failures: plain abandon, AbandonDelay, delayed redelivery through the broker,
// and delayed redelivery with the circuit breaker. An in-memory Service Bus (sbtest)
// holds -n messages (MaxDeliveryCount 10, 30 s locks); the handler's downstream fails
// every call for -outage; the program prints, per mode, the messages dead-lettered, the
// deliveries the broker made, the handler calls during the outage and the time to drain
// the queue after the recovery. Durations run -scale times as fast as they read
// (default 0.1: the 30 s outage lasts 3 s), and are printed in scenario time; the test
// TestOutage runs the same scenario at scale 1 in virtual time (testing/synctest). With
// -wire the real azservicebus client talks AMQP to the broker (sbtest.NewServer).
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/sbkit/sbkit/sbtest"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout); err != nil {
		if err == flag.ErrHelp {
			return
		}
		fmt.Fprintln(os.Stderr, "outage:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("outage", flag.ContinueOnError)
	n := fs.Int("n", 1000, "messages in the queue")
	outage := fs.Duration("outage", 30*time.Second, "how long the downstream fails every call (scenario time)")
	scale := fs.Float64("scale", 0.1, "real time per scenario time (0.1: ten times as fast)")
	concurrency := fs.Int("concurrency", 8, "handlers (MaxConcurrency)")
	wire := fs.Bool("wire", false, "serve the in-memory broker over AMQP (sbtest.NewServer) to the real azservicebus client")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *n <= 0 || *scale <= 0 || *outage <= 0 || *concurrency <= 0 {
		return fmt.Errorf("-n, -outage, -scale and -concurrency must be positive")
	}
	c := config{n: *n, outage: *outage, callTime: 5 * time.Millisecond, concurrency: *concurrency, scale: *scale,
		limit: 10 * time.Minute, wire: *wire}
	if *scale >= 1 {
		c.latency = sbtest.Latency{RoundTrip: 7 * time.Millisecond, StoreTime: time.Millisecond}
	}
	where := "in memory"
	if c.wire {
		where = "azservicebus over AMQP to sbtest.NewServer"
	}
	fmt.Fprintf(out, "%d messages, MaxDeliveryCount 10, downstream down for %v, %d handlers, time scale %g, %s\n\n",
		c.n, c.outage, c.concurrency, c.scale, where)
	results := make([]result, 0, len(modes))
	for _, m := range modes {
		r, err := runMode(ctx, m, c)
		if err != nil {
			return err
		}
		results = append(results, r)
	}
	printTable(out, results, c.outage)
	return nil
}

// printTable writes results as a table.
func printTable(out io.Writer, results []result, outage time.Duration) {
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "mode\tdead-lettered\tdeliveries\tcalls during outage\tcalls/s during outage\tdrain after recovery\tcompleted\t")
	for _, r := range results {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%.1f\t%v\t%d\t\n", r.mode, r.deadLettered, r.deliveries, r.callsDuringOutage,
			float64(r.callsDuringOutage)/outage.Seconds(), r.drain.Round(100*time.Millisecond), r.completed)
	}
	_ = tw.Flush()
}
