// Command sbemulator serves sbtest's in-memory Service Bus namespace over AMQP on a TCP
// address, so that the Service Bus SDKs of every language (and tools) can test against it
// without Docker. It prints the connection string on the first line of its standard
// output and runs until SIGINT or SIGTERM, then closes every connection and exits 0.
//
//	go run github.com/sbkit/sbkit/cmd/sbemulator -queue orders -topic events -subscription events/audit
//	go run github.com/sbkit/sbkit/cmd/sbemulator -config Config.json
//
// Entities come from flags and from a configuration file in the format of Microsoft's
// Service Bus emulator (UserConfig.Namespaces[].Queues/Topics/Subscriptions with their
// Properties). The latency model (-latency, -store-time, -store-concurrency) and fault
// injection (-fault) of sbtest are reachable from flags. Run with -h for every flag.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime/debug"
	"strings"
	"syscall"
	"time"

	"github.com/sbkit/sbkit/sbtest"
)

// defaultAddr is where the SDKs look for an emulator when the connection string has
// UseDevelopmentEmulator=true and no port: AMQP's port on loopback.
const defaultAddr = "127.0.0.1:5672"

// closeTimeout bounds the shutdown: connections are closed and the server's goroutines
// waited for at most this long.
const closeTimeout = 10 * time.Second

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr, nil); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(0) // -h printed the usage
		}
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
}

// run parses args, starts the server, writes the connection string to stdout and serves
// until ctx ends. ready, when not nil, receives the server once it listens (for tests).
func run(ctx context.Context, args []string, stdout, stderr io.Writer, ready chan<- *sbtest.Server) error {
	cfg, err := parseFlags(args, stderr)
	if err != nil {
		return err
	}
	if cfg.version {
		fmt.Fprintln(stdout, versionLine(debug.ReadBuildInfo()))
		return nil
	}
	level := slog.LevelWarn
	if cfg.verbose {
		level = slog.LevelDebug
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))

	ns := sbtest.NewNamespace(&sbtest.NamespaceOptions{
		MaxMessageSize: cfg.maxMessageSize,
		Latency:        cfg.latency,
	})
	start := time.Now()
	if err := cfg.entities.create(ns); err != nil {
		return err
	}
	if err := injectFaults(ns, cfg.faults); err != nil {
		return err
	}
	srv, err := sbtest.NewServer(&sbtest.ServerOptions{Addr: cfg.addr, Namespace: ns, Logger: logger,
		MaxConnections: cfg.maxConnections})
	if err != nil {
		return err
	}
	if cfg.cert != "" {
		if err := os.WriteFile(cfg.cert, srv.CertificatePEM(), 0o644); err != nil {
			closeCtx, cancel := context.WithTimeout(context.Background(), closeTimeout)
			defer cancel()
			_ = srv.Close(closeCtx)
			return fmt.Errorf("sbemulator: -cert: %w", err)
		}
	}
	fmt.Fprintln(stdout, srv.ConnectionString())
	fmt.Fprintf(stderr, "sbemulator: listening on %s (%d queues, %d topics) in %v; stop with Ctrl-C\n",
		srv.Addr(), len(cfg.entities.Queues), len(cfg.entities.Topics), time.Since(start).Round(time.Microsecond))
	if ready != nil {
		ready <- srv
	}
	<-ctx.Done()
	closeCtx, cancel := context.WithTimeout(context.Background(), closeTimeout)
	defer cancel()
	err = srv.Close(closeCtx)
	fmt.Fprintln(stderr, "sbemulator: stopped")
	return err
}

// config is what the flags say.
type config struct {
	addr           string
	cert           string
	verbose        bool
	version        bool
	maxMessageSize int
	maxConnections int
	latency        sbtest.Latency
	entities       *entities
	faults         []faultSpec
}

