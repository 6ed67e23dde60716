package receiver_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/sbkit/sbkit"
	"github.com/sbkit/sbkit/receiver"
	"github.com/sbkit/sbkit/sbtest"
)

// A payment service is down: instead of spending the message's deliveries at once, the
// processor redelivers it through the broker twice, 10 ms and then 20 ms later, and
// dead-letters it when the redeliveries are spent.
func ExampleRedeliveryOptions() {
	ns := sbtest.NewNamespace(nil)
	queue, _ := ns.NewQueue("payments", &sbtest.EntityOptions{MaxDeliveryCount: 10})
	sender, _ := ns.NewSender("payments", nil) // an *azservicebus.Sender of the queue in production
	_ = sender.SendMessage(context.Background(), &azservicebus.Message{MessageID: new("pay-1")}, nil)
	src, _ := ns.NewReceiverForQueue("payments", nil)

	errDown := errors.New("payment service unavailable")
	handle := func(ctx context.Context, m *azservicebus.ReceivedMessage) error {
		attempt, _ := sbkit.RedeliveryOf(m)
		fmt.Printf("%s: redelivery %d, delivery %d\n", sbkit.OriginalMessageID(m), attempt, m.DeliveryCount)
		return errDown
	}
	p, err := receiver.New(src, handle, &receiver.Options{Redelivery: &receiver.RedeliveryOptions{
		Scheduler:       sender,
		MaxRedeliveries: 2,
		Delay:           func(attempt int) time.Duration { return time.Duration(attempt) * 10 * time.Millisecond },
	}})
	if err != nil {
		fmt.Println(err)
		return
	}
	go func() { _ = p.Run(context.Background()) }()
	_, _ = queue.WaitUntil(context.Background(), func(c sbtest.Counts) bool { return c.DeadLetter == 1 })
	_ = p.Close(context.Background())

	dl := queue.DeadLetters()[0]
	fmt.Println("dead-letter reason:", *dl.DeadLetterReason)
	s := p.Stats()
	fmt.Printf("redelivered %d, exhausted %d\n", s.Redelivered, s.Exhausted)
	// Output:
	// pay-1: redelivery 0, delivery 1
	// pay-1: redelivery 1, delivery 1
	// pay-1: redelivery 2, delivery 1
	// dead-letter reason: MaxRedeliveriesExceeded
	// redelivered 2, exhausted 1
}
