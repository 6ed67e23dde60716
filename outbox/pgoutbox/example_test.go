package pgoutbox_test

import (
	"context"
	"log"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/sbkit/sbkit/dedupe/pgdedupe"
	"github.com/sbkit/sbkit/outbox/pgoutbox"
	"github.com/sbkit/sbkit/sender"
)

// A service writes an order and the message announcing it in one transaction; a relay
// sends the message once the transaction committed.
func ExampleOutbox_Add() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, "postgres://app@db/orders") // the pool you already have
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	ob, err := pgoutbox.New(pool, nil)
	if err != nil {
		log.Fatal(err)
	}
	if err := ob.CreateSchema(ctx); err != nil { // idempotent; or put ob.SchemaSQL() in your migrations
		log.Fatal(err)
	}
	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `INSERT INTO orders (id) VALUES ($1)`, "o-42"); err != nil {
			return err
		}
		// Sent only if this transaction commits; its MessageID is fixed now.
		return ob.Add(ctx, tx, "order-events", &azservicebus.Message{Subject: ptr("OrderPlaced"), Body: []byte(`{"id":"o-42"}`)})
	})
	if err != nil {
		log.Fatal(err)
	}
}

// Inside a pgdedupe.TxFilter handler, the follow-up commits with the handler's work and
// the message's done mark: a redelivery after the commit neither repeats the work nor
// adds the follow-up again.
func ExampleOutbox_Add_txFilter() {
	var ob *pgoutbox.Outbox // as in the Add example
	handle := func(ctx context.Context, m *azservicebus.ReceivedMessage) error {
		tx := pgdedupe.TxFrom(ctx)
		if _, err := tx.Exec(ctx, `UPDATE orders SET shipped = true WHERE id = $1`, string(m.Body)); err != nil {
			return err
		}
		return ob.Add(ctx, tx, "shipments", &azservicebus.Message{CorrelationID: &m.MessageID, Body: m.Body})
	}
	_ = handle // wrapped with txFilter.Middleware() and run by a receiver.Processor
}

// A relay in the service's process, sending through the SDK's client; OpenTelemetry's
// sender hook (sbotel) traces its sends when given per destination.
func ExampleRelay() {
	ctx := context.Background()
	var ob *pgoutbox.Outbox // as in the Add example
	client, err := azservicebus.NewClientFromConnectionString("Endpoint=sb://...", nil)
	if err != nil {
		log.Fatal(err)
	}
	relay, err := pgoutbox.NewRelay(ob, pgoutbox.ClientDestinations(client, nil), &pgoutbox.RelayOptions{
		// SenderHooks: func(dest string) []sender.Hook { return []sender.Hook{tel.Sender(dest)} },
		Sender: &sender.Options{MaxInFlightMessages: 2048},
	})
	if err != nil {
		log.Fatal(err)
	}
	go func() {
		if err := relay.Run(ctx); err != nil {
			log.Print(err)
		}
	}()
	// ... at shutdown:
	_ = relay.Close(ctx)
}