func parseFlags(args []string, stderr io.Writer) (*config, error) {
	fs := flag.NewFlagSet("sbemulator", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cfg := &config{entities: newEntities()}
	var queues, topics, subs, configFiles []string
	var entityOpts sbtest.EntityOptions
	fs.StringVar(&cfg.addr, "addr", defaultAddr, "TCP `address` to listen on (port 0 picks a free one)")
	fs.StringVar(&cfg.cert, "cert", "", "write the self-signed TLS certificate of AMQPS and the HTTPS administration API (PEM) to `file`, for clients to trust")
	fs.StringVar(&cfg.cert, "admin-cert", "", "the same as -cert (its former name)")
	fs.Func("config", "configuration `file` in the format of Microsoft's Service Bus emulator (repeatable)", appendTo(&configFiles))
	fs.Func("queue", "create a queue (repeatable; comma-separated `names` allowed)", appendTo(&queues))
	fs.Func("topic", "create a topic (repeatable; comma-separated `names` allowed)", appendTo(&topics))
	fs.Func("subscription", "create a subscription, and its topic if needed (`topic/name`; repeatable, comma-separated allowed)", appendTo(&subs))
	fs.DurationVar(&entityOpts.LockDuration, "lock-duration", 0, "lock `duration` of the entities created by flags (default 1m, at most 5m)")
	fs.IntVar(&entityOpts.MaxDeliveryCount, "max-delivery-count", 0, "max delivery `count` of the entities created by flags (default 10)")
	fs.DurationVar(&entityOpts.DefaultTTL, "default-ttl", 0, "default message time-to-live of the entities created by flags (default none)")
	fs.IntVar(&cfg.maxMessageSize, "max-message-size", 0, "largest message and batch in `bytes` (default 262144, the Standard tier's)")
	fs.IntVar(&cfg.maxConnections, "max-connections", 0, "connections served at once (default 64; negative means unlimited)")
	fs.DurationVar(&cfg.latency.RoundTrip, "latency", 0, "simulated round trip slept by every operation")
	fs.DurationVar(&cfg.latency.StoreTime, "store-time", 0, "simulated store time slept additionally by every send")
	fs.IntVar(&cfg.latency.StoreConcurrency, "store-concurrency", 0, "how many stores run at once (default unlimited)")
	fs.Func("fault", "inject a fault: `entity:op[:count[:error]]` with entity a queue, a topic (send only) or topic/Subscriptions/name, op one of send, receive, complete, abandon, deadletter, defer, renew, accept-session, renew-session-lock, session-state; count 0 (default) means until restart; error one of transient (default), lock-lost, unauthorized, hang (repeatable)", func(s string) error {
		f, err := parseFault(s)
		if err == nil {
			cfg.faults = append(cfg.faults, f)
		}
		return err
	})
	fs.BoolVar(&cfg.verbose, "v", false, "log connections, links and errors to stderr")
	fs.BoolVar(&cfg.version, "version", false, "print the version (the module's, from the build information) and exit")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("sbemulator: unexpected arguments %q (entities are declared with -queue, -topic, -subscription or -config)", fs.Args())
	}
	for _, f := range configFiles {
		if err := loadConfigFile(f, cfg.entities); err != nil {
			return nil, err
		}
	}
	for _, q := range queues {
		o := entityOpts
		if err := cfg.entities.addQueue(q, &o); err != nil {
			return nil, err
		}
	}
	for _, t := range topics {
		o := entityOpts
		if err := cfg.entities.addTopic(t, &o); err != nil {
			return nil, err
		}
	}
	for _, s := range subs {
		topic, name, ok := strings.Cut(s, "/")
		if !ok || topic == "" || name == "" {
			return nil, fmt.Errorf("sbemulator: -subscription %q: want topic/name", s)
		}
		o := entityOpts
		if err := cfg.entities.addSubscription(topic, name, &o); err != nil {
			return nil, err
		}
	}
	return cfg, nil
}

// appendTo returns a flag.Func that appends the flag's comma-separated values to dst.
func appendTo(dst *[]string) func(string) error {
	return func(s string) error {
		for _, v := range strings.Split(s, ",") {
			if v = strings.TrimSpace(v); v == "" {
				return errors.New("empty name")
			}
			*dst = append(*dst, v)
		}
		return nil
	}
}
