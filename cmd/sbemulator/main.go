// Command sbemulator serves sbtest's in-memory Service Bus namespace over AMQP on a TCP
// address, so that the Service Bus SDKs of every language (and tools) can test against it
// without Docker. It prints the connection string on the first line of its standard
// output and runs until SIGINT or SIGTERM, then closes every connection and exits 0.
//
//	go install github.com/sbkit/sbkit/cmd/sbemulator@latest
//	sbemulator -queue orders -topic events -subscription events/audit
//	sbemulator -config Config.json
//
// It stands in for Microsoft's Service Bus emulator: its Config.json as shipped (JSON
// with comments; UserConfig.Namespaces[].Queues/Topics/Subscriptions with their
// Properties), read from /ServiceBus_Emulator/ConfigFiles/Config.json when that file
// exists and no -config is given; AMQP on port 5672; the administration API over plain
// HTTP on port 5300 with GET /health (-http-addr, EMULATOR_HTTP_PORT), as well as over
// TLS on the AMQP port; the explorer, a web page that shows the entities, their counts
// and messages and sends, re-drives, purges and deletes messages, at / of that HTTP port
// (-disable-explorer leaves it out); -advertise HOST for the connection string and the
// certificate (-admin-cert writes it). Every flag can be set from the environment
// (SBEMULATOR_<FLAG>). The latency model (-latency, -store-time, -store-concurrency) and
// fault injection (-fault) of sbtest are reachable from flags. Run with -h for every
// flag and variable.
//
// Run the built binary in scripts, not go run: go run does not pass SIGTERM on to the
// program it built, so `kill $!` stops the go command and leaves the emulator running.
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
	if err := run(ctx, os.Args[1:], os.LookupEnv, os.Stdout, os.Stderr, nil); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(0) // -h printed the usage
		}
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
}

// run parses args and the environment (lookupEnv, as os.LookupEnv), starts the server,
// writes the connection string to stdout and serves until ctx ends. ready, when not nil,
// receives the server once it listens (for tests).
func run(ctx context.Context, args []string, lookupEnv func(string) (string, bool), stdout, stderr io.Writer, ready chan<- *sbtest.Server) error {
	cfg, err := parseFlags(args, lookupEnv, stderr)
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
	srv, err := sbtest.NewServer(&sbtest.ServerOptions{Addr: cfg.addr, AdminHTTPAddr: cfg.httpAddr,
		AdvertisedHost: cfg.advertise, Namespace: ns, Logger: logger, MaxConnections: cfg.maxConnections,
		SASKeys: cfg.sasKeys, DisableExplorer: cfg.noExplorer})
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
	for _, f := range cfg.configFiles {
		fmt.Fprintf(stderr, "sbemulator: configuration %s\n", f)
	}
	if u := srv.AdminHTTPURL(); u != "" {
		if cfg.noExplorer {
			fmt.Fprintf(stderr, "sbemulator: administration API and health check on %s (%s/health)\n", u, u)
		} else {
			fmt.Fprintf(stderr, "sbemulator: explorer on %s/, administration API and health check on %s (%s/health)\n", u, u, u)
		}
		fmt.Fprintf(stderr, "sbemulator: AMQP over WebSockets on ws%s/$servicebus/websocket and wss://%s/$servicebus/websocket; the HTTP data plane on %s/{entity}/messages\n",
			strings.TrimPrefix(u, "http"), endpointOf(srv.ConnectionString()), u)
	}
	fmt.Fprintf(stderr, "sbemulator: listening on %s (%d queues, %d topics) in %v; stop with Ctrl-C\n",
		srv.Addr(), len(cfg.entities.Queues), len(cfg.entities.Topics), time.Since(start).Round(time.Microsecond))
	if ready != nil {
		ready <- srv
	}
	<-ctx.Done()
	closeCtx, cancel := context.WithTimeout(context.Background(), closeTimeout)
	defer cancel()
	err = srv.Close(closeCtx)
	if cfg.stats {
		printStats(stderr, ns)
	}
	fmt.Fprintln(stderr, "sbemulator: stopped")
	return err
}

// printStats writes some counters of each queue and subscription (from
// sbtest.EntityStats) to w, one line each, for -stats: what the clients did, read when
// the emulator stops. Released counts the messages given back with the released
// outcome, which azservicebus sends for those that arrive between two receive calls
// (see sbtest.EntityStats).
func printStats(w io.Writer, ns *sbtest.Namespace) {
	entities := ns.Queues()
	for _, t := range ns.Topics() {
		entities = append(entities, t.Subscriptions()...)
	}
	for _, e := range entities {
		st := e.Stats()
		fmt.Fprintf(w, "sbemulator: %s: sent %d, received %d, completed %d, abandoned %d, dead-lettered %d, deferred %d, released %d, locks expired %d, expired %d\n",
			e.Name(), st.Sent, st.Received, st.Completed, st.Abandoned, st.DeadLettered, st.Deferred, st.Released, st.LockExpired, st.Expired)
	}
}

// config is what the flags and the environment say.
type config struct {
	addr           string
	httpAddr       string // "" for none
	advertise      string
	configFiles    []string
	cert           string
	noExplorer     bool
	verbose        bool
	stats          bool
	version        bool
	maxMessageSize int
	maxConnections int
	latency        sbtest.Latency
	entities       *entities
	faults         []faultSpec
	sasKeys        map[string]string
}

