package sbkit_test

// The snippets of README.md, kept here so that they compile. Example_producer and
// Example_worker need a real namespace and have no Output comment, so go test compiles
// them without running them; Example_testingHandlers runs on the in-memory broker.

import (
	"context"
	"fmt"
	"log"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/sbkit/sbkit"
	"github.com/sbkit/sbkit/dedupe"
	"github.com/sbkit/sbkit/receiver"
	"github.com/sbkit/sbkit/sbtest"
	"github.com/sbkit/sbkit/sender"
	"github.com/sbkit/sbkit/serialize"
)

// Order is the payload of the README's examples.
type Order struct {
	ID    string  `json:"id"`
	Total float64 `json:"total"`
}

// A producer: sbkit's sender over the SDK's sender. Sends are pipelined and batched, the
// window bounds memory, and every message's outcome comes back.
func Example_producer() {
	ctx := context.Background()
	client, err := azservicebus.NewClientFromConnectionString(os.Getenv("SBKIT_CONNECTION_STRING"), nil)
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close(ctx)
	sdkSender, err := client.NewSender("orders", nil)
	if err != nil {
		log.Fatal(err)
	}
	defer sdkSender.Close(ctx)

	// Defaults: 1,024 messages and 16 MiB in flight, batches sealed after 2 ms,
	// transient errors retried 5 times with backoff. The SDK's sender is batched as it is.
	s, err := sender.New(sdkSender, nil)
	if err != nil {
		log.Fatal(err)
	}
	reg, _ := serialize.New(nil)

	var results []*sender.Result
	for i := range 10_000 {
		msg, err := reg.Encode(Order{ID: fmt.Sprint("order-", i), Total: 9.99}, "application/json", nil)
		if err != nil {
			log.Fatal(err)
		}
		r, err := s.SendAsync(ctx, msg) // blocks only while the window is full
		if err != nil {
			log.Fatal(err) // not accepted: closed sender, nil message, ended context
		}
		results = append(results, r)
	}
	for _, r := range results {
		if err := r.Wait(ctx); err != nil {
			log.Printf("order %s not sent after %d attempts: %v", r.MessageID(), r.Attempts(), err)
		}
	}
	if err := s.Close(ctx); err != nil { // flushes what is still in flight
		log.Fatal(err)
	}
}

// A worker: the processor with 16 handlers, automatic lock renewal, duplicate skipping,
// typed JSON decoding that dead-letters undecodable bodies, an expiry policy and a
// graceful shutdown.
func Example_worker() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	client, err := azservicebus.NewClientFromConnectionString(os.Getenv("SBKIT_CONNECTION_STRING"), nil)
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close(context.Background())
	src, err := client.NewReceiverForQueue("orders", nil) // peek-lock
	if err != nil {
		log.Fatal(err)
	}
	reg, _ := serialize.New(nil)
	store, _ := dedupe.NewMemoryStore(nil) // this process only; redisdedupe for many workers
	dupes, _ := dedupe.New(store, &dedupe.Options{Entity: "orders"})

	fulfil := func(ctx context.Context, o Order, m *azservicebus.ReceivedMessage) error {
		if o.Total <= 0 {
			return sbkit.DeadLetter("InvalidOrder", "total must be positive", nil)
		}
		return nil // completed; any other error abandons
	}
	typed, err := serialize.Handler(reg, fulfil, nil) // dead-letters what it cannot decode
	if err != nil {
		log.Fatal(err)
	}
	handler := sbkit.Chain(typed,
		receiver.Expiry(&receiver.ExpiryOptions{Policy: receiver.ExpiredDeadLetter}),
		dupes.Middleware())

	p, err := receiver.New(src, handler, &receiver.Options{MaxConcurrency: 16, ShutdownGrace: 20 * time.Second})
	if err != nil {
		log.Fatal(err)
	}
	// SIGINT or SIGTERM ends ctx: receiving stops, running handlers get 20 s to finish, and
	// every unsettled message is abandoned before Run returns.
	if err := p.Run(ctx); err != nil && ctx.Err() == nil {
		log.Fatal(err)
	}
}

// Testing a handler: run it through the processor against the in-memory broker and look at
// what the broker holds afterwards.
func Example_testingHandlers() {
	ns := sbtest.NewNamespace(nil)
	queue, _ := ns.NewQueue("orders", &sbtest.EntityOptions{MaxDeliveryCount: 3})
	snd, _ := ns.NewSender("orders", nil)
	reg, _ := serialize.New(nil)
	for _, o := range []Order{{ID: "a", Total: 5}, {ID: "b", Total: -1}} {
		msg, _ := reg.Encode(o, "application/json", nil)
		_ = snd.SendMessage(context.Background(), msg, nil)
	}
	_ = snd.SendMessage(context.Background(), &azservicebus.Message{Body: []byte("{not json")}, nil)

	handler, _ := serialize.Handler(reg, func(ctx context.Context, o Order, m *azservicebus.ReceivedMessage) error {
		if o.Total <= 0 {
			return sbkit.DeadLetter("InvalidOrder", "total must be positive", nil)
		}
		return nil
	}, nil)
	src, _ := ns.NewReceiverForQueue("orders", nil)
	p, _ := receiver.New(src, handler, nil)
	go func() { _ = p.Run(context.Background()) }()
	_ = queue.WaitDrained(context.Background()) // every message settled
	_ = p.Close(context.Background())

	fmt.Println("left in the queue:", queue.Counts().Active)
	for _, m := range queue.DeadLetters() {
		fmt.Println("dead-lettered:", *m.DeadLetterReason)
	}
	// Output:
	// left in the queue: 0
	// dead-lettered: InvalidOrder
	// dead-lettered: DeserializationFailed
}
