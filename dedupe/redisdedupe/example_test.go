package redisdedupe_test

import (
	"context"
	"log"
	"os"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/redis/go-redis/v9"

	"github.com/sbkit/sbkit/dedupe"
	"github.com/sbkit/sbkit/dedupe/redisdedupe"
)

// Every worker of the "orders" queue, on any machine, shares one Redis: a MessageId
// processed by one of them is skipped by all the others. (Compiled, not run: it needs a
// Redis.)
func Example() {
	client := redis.NewClient(&redis.Options{Addr: os.Getenv("SBKIT_REDIS_ADDR")})
	defer client.Close()
	store, err := redisdedupe.New(client, nil) // keys "sbkit:dedupe:orders:<MessageId>"
	if err != nil {
		log.Fatal(err)
	}
	filter, err := dedupe.New(store, &dedupe.Options{Entity: "orders"})
	if err != nil {
		log.Fatal(err)
	}
	handler, err := filter.Wrap(func(ctx context.Context, m *azservicebus.ReceivedMessage) error {
		return nil // charge the order: runs once per MessageId across every worker
	})
	if err != nil {
		log.Fatal(err)
	}
	_ = handler // pass it (or filter.Middleware()) to receiver.New
}
