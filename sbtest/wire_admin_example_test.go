package sbtest_test

import (
	"context"
	"fmt"
	"log"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus/admin"
	"github.com/sbkit/sbkit/sbtest"
)

// The unmodified admin client creates the entities of an empty server, with a SQL
// filter, from the same connection string as the messaging client.
func ExampleServer_AdminClientOptions() {
	srv, err := sbtest.NewServer(nil)
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close(context.Background())
	ctx := context.Background()

	ac, err := admin.NewClientFromConnectionString(srv.ConnectionString(), srv.AdminClientOptions())
	if err != nil {
		log.Fatal(err)
	}
	if _, err := ac.CreateTopic(ctx, "orders", nil); err != nil {
		log.Fatal(err)
	}
	_, err = ac.CreateSubscription(ctx, "orders", "big", &admin.CreateSubscriptionOptions{
		Properties: &admin.SubscriptionProperties{DefaultRule: &admin.RuleProperties{
			Name:   "big",
			Filter: &admin.SQLFilter{Expression: "quantity >= 10"},
		}},
	})
	if err != nil {
		log.Fatal(err)
	}

	client, err := azservicebus.NewClientFromConnectionString(srv.ConnectionString(), nil)
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close(ctx)
	sender, err := client.NewSender("orders", nil)
	if err != nil {
		log.Fatal(err)
	}
	for _, n := range []int{3, 12} {
		m := &azservicebus.Message{Body: fmt.Appendf(nil, "%d items", n), ApplicationProperties: map[string]any{"quantity": n}}
		if err := sender.SendMessage(ctx, m, nil); err != nil {
			log.Fatal(err)
		}
	}
	rt, err := ac.GetSubscriptionRuntimeProperties(ctx, "orders", "big", nil)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("active in big:", rt.ActiveMessageCount)

	receiver, err := client.NewReceiverForSubscription("orders", "big", nil)
	if err != nil {
		log.Fatal(err)
	}
	msgs, err := receiver.ReceiveMessages(ctx, 1, nil)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%s\n", msgs[0].Body)
	// Output:
	// active in big: 1
	// 12 items
}
