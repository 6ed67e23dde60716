package sbtest_test

import (
	"context"
	"fmt"
	"log"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/sbkit/sbkit/sbtest"
)

// The real SDK client talks AMQP to an in-process emulator backed by a sbtest Namespace.
func ExampleNewServer() {
	srv, err := sbtest.NewServer(&sbtest.ServerOptions{
		Queues: map[string]*sbtest.EntityOptions{"orders": nil},
	})
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close(context.Background())

	client, err := azservicebus.NewClientFromConnectionString(srv.ConnectionString(), nil)
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	defer client.Close(ctx)

	sender, err := client.NewSender("orders", nil)
	if err != nil {
		log.Fatal(err)
	}
	if err := sender.SendMessage(ctx, &azservicebus.Message{Body: []byte("order 1")}, nil); err != nil {
		log.Fatal(err)
	}

	receiver, err := client.NewReceiverForQueue("orders", nil)
	if err != nil {
		log.Fatal(err)
	}
	msgs, err := receiver.ReceiveMessages(ctx, 1, nil)
	if err != nil {
		log.Fatal(err)
	}
	for _, m := range msgs {
		fmt.Printf("%s (delivery %d)\n", m.Body, m.DeliveryCount)
		if err := receiver.CompleteMessage(ctx, m, nil); err != nil {
			log.Fatal(err)
		}
	}

	// The same entity model, inspected directly.
	q, _ := srv.Namespace().Entity("orders")
	fmt.Println("completed:", q.Stats().Completed)
	// Output:
	// order 1 (delivery 1)
	// completed: 1
}
