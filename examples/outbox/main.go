// Command outbox is a worker that writes to PostgreSQL and sends a follow-up message in
// the same transaction, through sbkit's transactional outbox (package pgoutbox), so that
// the shipment row, the order's done mark (pgdedupe.TxFilter) and the "shipped" message
// commit together or not at all. A relay sends the committed follow-ups.
//
// In memory (the default) the first Complete of one order fails after its transaction
// committed, as when a lock is lost: the redelivered order is skipped, and the program
// shows that no shipment was written twice and no follow-up sent twice. It needs a
// PostgreSQL (SBKIT_PG_DSN, default postgres://postgres@127.0.0.1:5432/postgres), where
// it creates the schema -schema (default sbkit_example). Set SBKIT_CONNECTION_STRING (and SBKIT_QUEUE, default
// "orders"; -shipped, default "shipped", with duplicate detection on) to run on a real
// namespace; the code is the same.
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
	"sync/atomic"
	"syscall"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sbkit/sbkit"
	"github.com/sbkit/sbkit/dedupe/pgdedupe"
	"github.com/sbkit/sbkit/examples/internal/sbenv"
	"github.com/sbkit/sbkit/outbox/pgoutbox"
	"github.com/sbkit/sbkit/receiver"
	"github.com/sbkit/sbkit/sbtest"
)

// DSNEnv names the variable with the PostgreSQL connection string.
const DSNEnv = "SBKIT_PG_DSN"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Getenv); err != nil && !errors.Is(err, flag.ErrHelp) {
		fmt.Fprintln(os.Stderr, "outbox:", err)
		os.Exit(1)
	}
}

