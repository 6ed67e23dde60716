package sbtest_test

import (
	"context"
	"fmt"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/sbkit/sbkit/sbtest"
)

// Send a message, receive it under a peek-lock and complete it.
func Example() {
	ctx := context.Background()
	ns := sbtest.NewNamespace(nil)
	queue, _ := ns.NewQueue("orders", nil)

	sender, _ := ns.NewSender("orders", nil)
	defer sender.Close(ctx)
	_ = sender.SendMessage(ctx, &azservicebus.Message{Body: []byte("order 1")}, nil)

	receiver, _ := ns.NewReceiverForQueue("orders", nil)
	defer receiver.Close(ctx)
	msgs, _ := receiver.ReceiveMessages(ctx, 10, nil)
	for _, m := range msgs {
		fmt.Printf("%s seq=%d delivery=%d\n", m.Body, *m.SequenceNumber, m.DeliveryCount)
		_ = receiver.CompleteMessage(ctx, m, nil)
	}
	c := queue.Counts()
	fmt.Println("left:", c.Active+c.Locked, "completed:", queue.Stats().Completed)
	// Output:
	// order 1 seq=1 delivery=1
	// left: 0 completed: 1
}

// A message abandoned MaxDeliveryCount times moves to the dead-letter queue.
func Example_maxDeliveryCount() {
	ctx := context.Background()
	ns := sbtest.NewNamespace(nil)
	queue, _ := ns.NewQueue("jobs", &sbtest.EntityOptions{MaxDeliveryCount: 3})
	sender, _ := ns.NewSender("jobs", nil)
	_ = sender.SendMessage(ctx, &azservicebus.Message{Body: []byte("poison")}, nil)

	receiver, _ := ns.NewReceiverForQueue("jobs", nil)
	for range 3 {
		msgs, _ := receiver.ReceiveMessages(ctx, 1, nil)
		fmt.Println("delivery", msgs[0].DeliveryCount)
		_ = receiver.AbandonMessage(ctx, msgs[0], nil)
	}
	fmt.Println("active:", queue.Counts().Active, "dead-lettered:", queue.Counts().DeadLetter)

	dlq, _ := ns.NewReceiverForQueue("jobs", &sbtest.ReceiverOptions{SubQueue: azservicebus.SubQueueDeadLetter})
	msgs, _ := dlq.ReceiveMessages(ctx, 1, nil)
	fmt.Printf("%s: %s\n", msgs[0].Body, *msgs[0].DeadLetterReason)
	// Output:
	// delivery 1
	// delivery 2
	// delivery 3
	// active: 0 dead-lettered: 1
	// poison: MaxDeliveryCountExceeded
}

// Make the next send fail with a transient error.
func ExampleEntity_InjectFault() {
	ctx := context.Background()
	ns := sbtest.NewNamespace(nil)
	queue, _ := ns.NewQueue("q", nil)
	sender, _ := ns.NewSender("q", nil)

	queue.InjectFault(sbtest.Fault{Op: sbtest.OpSend, Count: 1})
	fmt.Println(sender.SendMessage(ctx, &azservicebus.Message{}, nil) == sbtest.TransientError)
	fmt.Println(sender.SendMessage(ctx, &azservicebus.Message{}, nil))
	// Output:
	// true
	// <nil>
}

// Wait until a worker has settled every message, instead of polling the counts.
func ExampleEntity_WaitDrained() {
	ctx := context.Background()
	ns := sbtest.NewNamespace(&sbtest.NamespaceOptions{Queues: map[string]*sbtest.EntityOptions{"orders": nil}})
	queue, _ := ns.Entity("orders")
	sender, _ := ns.NewSender("orders", nil)
	for i := range 3 {
		_ = sender.SendMessage(ctx, &azservicebus.Message{Body: fmt.Appendf(nil, "order %d", i)}, nil)
	}

	receiver, _ := ns.NewReceiverForQueue("orders", nil)
	done := make(chan struct{})
	go func() { // the worker under test
		defer close(done)
		for {
			msgs, err := receiver.ReceiveMessages(ctx, 10, nil)
			if err != nil {
				return // closed
			}
			for _, m := range msgs {
				_ = receiver.CompleteMessage(ctx, m, nil)
			}
		}
	}()

	if err := queue.WaitDrained(ctx); err != nil {
		fmt.Println(err)
	}
	_ = receiver.Close(ctx)
	<-done
	fmt.Println("completed:", queue.Stats().Completed)
	// Output:
	// completed: 3
}
