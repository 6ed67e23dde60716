package sender_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/sbkit/sbkit/sbtest"
	"github.com/sbkit/sbkit/sender"
)

func Example() {
	ctx := context.Background()
	ns := sbtest.NewNamespace(nil)
	queue, _ := ns.NewQueue("orders", nil)
	dst, _ := ns.NewSender("orders", nil) // in production: client.NewSender("orders", nil)

	s, err := sender.New(dst, &sender.Options{MaxInFlightMessages: 64})
	if err != nil {
		panic(err)
	}
	for i := range 3 {
		err := s.Send(ctx, &azservicebus.Message{Body: fmt.Appendf(nil, "order %d", i)})
		fmt.Println("sent:", err == nil)
	}
	if err := s.Close(ctx); err != nil {
		panic(err)
	}
	fmt.Println("queued:", queue.Counts().Active, "failed:", s.Stats().Failed)
	// Output:
	// sent: true
	// sent: true
	// sent: true
	// queued: 3 failed: 0
}

func ExampleSender_SendAsync() {
	ctx := context.Background()
	ns := sbtest.NewNamespace(nil)
	queue, _ := ns.NewQueue("events", nil)
	dst, _ := ns.NewSender("events", nil)
	s, _ := sender.New(dst, &sender.Options{Linger: time.Second})
	defer s.Close(ctx)

	// Start many sends at once; each outcome is settled through its Result.
	var results []*sender.Result
	for i := range 100 {
		id := fmt.Sprintf("event-%03d", i)
		r, err := s.SendAsync(ctx, &azservicebus.Message{MessageID: &id, Body: []byte("{}")})
		if err != nil {
			fmt.Println("not accepted:", err)
			continue
		}
		results = append(results, r)
	}
	_ = s.Flush(ctx) // send the lingering batch now and wait for it
	failed := 0
	for _, r := range results {
		if r.Wait(ctx) != nil {
			failed++
		}
	}
	fmt.Println("failed:", failed, "queued:", queue.Counts().Active, "batches:", queue.Stats().Batches)
	// Output:
	// failed: 0 queued: 100 batches: 1
}

func ExampleSender_SendAll() {
	ctx := context.Background()
	ns := sbtest.NewNamespace(nil)
	_, _ = ns.NewQueue("q", nil)
	dst, _ := ns.NewSender("q", nil)
	s, _ := sender.New(dst, nil)
	defer s.Close(ctx)

	msgs := []*azservicebus.Message{
		{Body: []byte("small")},
		{Body: make([]byte, 1<<20)}, // larger than the broker accepts
		nil,
	}
	var all *sender.SendAllError
	if err := s.SendAll(ctx, msgs); errors.As(err, &all) {
		for _, i := range all.Failed() {
			fmt.Printf("message %d: too large %v\n", i, errors.Is(all.Errs[i], azservicebus.ErrMessageTooLarge))
		}
	}
	// Output:
	// message 1: too large true
	// message 2: too large false
}

func ExampleSender_TrySend() {
	ns := sbtest.NewNamespace(nil)
	_, _ = ns.NewQueue("q", nil)
	dst, _ := ns.NewSender("q", nil)
	s, _ := sender.New(dst, &sender.Options{MaxInFlightMessages: 1, Linger: 1 << 40})
	ctx := context.Background()
	defer s.Close(ctx)

	_, err := s.TrySend(ctx, &azservicebus.Message{Body: []byte("first")}) // waits in its linger batch
	fmt.Println(err)
	_, err = s.TrySend(ctx, &azservicebus.Message{Body: []byte("second")})
	fmt.Println(errors.Is(err, sender.ErrFull))
	// Output:
	// <nil>
	// true
}