// run fulfils -n orders (sent first, in memory), then stops once every order is
// completed and every follow-up sent, or when ctx ends or -timeout passes.
func run(ctx context.Context, args []string, stdout io.Writer, getenv func(string) string) error {
	fs := flag.NewFlagSet("outbox", flag.ContinueOnError)
	fs.SetOutput(stdout)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), "outbox fulfils orders and sends a follow-up for each through a transactional outbox.\n\nFlags:\n")
		fs.PrintDefaults()
		fmt.Fprint(fs.Output(), "\n"+sbenv.EnvHelp+"  "+DSNEnv+"  PostgreSQL connection string (default postgres://postgres@127.0.0.1:5432/postgres)\n")
	}
	n := fs.Int("n", 5, "in memory: orders to send first")
	shippedName := fs.String("shipped", "shipped", "queue for the follow-up messages")
	schema := fs.String("schema", "sbkit_example", "PostgreSQL schema of the example's tables (created if missing)")
	timeout := fs.Duration("timeout", 30*time.Second, "stop after this long")
	if err := fs.Parse(args); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()

	dsn := getenv(DSNEnv)
	if dsn == "" {
		dsn = "postgres://postgres@127.0.0.1:5432/postgres"
	}
	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		return err
	}
	defer pool.Close()
	ob, txf, err := setUp(ctx, pool, *schema)
	if err != nil {
		return err
	}

	conn, err := sbenv.Open(&sbenv.Options{Getenv: getenv, Latency: sbenv.RealisticLatency})
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	var shipped *sbtest.Entity
	if conn.InMemory() {
		if shipped, err = conn.Broker.NewQueue(*shippedName, &sbtest.EntityOptions{DuplicateDetectionWindow: 10 * time.Minute}); err != nil {
			return err
		}
		if err := sendOrders(ctx, conn, *n); err != nil {
			return err
		}
		// The first Complete fails after the commit: the order comes back.
		conn.Queue.InjectFault(sbtest.Fault{Op: sbtest.OpComplete, Count: 1, Err: &azservicebus.Error{Code: azservicebus.CodeLockLost}})
	}
	fmt.Fprintf(stdout, "outbox: %s; PostgreSQL schema %s\n", conn, *schema)

	// The relay: committed follow-ups to their queue, through a pipelined sender.
	relay, err := pgoutbox.NewRelay(ob, func(dest string) (sbkit.MessageSender, error) { return conn.NewSenderTo(dest) }, nil)
	if err != nil {
		return err
	}
	relayDone := make(chan error, 1)
	go func() { relayDone <- relay.Run(ctx) }()
	defer func() {
		_ = relay.Close(context.Background())
		<-relayDone
	}()

	// The worker: shipment, done mark and follow-up in one transaction. Its handlers run
	// concurrently: they write through a log.Logger, which is safe for that.
	out := log.New(stdout, "", 0)
	var handled atomic.Int64
	handle := func(ctx context.Context, m *azservicebus.ReceivedMessage) error {
		handled.Add(1)
		tx := pgdedupe.TxFrom(ctx)
		if _, err := tx.Exec(ctx, `INSERT INTO `+pgx.Identifier{*schema, "shipments"}.Sanitize()+` (order_id) VALUES ($1)`, m.MessageID); err != nil {
			return err
		}
		out.Printf("  shipped    %s", m.MessageID)
		return ob.Add(ctx, tx, *shippedName, &azservicebus.Message{
			Subject: ptr("OrderShipped"), CorrelationID: &m.MessageID, Body: m.Body,
		})
	}
	src, err := conn.NewReceiver(azservicebus.ReceiveModePeekLock)
	if err != nil {
		return err
	}
	defer src.Close(context.Background())
	p, err := receiver.New(src, txf.Middleware()(handle), &receiver.Options{MaxConcurrency: 4})
	if err != nil {
		return err
	}
	workerDone := make(chan error, 1)
	go func() { workerDone <- p.Run(ctx) }()

	// In memory: until every order is completed and every follow-up sent.
	for conn.InMemory() && ctx.Err() == nil {
		if p.Stats().Completed == int64(*n) && relay.Stats().Sent == int64(*n) { // one follow-up per order
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if !conn.InMemory() {
		<-ctx.Done()
	}
	closeCtx, cancelClose := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancelClose()
	_ = p.Close(closeCtx)
	<-workerDone

	var shipments int
	if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM `+pgx.Identifier{*schema, "shipments"}.Sanitize()).Scan(&shipments); err != nil {
		return err
	}
	st, rs := txf.Stats(), relay.Stats()
	fmt.Fprintf(stdout, "outbox: %d deliveries: handled %d, skipped as duplicates %d; shipments written this run %d; follow-ups sent %d\n",
		handled.Load()+st.DuplicatesSkipped, handled.Load(), st.DuplicatesSkipped, shipments, rs.Sent)
	if shipped != nil {
		fmt.Fprintf(stdout, "outbox: queue %q holds %d follow-ups, duplicates dropped by the broker %d\n",
			*shippedName, shipped.Counts().Active, shipped.Stats().DuplicatesDropped)
	}
	return nil
}

// setUp creates the example's schema and tables (emptying the shipments of earlier
// runs) and returns the outbox and the transactional filter.
func setUp(ctx context.Context, pool *pgxpool.Pool, schema string) (*pgoutbox.Outbox, *pgdedupe.TxFilter, error) {
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		shipments := pgx.Identifier{schema, "shipments"}.Sanitize()
		_, err := tx.Exec(ctx, `CREATE SCHEMA IF NOT EXISTS `+pgx.Identifier{schema}.Sanitize()+`;
CREATE TABLE IF NOT EXISTS `+shipments+` (order_id text NOT NULL);
TRUNCATE `+shipments)
		return err
	})
	if err != nil {
		return nil, nil, fmt.Errorf("set up: %w", err)
	}
	ob, err := pgoutbox.New(pool, &pgoutbox.Options{Schema: schema})
	if err != nil {
		return nil, nil, err
	}
	if err := ob.CreateSchema(ctx); err != nil { // or put ob.SchemaSQL() in your migrations
		return nil, nil, err
	}
	store, err := pgdedupe.New(pool, &pgdedupe.Options{Schema: schema})
	if err != nil {
		return nil, nil, err
	}
	if err := store.CreateSchema(ctx); err != nil {
		return nil, nil, err
	}
	txf, err := pgdedupe.NewTxFilter(store, &pgdedupe.TxOptions{Entity: "orders"})
	return ob, txf, err
}

// sendOrders sends n orders with ids new to this run (earlier runs' done marks stay).
func sendOrders(ctx context.Context, conn *sbenv.Conn, n int) error {
	s, err := conn.NewSender()
	if err != nil {
		return err
	}
	defer s.Close(ctx)
	run := sbkit.NewMessageID()[:8]
	for i := range n {
		id := fmt.Sprintf("order-%s-%d", run, i+1)
		if err := s.SendMessage(ctx, &azservicebus.Message{MessageID: &id, Body: []byte(`{"order":"` + id + `"}`)}, nil); err != nil {
			return err
		}
	}
	return nil
}

func ptr[T any](v T) *T { return &v }
