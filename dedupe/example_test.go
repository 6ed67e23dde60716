package dedupe_test

import (
	"context"
	"fmt"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/sbkit/sbkit"
	"github.com/sbkit/sbkit/dedupe"
)

// A Filter in front of a handler: the second delivery of a MessageId is skipped, and the
// processor completes it without running the handler.
func ExampleFilter() {
	store, err := dedupe.NewMemoryStore(nil) // this process only; redisdedupe for many workers
	if err != nil {
		panic(err)
	}
	f, err := dedupe.New(store, &dedupe.Options{
		Entity: "orders",
		Hooks: []dedupe.Hook{dedupe.DuplicateHookFunc(func(_ context.Context, e dedupe.Duplicate) {
			fmt.Println("skipping duplicate", e.Key)
		})},
	})
	if err != nil {
		panic(err)
	}
	handler, err := f.Wrap(func(ctx context.Context, m *azservicebus.ReceivedMessage) error {
		fmt.Println("charging order", m.MessageID)
		return nil
	})
	if err != nil {
		panic(err)
	}
	msg := &azservicebus.ReceivedMessage{MessageID: "order-17"}
	for delivery := 1; delivery <= 2; delivery++ {
		err := handler(context.Background(), msg)
		action, _ := sbkit.SettlementOf(err)
		fmt.Printf("delivery %d: %v (%v)\n", delivery, action, err)
	}
	fmt.Printf("duplicates skipped: %d\n", f.Stats().DuplicatesSkipped)
	// Output:
	// charging order order-17
	// delivery 1: complete (<nil>)
	// skipping duplicate orders:order-17
	// delivery 2: complete (sbkit: complete: duplicate)
	// duplicates skipped: 1
}

// The Store protocol, step by step: a lease, a contender, a done mark.
func ExampleMemoryStore() {
	ctx := context.Background()
	s, err := dedupe.NewMemoryStore(&dedupe.MemoryOptions{MaxEntries: 1000})
	if err != nil {
		panic(err)
	}
	st, _ := s.Acquire(ctx, "orders:m1", "worker-a", time.Minute)
	fmt.Println("worker-a:", st)
	st, _ = s.Acquire(ctx, "orders:m1", "worker-b", time.Minute)
	fmt.Println("worker-b:", st)
	fmt.Println("worker-b marks:", s.MarkDone(ctx, "orders:m1", "worker-b", time.Hour))
	_ = s.MarkDone(ctx, "orders:m1", "worker-a", time.Hour)
	st, _ = s.Acquire(ctx, "orders:m1", "worker-b", time.Minute)
	fmt.Println("worker-b again:", st)
	fmt.Printf("%+v\n", s.Stats())
	// Output:
	// worker-a: acquired
	// worker-b: in-progress
	// worker-b marks: dedupe: lease held by another owner: key "orders:m1"
	// worker-b again: done
	// {Leases:0 DoneMarks:1 Evicted:0}
}

// The default key of a message: its MessageId, namespaced by the entity; a message
// without a MessageId has none.
func ExampleMessageIDKey() {
	key := dedupe.MessageIDKey("orders")
	fmt.Printf("%q\n", key(&azservicebus.ReceivedMessage{MessageID: "42"}))
	fmt.Printf("%q\n", key(&azservicebus.ReceivedMessage{}))
	// Output:
	// "orders:42"
	// ""
}
