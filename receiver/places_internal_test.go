package receiver

import (
	"context"
	"sync/atomic"
	"testing"
	"testing/synctest"
)

// TestPlacesReleaseWakesEveryLoop: one release that frees places for two waiting
// receive loops (MoreReceivers), each taking at most one (MaxReceiveBatch), wakes both:
// the first to take passes the signal on while places remain.
func TestPlacesReleaseWakesEveryLoop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newPlaces()
		limit := func() int { return 4 }
		if n, _ := p.acquire(context.Background(), limit, 4, true); n != 4 {
			t.Fatalf("took %d places of 4", n)
		}
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		var took atomic.Int64
		for range 2 {
			go func() {
				n, _ := p.acquire(ctx, limit, 1, true)
				took.Add(int64(n))
			}()
		}
		synctest.Wait()
		p.release(2)
		synctest.Wait()
		if n := took.Load(); n != 2 {
			t.Errorf("the waiting loops took %d places after 2 were freed, want 2", n)
		}
	})
}