func parseFlags(args []string, lookupEnv func(string) (string, bool), stderr io.Writer) (*config, error) {
	fs := flag.NewFlagSet("sbemulator", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { usage(fs) }
	cfg := &config{entities: newEntities()}
	var queues, topics, subs []string
	var entityOpts sbtest.EntityOptions
	fs.StringVar(&cfg.addr, "addr", defaultAddr, "TCP `address` to listen on for AMQP, AMQP over TLS and the administration API over TLS (port 0 picks a free one)")
	fs.StringVar(&cfg.httpAddr, "http-addr", "", "TCP `address` of the administration API over plain HTTP, GET /health and the explorer page (/), or off (default: -addr's host, port $EMULATOR_HTTP_PORT or 5300, as Microsoft's emulator; a free port when -addr's port is 0)")
	fs.StringVar(&cfg.advertise, "advertise", "", "`host` (name or IP) clients reach the emulator at: the connection string's, and a name of the certificate (default: -addr's IP, 127.0.0.1 when it listens on every interface)")
	fs.StringVar(&cfg.cert, "cert", "", "write the self-signed TLS certificate of AMQP over TLS and the HTTPS administration API (PEM) to `file`, for clients to trust")
	fs.StringVar(&cfg.cert, "admin-cert", "", "the same as -cert (its former name)")
	fs.Func("config", "configuration `file` in the format of Microsoft's Service Bus emulator, comments allowed (repeatable; default "+defaultConfigPath+" when it exists)", appendTo(&cfg.configFiles))
	fs.Func("queue", "create a queue (repeatable; comma-separated `names` allowed)", appendTo(&queues))
	fs.Func("topic", "create a topic (repeatable; comma-separated `names` allowed)", appendTo(&topics))
	fs.Func("subscription", "create a subscription, and its topic if needed (`topic/name`; repeatable, comma-separated allowed)", appendTo(&subs))
	fs.DurationVar(&entityOpts.LockDuration, "lock-duration", 0, "lock `duration` of the entities created by flags (default 1m, at most 5m)")
	fs.IntVar(&entityOpts.MaxDeliveryCount, "max-delivery-count", 0, "max delivery `count` of the entities created by flags (default 10)")
	fs.DurationVar(&entityOpts.DefaultTTL, "default-ttl", 0, "default message time-to-live of the entities created by flags (default none)")
	fs.IntVar(&cfg.maxMessageSize, "max-message-size", 0, "largest message and batch in `bytes` (default 262144, the Standard tier's; negative means no limit)")
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
	fs.Func("sas-key", "require shared access signatures signed with this key: `name=key` (repeatable, comma-separated allowed); the connection string printed names the first name. Replaces the keys of -config files (Sbkit.SharedAccessKeys). Default: those, else any token is accepted and the administration API is open", func(s string) error {
		for _, kv := range strings.Split(s, ",") {
			name, key, ok := strings.Cut(strings.TrimSpace(kv), "=")
			if !ok || name == "" || key == "" {
				return fmt.Errorf("want name=key, got %q", kv)
			}
			if cfg.sasKeys == nil {
				cfg.sasKeys = map[string]string{}
			}
			cfg.sasKeys[name] = key
		}
		return nil
	})
	fs.BoolVar(&cfg.noExplorer, "disable-explorer", false, "serve no explorer page on the HTTP port (the administration API and /health only)")
	fs.BoolVar(&cfg.verbose, "v", false, "log connections, links and errors to stderr")
	fs.BoolVar(&cfg.stats, "stats", false, "when stopped, print each queue's and subscription's counters to stderr (sent, received, settled, released, locks expired)")
	fs.BoolVar(&cfg.version, "version", false, "print the version (the module's, from the build information) and exit")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("sbemulator: unexpected arguments %q (entities are declared with -queue, -topic, -subscription or -config)", fs.Args())
	}
	if err := applyEnv(fs, lookupEnv); err != nil {
		return nil, err
	}
	var err error
	if cfg.httpAddr, err = resolveHTTPAddr(cfg.httpAddr, cfg.addr, lookupEnv); err != nil {
		return nil, err
	}
	if len(cfg.configFiles) == 0 {
		if _, err := os.Stat(defaultConfigPath); err == nil {
			cfg.configFiles = []string{defaultConfigPath}
		}
	}
	for _, f := range cfg.configFiles {
		if err := loadConfigFile(f, cfg.entities); err != nil {
			return nil, err
		}
	}
	// The keys of the command line, else of the environment (applyEnv set -sas-key only
	// when the command line did not), else of the configuration files: one source, not a
	// union, so that keys given to override a file's do not leave the file's valid.
	if cfg.sasKeys == nil && len(cfg.entities.SASKeys) > 0 {
		cfg.sasKeys = cfg.entities.SASKeys
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

// endpointOf returns HOST:PORT of a connection string's Endpoint=sb://HOST:PORT.
func endpointOf(conn string) string {
	_, rest, _ := strings.Cut(conn, "sb://")
	host, _, _ := strings.Cut(rest, ";")
	return strings.TrimSuffix(host, "/")
}
