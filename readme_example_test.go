package sbkit_test

// The snippets of README.md, kept here so that they compile: each Go block of the README
// is a run of lines of a test file (TestReadmeSnippetsAreBacked checks it). Example_send,
// Example_process, Example_worker and Example_logging need a real namespace and have no
// Output comment, so go test compiles them without running them; Example_testingHandlers
// and TestOrderPublisher run on the in-memory broker.

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"testing"
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

// fulfil stands for the application's work in the README's examples.
func fulfil(ctx context.Context, body []byte) error { return ctx.Err() }

// Sending: sbkit's sender over the SDK's sender. Sends are pipelined and batched, the
// window bounds memory, and every message's outcome comes back.
func Example_send() {
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
	s, err := sender.New(sdkSender, nil) // nil options: the defaults
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close(ctx) // waits for the messages still in flight

	msgs := make([]*azservicebus.Message, 0, 1000)
	for i := range 1000 {
		msgs = append(msgs, &azservicebus.Message{Body: fmt.Appendf(nil, `{"id":"order-%d"}`, i)})
	}
	// Pipelined and batched: about one round trip per batch, not per message. Transient
	// failures are retried; what still fails is reported (a *sender.SendAllError).
	if err := s.SendAll(ctx, msgs); err != nil {
		log.Print(err)
	}
}

// Processing: the processor over the SDK's receiver, with a graceful shutdown.
func Example_process() {
	client, err := azservicebus.NewClientFromConnectionString(os.Getenv("SBKIT_CONNECTION_STRING"), nil)
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close(context.Background())

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	sdkReceiver, err := client.NewReceiverForQueue("orders", nil) // peek-lock
	if err != nil {
		log.Fatal(err)
	}
	handle := func(ctx context.Context, m *azservicebus.ReceivedMessage) error {
		return fulfil(ctx, m.Body) // nil completes the message, an error abandons it
	}
	p, err := receiver.New(sdkReceiver, handle, &receiver.Options{MaxConcurrency: 16})
	if err != nil {
		log.Fatal(err)
	}
	// Until SIGINT or SIGTERM; then running handlers get ShutdownGrace (10 s) to finish,
	// and every message not settled is abandoned before Run returns.
	if err := p.Run(ctx); err != nil && ctx.Err() == nil {
		log.Fatal(err)
	}
}

// A worker: the processor with 16 handlers, automatic lock renewal, duplicate skipping,
// typed JSON decoding that dead-letters undecodable bodies, an expiry policy, a log and a
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
	logger := slog.New(slog.NewJSONHandler(os.Stderr, nil)) // Info and above
	reg, _ := serialize.New(nil)
	store, _ := dedupe.NewMemoryStore(nil) // this process only; redisdedupe for many workers
	dupes, _ := dedupe.New(store, &dedupe.Options{Entity: "orders", Logger: logger})

	fulfil := func(ctx context.Context, o Order, m *azservicebus.ReceivedMessage) error {
		if o.Total <= 0 {
			return sbkit.DeadLetter("InvalidOrder", "total must be positive", nil)
		}
		return nil // completed; any other error abandons
	}
	// Dead-letters what it cannot decode.
	typed, err := serialize.Handler(reg, fulfil, &serialize.HandlerOptions{Logger: logger})
	if err != nil {
		log.Fatal(err)
	}
	handler := sbkit.Chain(typed,
		receiver.Expiry(&receiver.ExpiryOptions{Policy: receiver.ExpiredDeadLetter}),
		dupes.Middleware())

	p, err := receiver.New(src, handler, &receiver.Options{
		MaxConcurrency: 16,
		ShutdownGrace:  20 * time.Second,
		Logger:         logger, // errors and lost locks at Warn, settlements at Debug
	})
	if err != nil {
		log.Fatal(err)
	}
	logger.Info("worker started", "queue", "orders")
	// SIGINT or SIGTERM ends ctx: receiving stops, running handlers get 20 s to finish, and
	// every unsettled message is abandoned before Run returns.
	err = p.Run(ctx)
	st := p.Stats()
	logger.Info("worker stopped", "received", st.Received, "completed", st.Completed,
		"abandoned", st.Abandoned, "deadLettered", st.DeadLettered, "locksLost", st.LocksLost)
	if err != nil && ctx.Err() == nil {
		log.Fatal(err)
	}
}

// Logging: every component takes an optional *slog.Logger; without one it logs nothing.
func Example_logging() {
	var sdkSender *azservicebus.Sender     // client.NewSender("orders", nil)
	var sdkReceiver *azservicebus.Receiver // client.NewReceiverForQueue("orders", nil)
	handle := func(ctx context.Context, m *azservicebus.ReceivedMessage) error { return nil }

	// Warn: what went wrong. Debug adds every settlement, lock renewal, send retry and
	// skipped duplicate. Payloads are never logged.
	logger := slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	s, err := sender.New(sdkSender, &sender.Options{Logger: logger})
	if err != nil {
		log.Fatal(err)
	}
	p, err := receiver.New(sdkReceiver, handle, &receiver.Options{Logger: logger})
	if err != nil {
		log.Fatal(err)
	}
	_, _ = s, p
}

// OrderPublisher is production code: it takes sbkit.MessageSender, which the SDK's
// *azservicebus.Sender satisfies, and so does sbtest's sender in its test.
type OrderPublisher struct{ s *sender.Sender }

func NewOrderPublisher(dst sbkit.MessageSender) (*OrderPublisher, error) {
	s, err := sender.New(dst, nil) // batches through either
	if err != nil {
		return nil, err
	}
	return &OrderPublisher{s: s}, nil
}

func (p *OrderPublisher) Publish(ctx context.Context, o Order) error {
	body, err := json.Marshal(o)
	if err != nil {
		return err
	}
	return p.s.Send(ctx, &azservicebus.Message{MessageID: &o.ID, Body: body})
}

func (p *OrderPublisher) Close(ctx context.Context) error { return p.s.Close(ctx) }

func TestOrderPublisher(t *testing.T) {
	ns := sbtest.NewTestNamespace(t, &sbtest.NamespaceOptions{
		Queues: map[string]*sbtest.EntityOptions{"orders": nil},
	})
	snd, _ := ns.NewSender("orders", nil) // in production: client.NewSender("orders", nil)
	pub, err := NewOrderPublisher(snd)
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close(t.Context())
	if err := pub.Publish(t.Context(), Order{ID: "order-1", Total: 9.99}); err != nil {
		t.Fatal(err)
	}
	queue, _ := ns.Entity("orders")
	if got := queue.Active(); len(got) != 1 || got[0].MessageID != "order-1" {
		t.Fatalf("the queue holds %d messages, want order-1 alone", len(got))
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
