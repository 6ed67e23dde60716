package locks_test

import (
	"context"
	"fmt"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/sbkit/sbkit/locks"
	"github.com/sbkit/sbkit/sbtest"
)

// An engine keeps a received message's lock alive while it is worked on; Release stops
// the renewals before the message is settled.
func ExampleEngine() {
	ns := sbtest.NewNamespace(nil)
	_, _ = ns.NewQueue("jobs", nil)
	sender, _ := ns.NewSender("jobs", nil)
	_ = sender.SendMessage(context.Background(), sbtestMessage("resize image"), nil)
	receiver, _ := ns.NewReceiverForQueue("jobs", nil) // an *azservicebus.Receiver in production

	engine, err := locks.New(receiver, nil) // renew for up to 5 minutes
	if err != nil {
		fmt.Println(err)
		return
	}
	defer engine.Close(context.Background())

	msgs, _ := receiver.ReceiveMessages(context.Background(), 1, nil)
	lock, _ := engine.Add(context.Background(), msgs[0])

	// ... long work; read lock.LockedUntil(), never msgs[0].LockedUntil; stop early when
	// lock.Done() is closed and lock.Err() says the lock was lost ...

	if err := lock.Release(); err != nil {
		fmt.Println("lock lost, not settling:", err)
		return
	}
	fmt.Println(receiver.CompleteMessage(context.Background(), msgs[0], nil))
	// Output: <nil>
}

func sbtestMessage(body string) *azservicebus.Message {
	return &azservicebus.Message{Body: []byte(body)}
}
