package receiver_test

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/sbkit/sbkit/receiver"
	"github.com/sbkit/sbkit/sbtest"
)

// A session worker: each customer's orders are a session, handled one at a time and in
// order, several customers at once; the session state keeps a running count per customer.
func ExampleSessionProcessor() {
	ns := sbtest.NewNamespace(nil)
	queue, _ := ns.NewQueue("orders", &sbtest.EntityOptions{RequiresSession: true})
	sender, _ := ns.NewSender("orders", nil)
	for _, o := range []string{"ann:1", "bob:1", "ann:2", "bob:2", "ann:3"} {
		customer, _, _ := strings.Cut(o, ":")
		_ = sender.SendMessage(context.Background(), &azservicebus.Message{Body: []byte(o), SessionID: &customer}, nil)
	}
	// In production: sbkit.NewQueueSessionAcceptor(client, "orders", nil).
	sessions := ns.QueueSessionAcceptor("orders", nil)

	var mu sync.Mutex
	handled := map[string][]string{}
	handle := func(ctx context.Context, m *azservicebus.ReceivedMessage) error {
		s, _ := receiver.SessionFrom(ctx)
		count, err := s.GetSessionState(ctx, nil)
		if err != nil {
			return err // abandoned: handled again, before the session's next message
		}
		mu.Lock()
		handled[s.SessionID()] = append(handled[s.SessionID()], string(m.Body))
		mu.Unlock()
		return s.SetSessionState(ctx, append(count, '+'), nil)
	}
	p, err := receiver.NewSessionProcessor(sessions, handle, &receiver.SessionOptions{
		MaxConcurrentSessions: 8, // sessions held at once; 1 handler per session (the default)
	})
	if err != nil {
		panic(err)
	}
	go func() { _ = p.Run(context.Background()) }()
	_ = queue.WaitDrained(context.Background()) // every order handled
	_ = p.Close(context.Background())

	customers := make([]string, 0, len(handled))
	for c := range handled {
		customers = append(customers, c)
	}
	sort.Strings(customers)
	for _, c := range customers {
		fmt.Println(c, handled[c], string(queue.SessionState(c)))
	}
	// Output:
	// ann [ann:1 ann:2 ann:3] +++
	// bob [bob:1 bob:2] ++
}
