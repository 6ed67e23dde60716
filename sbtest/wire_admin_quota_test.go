package sbtest

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	adminapi "github.com/sbkit/sbkit/sbtest/internal/admin"
)

// The admin API's quotas hold under concurrent creates (Service Bus quotas: 10,000 queues
// and topics per namespace, 2,000 subscriptions per topic): the check and the create are
// one step, so 200 PUTs racing for the last 10 places create 10.
func TestAdminQuotasUnderConcurrency(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const racers, room = 200, 10
	race := func(t *testing.T, create func(i int) error) int {
		var wg sync.WaitGroup
		var ok atomic.Int32
		for i := range racers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if create(i) == nil {
					ok.Add(1)
				}
			}()
		}
		wg.Wait()
		return int(ok.Load())
	}
	t.Run("queues", func(t *testing.T) {
		ns := NewNamespace(nil)
		for i := range adminapi.MaxEntities - room {
			if _, err := ns.NewQueue(fmt.Sprint("q", i), nil); err != nil {
				t.Fatal(err)
			}
		}
		ac := inProcessAdmin(t, ns)
		n := race(t, func(i int) error {
			if i%2 == 0 {
				_, err := ac.CreateTopic(ctx, fmt.Sprint("new", i), nil)
				return err
			}
			_, err := ac.CreateQueue(ctx, fmt.Sprint("new", i), nil)
			return err
		})
		if total := len(ns.Queues()) + len(ns.Topics()); n != room || total != adminapi.MaxEntities {
			t.Fatalf("%d concurrent creates succeeded, the namespace has %d queues and topics; want %d and %d", n, total, room, adminapi.MaxEntities)
		}
	})
	t.Run("subscriptions", func(t *testing.T) {
		ns := NewNamespace(nil)
		top, err := ns.NewTopic("t", nil)
		if err != nil {
			t.Fatal(err)
		}
		for i := range adminapi.MaxSubscriptions - room {
			if _, err := top.NewSubscription(fmt.Sprint("s", i), nil); err != nil {
				t.Fatal(err)
			}
		}
		ac := inProcessAdmin(t, ns)
		n := race(t, func(i int) error {
			_, err := ac.CreateSubscription(ctx, "t", fmt.Sprint("new", i), nil)
			return err
		})
		if total := len(top.Subscriptions()); n != room || total != adminapi.MaxSubscriptions {
			t.Fatalf("%d concurrent creates succeeded, the topic has %d subscriptions; want %d and %d", n, total, room, adminapi.MaxSubscriptions)
		}
	})
}
