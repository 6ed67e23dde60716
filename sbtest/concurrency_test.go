package sbtest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
)

// TestConcurrentSendersAndReceivers runs many senders and receivers against one queue
// (under -race) and checks that every message is completed exactly once, with some
// abandoned first.
func TestConcurrentSendersAndReceivers(t *testing.T) {
	const senders, each, receivers = 8, 200, 4
	f := newFixture(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	var seen sync.Map
	var completed atomic.Int64
	var wg sync.WaitGroup
	for i := range senders {
		wg.Go(func() {
			for j := range each {
				id := fmt.Sprintf("%d-%d", i, j)
				if err := f.s.SendMessage(ctx, &azservicebus.Message{MessageID: &id}, nil); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	rctx, stop := context.WithCancel(ctx)
	var rwg sync.WaitGroup
	for range receivers {
		r := f.receiver(t, nil)
		rwg.Go(func() {
			for {
				ms, err := r.ReceiveMessages(rctx, 16, nil)
				if errors.Is(err, context.Canceled) {
					return
				}
				if err != nil {
					t.Error(err)
					return
				}
				for _, m := range ms {
					if m.DeliveryCount == 1 && *m.SequenceNumber%3 == 0 {
						if err := r.AbandonMessage(ctx, m, nil); err != nil {
							t.Error(err)
						}
						continue
					}
					if _, dup := seen.LoadOrStore(m.MessageID, true); dup {
						t.Errorf("message %s completed twice", m.MessageID)
					}
					if err := r.CompleteMessage(ctx, m, nil); err != nil {
						t.Error(err)
					}
					if completed.Add(1) == senders*each {
						stop()
					}
				}
			}
		})
	}
	wg.Wait()
	rwg.Wait()
	stop()
	if got := completed.Load(); got != senders*each {
		t.Fatalf("completed %d, want %d", got, senders*each)
	}
	if f.q.Counts().Active+f.q.Counts().Locked != 0 {
		t.Fatal("messages left")
	}
}
