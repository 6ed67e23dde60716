package pgdedupe_test

import (
	"context"
	"log"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/sbkit/sbkit"
	"github.com/sbkit/sbkit/dedupe/pgdedupe"
	"github.com/sbkit/sbkit/receiver"
	"github.com/sbkit/sbkit/serialize"
)

// A worker whose business writes and done marks commit in one transaction: a message
// whose Complete was lost is completed on redelivery without running the work again.
func ExampleTxFilter() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, "postgres://app@db/orders") // the pool you already have
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	store, err := pgdedupe.New(pool, nil)
	if err != nil {
		log.Fatal(err)
	}
	if err := store.CreateSchema(ctx); err != nil { // idempotent; or put its SQL in your migrations
		log.Fatal(err)
	}
	dedupe, err := pgdedupe.NewTxFilter(store, &pgdedupe.TxOptions{Entity: "orders"})
	if err != nil {
		log.Fatal(err)
	}
	handle := func(ctx context.Context, m *azservicebus.ReceivedMessage) error {
		tx := pgdedupe.TxFrom(ctx) // commits with the done mark when this returns nil
		_, err := tx.Exec(ctx, `INSERT INTO shipments (order_id) VALUES ($1)`, string(m.Body))
		return err
	}

	client, err := azservicebus.NewClientFromConnectionString("Endpoint=sb://...", nil)
	if err != nil {
		log.Fatal(err)
	}
	r, err := client.NewReceiverForQueue("orders", nil)
	if err != nil {
		log.Fatal(err)
	}
	p, err := receiver.New(r, dedupe.Middleware()(handle), &receiver.Options{MaxConcurrency: 16})
	if err != nil {
		log.Fatal(err)
	}
	log.Fatal(p.Run(ctx))
}

// The transaction reaches the handler through its context, so the TxFilter composes with
// any other middleware and with typed handlers such as serialize.Handler.
func ExampleTxFrom() {
	type Order struct{ ID string }
	var store *pgdedupe.Store // as in the TxFilter example
	txf, err := pgdedupe.NewTxFilter(store, &pgdedupe.TxOptions{Entity: "orders"})
	if err != nil {
		log.Fatal(err)
	}
	reg, err := serialize.New(nil)
	if err != nil {
		log.Fatal(err)
	}
	ship, err := serialize.Handler(reg, func(ctx context.Context, o Order, _ *azservicebus.ReceivedMessage) error {
		_, err := pgdedupe.TxFrom(ctx).Exec(ctx, `INSERT INTO shipments (order_id) VALUES ($1)`, o.ID)
		return err
	}, nil)
	if err != nil {
		log.Fatal(err)
	}
	handler := sbkit.Chain(ship, txf.Middleware()) // undecodable bodies are dead-lettered inside the transaction, which is rolled back
	_ = handler
}
