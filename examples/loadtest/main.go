// Command loadtest measures the throughput and latency of every sending and receiving
// mode of sbkit against an in-memory Service Bus with a configurable latency model, or
// against a real namespace, and prints a comparison table. Run it with -h for the flags.
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
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var progress io.Writer
	if isTerminal(os.Stderr) && isTerminal(os.Stdout) {
		progress = os.Stderr
	}
	err := run(ctx, os.Args[1:], os.Stdout, progress, os.Getenv)
	if errors.Is(err, flag.ErrHelp) {
		return
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "loadtest:", err)
		os.Exit(1)
	}
}
