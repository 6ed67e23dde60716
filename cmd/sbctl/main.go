// Command sbctl is the operator's command for Azure Service Bus: it inspects, exports,
// imports, re-drives and purges dead-letter queues (package deadletter), peeks at and
// sends messages, and prints the runtime counts of every entity, against any namespace
// or an emulator (Microsoft's, or sbemulator).
//
//	sbctl dlq summary --queue orders
//	sbctl dlq redrive --queue orders --reason MaxDeliveryCountExceeded --dry-run
//	sbctl stats --json
//
// The connection comes from --connection-string or SERVICEBUS_CONNECTION_STRING (a
// connection string with UseDevelopmentEmulator=true reaches an emulator), or from
// --namespace (SERVICEBUS_NAMESPACE) with azidentity's DefaultAzureCredential. Run
// `sbctl -h` and `sbctl COMMAND -h` for every command, flag, example and exit code.
//
// sbctl is a module of its own (it needs azidentity, which the core does not): build it
// from a clone with `cd cmd/sbctl && go build`.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"
)

// Exit codes, for scripts and CI jobs (the usage lists them).
const (
	exitOK          = 0   // the operation did all it was asked to
	exitError       = 1   // the operation could not run (connection, entity, permission, input)
	exitUsage       = 2   // bad command line
	exitPartial     = 3   // it ran, but some messages failed and are still where they were
	exitPermanent   = 4   // it stopped at a permanent failure (--stop-on-failure)
	exitInterrupted = 130 // SIGINT or SIGTERM: it stopped taking messages and finished what was in flight
)

const exitCodes = `Exit codes:
  0    done: everything asked for was done
  1    error: the operation could not run (connection, entity, permission, bad input)
  2    usage: bad command line
  3    partial: it ran, but some messages failed and stay where they were (see the report)
  4    stopped at the first permanent failure (--stop-on-failure)
  130  interrupted (SIGINT/SIGTERM): it stopped taking messages, finished what was in flight
       and reported what moved
`

const usage = `sbctl: the operator's command for Azure Service Bus

Usage:
  sbctl dlq summary  --queue Q | --topic T --subscription S   counts by reason, source, age (peek)
  sbctl dlq list     ENTITY [filters] [--max N]               the dead letters, every field (peek)
  sbctl dlq export   ENTITY [filters] [-o FILE] [--move]      JSON Lines; --move completes what was written
  sbctl dlq import   --queue Q | --topic T -i FILE            send exported records
  sbctl dlq redrive  ENTITY [filters] [--to DEST]             send copies back, complete the originals
  sbctl dlq purge    ENTITY [filters] [--sequence-numbers N,M] delete dead letters
  sbctl peek         ENTITY [--dlq] [--max N]                 look at messages without locking them
  sbctl send         --queue Q | --topic T --body TEXT        send a message (or --count N of them)
  sbctl stats                                                 runtime counts of every entity
  sbctl version                                               sbctl's version and the sbkit it runs

Connection (every command):
  --connection-string S   or SERVICEBUS_CONNECTION_STRING (UseDevelopmentEmulator=true for an emulator)
  --namespace NS          or SERVICEBUS_NAMESPACE: NS.servicebus.windows.net with DefaultAzureCredential
  --admin-ca FILE         or SBCTL_ADMIN_CA: a PEM certificate to trust for the administration API
                          (an emulator's self-signed one: sbemulator -cert FILE)

Examples:
  export SERVICEBUS_CONNECTION_STRING='Endpoint=sb://localhost;SharedAccessKeyName=k;SharedAccessKey=v;UseDevelopmentEmulator=true'
  sbctl dlq summary --queue orders
  sbctl dlq list --queue orders --reason MaxDeliveryCountExceeded --max 20 --json
  sbctl dlq export --queue orders -o orders-dlq.jsonl
  sbctl dlq redrive --queue orders --enqueued-after 2026-01-01T00:00:00Z --dry-run
  sbctl dlq redrive --queue orders --rate 200 --stop-on-failure
  sbctl dlq redrive --topic events --subscription audit --apply-rules
  sbctl dlq import --queue orders-replay -i orders-dlq.jsonl
  sbctl dlq purge --queue orders --reason TTLExpiredException --dry-run
  sbctl peek --queue orders --max 5
  sbctl send --queue orders --body '{"id":1}' --content-type application/json
  sbctl stats --json

` + exitCodes

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// run runs the command line args and returns the exit code.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprint(stdout, usage)
		if len(args) == 0 {
			return exitUsage
		}
		return exitOK
	}
	if args[0] == "version" || args[0] == "-version" || args[0] == "--version" {
		fmt.Fprintln(stdout, versionLine(debug.ReadBuildInfo()))
		return exitOK
	}
	env := envFromOS()
	io := ioStreams{in: stdin, out: stdout, err: stderr}
	var err error
	switch args[0] {
	case "dlq":
		if len(args) < 2 {
			fmt.Fprint(stderr, usage)
			return exitUsage
		}
		err = runDLQ(ctx, args[1], args[2:], env, io)
	case "peek":
		err = runPeek(ctx, args[1:], env, io)
	case "send":
		err = runSend(ctx, args[1:], env, io)
	case "stats":
		err = runStats(ctx, args[1:], env, io)
	default:
		fmt.Fprintf(stderr, "sbctl: unknown command %q\n\n%s", args[0], usage)
		return exitUsage
	}
	return exitCode(ctx, err, stderr)
}

// exitCode reports err on stderr and maps it to an exit code.
func exitCode(ctx context.Context, err error, stderr io.Writer) int {
	var u usageError
	var p partialError
	switch {
	case err == nil:
		return exitOK
	case errors.Is(err, flag.ErrHelp):
		return exitOK
	case errors.As(err, &u):
		fmt.Fprintf(stderr, "sbctl: %v\n", err)
		return exitUsage
	case ctx.Err() != nil:
		fmt.Fprintf(stderr, "sbctl: interrupted: %v\n", err)
		return exitInterrupted
	case errors.As(err, &p):
		fmt.Fprintf(stderr, "sbctl: %v\n", err)
		if p.permanent {
			return exitPermanent
		}
		return exitPartial
	default:
		fmt.Fprintf(stderr, "sbctl: %v\n", err)
		return exitError
	}
}

// usageError is a bad command line.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func usagef(format string, a ...any) error { return usageError{fmt.Sprintf(format, a...)} }

// partialError is an operation that ran but left messages behind.
type partialError struct {
	msg       string
	permanent bool
}

func (e partialError) Error() string { return e.msg }

type ioStreams struct {
	in       io.Reader
	out, err io.Writer
}
