package pgoutbox_test

import (
	"context"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/sbkit/sbkit/dedupe/pgdedupe"
	"github.com/sbkit/sbkit/receiver"
	"github.com/sbkit/sbkit/sbtest"
)

// TestWorkerFollowUpExactlyOnce is the scenario of "Message transfers, locks, and
// settlement" with a follow-up message: a worker consumes an order, writes a shipment
// and adds a "shipped" message to the outbox, all in pgdedupe.TxFilter's transaction;
// Complete fails after the commit (the lock is lost) and the order comes back. The
// redelivery neither writes the shipment again nor adds a second follow-up; the relay
// delivers the one follow-up once.
func TestWorkerFollowUpExactlyOnce(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	if _, err := e.pool.Exec(ctx, `CREATE TABLE shipments (order_id text NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	orders := e.queue("orders", &sbtest.EntityOptions{LockDuration: 5 * time.Second})
	shipped := e.queue("shipped", nil)
	orders.InjectFault(sbtest.Fault{Op: sbtest.OpComplete, Count: 1, Err: &azservicebus.Error{Code: azservicebus.CodeLockLost}})
	snd, err := e.ns.NewSender("orders", nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := snd.SendMessage(ctx, &azservicebus.Message{MessageID: ptr("order-42"), Body: []byte("42")}, nil); err != nil {
		t.Fatal(err)
	}

	store, err := pgdedupe.New(e.pool, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := store.CreateSchema(ctx); err != nil {
		t.Fatal(err)
	}
	txf, err := pgdedupe.NewTxFilter(store, &pgdedupe.TxOptions{Entity: "orders"})
	if err != nil {
		t.Fatal(err)
	}
	var runs int
	handle := func(ctx context.Context, m *azservicebus.ReceivedMessage) error {
		runs++ // MaxConcurrency 1: one handler at a time
		tx := pgdedupe.TxFrom(ctx)
		if _, err := tx.Exec(ctx, `INSERT INTO shipments (order_id) VALUES ($1)`, string(m.Body)); err != nil {
			return err
		}
		return e.ob.Add(ctx, tx, "shipped", &azservicebus.Message{Body: m.Body, CorrelationID: &m.MessageID})
	}
	src, err := e.ns.NewReceiverForQueue("orders", nil)
	if err != nil {
		t.Fatal(err)
	}
	p, err := receiver.New(src, txf.Middleware()(handle), &receiver.Options{MaxConcurrency: 1})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	t.Cleanup(func() {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		_ = p.Close(cctx)
		<-done
	})
	r, _ := e.relay(nil)

	eventually(t, "the order to be completed", func() bool { return orders.Stats().Completed == 1 })
	e.drained(r)
	if st := txf.Stats(); runs != 1 || st.Committed != 1 || st.DuplicatesSkipped != 1 {
		t.Fatalf("handler ran %d times, filter %+v; want 1 run, 1 commit, 1 duplicate skipped", runs, st)
	}
	var n int
	if err := e.pool.QueryRow(ctx, `SELECT count(*) FROM shipments`).Scan(&n); err != nil || n != 1 {
		t.Fatalf("%d shipments (%v), want 1", n, err)
	}
	got := shipped.Active()
	if len(got) != 1 || *got[0].CorrelationID != "order-42" || shipped.Stats().DuplicatesDropped != 0 || r.Stats().Sent != 1 {
		t.Fatalf("shipped queue %d messages, %+v; relay %+v", len(got), shipped.Stats(), r.Stats())
	}
}
