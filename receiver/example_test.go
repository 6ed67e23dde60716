package receiver_test

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/sbkit/sbkit"
	"github.com/sbkit/sbkit/receiver"
	"github.com/sbkit/sbkit/sbtest"
)

// A worker processes orders with four handlers at once; an order without a body is
// dead-lettered, expired orders are skipped, every other one is completed.
func Example() {
	ns := sbtest.NewNamespace(nil)
	queue, _ := ns.NewQueue("orders", nil)
	sender, _ := ns.NewSender("orders", nil)
	for _, body := range []string{"apple", "", "pear"} {
		_ = sender.SendMessage(context.Background(), &azservicebus.Message{Body: []byte(body)}, nil)
	}
	src, _ := ns.NewReceiverForQueue("orders", nil) // an *azservicebus.Receiver in production

	var wg sync.WaitGroup
	wg.Add(3)
	handle := func(ctx context.Context, m *azservicebus.ReceivedMessage) error {
		defer wg.Done()
		if len(m.Body) == 0 {
			return sbkit.DeadLetter("EmptyOrder", "an order needs a body", nil)
		}
		return nil // completed
	}
	p, err := receiver.New(src, sbkit.Chain(handle, receiver.Expiry(nil)), &receiver.Options{MaxConcurrency: 4})
	if err != nil {
		fmt.Println(err)
		return
	}
	go func() { _ = p.Run(context.Background()) }()

	wg.Wait()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_ = p.Close(ctx) // waits for the settlements

	s := p.Stats()
	fmt.Printf("received %d, completed %d, dead-lettered %d\n", s.Received, s.Completed, s.DeadLettered)
	fmt.Println("dead-letter reason:", *queue.DeadLetters()[0].DeadLetterReason)
	// Output:
	// received 3, completed 2, dead-lettered 1
	// dead-letter reason: EmptyOrder
}
