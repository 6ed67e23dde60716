package receiver_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/sbkit/sbkit/receiver"
	"github.com/sbkit/sbkit/sbtest"
)

// TestAbandonDelayDoesNotHoardQueue: a handler that always fails, with a long
// AbandonDelay, must not let the processor hold the whole queue: held messages take places
// of MaxConcurrency + PrefetchCount, and a second consumer still gets the rest.
func TestAbandonDelayDoesNotHoardQueue(t *testing.T) {
	tests := []struct {
		name             string
		concurrency      int
		prefetch         int
		noPrefetch       bool
		wantLockedAtMost int
	}{
		{"1 handler, no prefetch", 1, 0, true, 1},
		{"2 handlers, prefetch 3", 2, 3, false, 5},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e := newEnv(t, &sbtest.EntityOptions{LockDuration: time.Minute})
				e.send(t, 200)
				p := newProcessor(t, e.r, func(ctx context.Context, m *azservicebus.ReceivedMessage) error {
					return errors.New("dependency down")
				}, &receiver.Options{MaxConcurrency: tt.concurrency, PrefetchCount: tt.prefetch, DisablePrefetch: tt.noPrefetch,
					AbandonDelay: receiver.ExponentialAbandonDelay(time.Minute, time.Minute)})
				wait := start(t, p, context.Background())
				time.Sleep(time.Second)
				synctest.Wait()
				if got := e.q.Counts().Locked; got > tt.wantLockedAtMost {
					t.Errorf("processor holds %d locks, want at most %d", got, tt.wantLockedAtMost)
				}
				if s := p.Stats(); s.Held > int64(tt.wantLockedAtMost) || s.Held == 0 {
					t.Errorf("Held %d, want 1..%d", s.Held, tt.wantLockedAtMost)
				}
				other, err := e.ns.NewReceiverForQueue("q", nil)
				if err != nil {
					t.Fatal(err)
				}
				msgs, err := other.ReceiveMessages(context.Background(), 10, nil)
				if err != nil || len(msgs) != 10 {
					t.Errorf("second consumer got %d messages (%v), want 10", len(msgs), err)
				}
				if err := p.Close(context.Background()); err != nil {
					t.Fatal(err)
				}
				if err := wait(); err != nil {
					t.Fatal(err)
				}
				checkReconciled(t, p.Stats())
			})
		})
	}
}
