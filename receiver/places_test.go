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

// TestSlowSettlementsHoldPlaces: a message keeps its place until its settlement is over,
// so that settlements the broker does not answer cannot let the processor lock more
// than its bound: running + buffered + held + settling ≤ MaxConcurrency + PrefetchCount
// (with the adaptive prefetch, at most 5 × MaxConcurrency + SettleConcurrency, a place
// for each settlement under way). A place was once freed when the
// settlement was queued: with MaxConcurrency 1, DisablePrefetch and a Complete that
// hangs, 17 messages ended up locked.
func TestSlowSettlementsHoldPlaces(t *testing.T) {
	tests := []struct {
		name  string
		opts  receiver.Options
		fail  bool // the handler fails: AbandonDelay holds, then abandons
		bound int
	}{
		{"DisablePrefetch", receiver.Options{MaxConcurrency: 1, DisablePrefetch: true}, false, 1},
		{"PrefetchCount", receiver.Options{MaxConcurrency: 2, PrefetchCount: 3}, false, 5},
		{"adaptive", receiver.Options{MaxConcurrency: 2, SettleConcurrency: 3}, false, 13},
		{"AbandonDelay", receiver.Options{MaxConcurrency: 2, DisablePrefetch: true,
			AbandonDelay: func(*azservicebus.ReceivedMessage, error) time.Duration { return time.Second }}, true, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e := newEnv(t, &sbtest.EntityOptions{LockDuration: time.Minute})
				e.send(t, 60)
				op := sbtest.OpComplete
				if tt.fail {
					op = sbtest.OpAbandon
				}
				e.q.InjectFault(sbtest.Fault{Op: op, Hang: true}) // every settlement hangs
				opts := tt.opts
				opts.SettleTimeout = time.Hour
				h := func(context.Context, *azservicebus.ReceivedMessage) error {
					time.Sleep(10 * time.Millisecond)
					if tt.fail {
						return errors.New("fails")
					}
					return nil
				}
				p := newProcessor(t, e.r, h, &opts)
				wait := start(t, p, context.Background())
				peak := 0
				for range 600 { // a minute
					time.Sleep(100 * time.Millisecond)
					peak = max(peak, e.q.LockedCount())
				}
				if peak > tt.bound {
					t.Errorf("%d messages locked at the broker at once, bound %d", peak, tt.bound)
				}
				if n := p.Stats().Received; n > int64(tt.bound) {
					t.Errorf("received %d messages, bound %d", n, tt.bound)
				}
				if st := p.Stats(); st.Settling == 0 || st.InFlight+st.Buffered+st.Held+st.Settling > int64(tt.bound) {
					t.Errorf("gauges %+v: want settlements in flight, all within the bound %d", st, tt.bound)
				}
				ctx, cancel := context.WithTimeout(context.Background(), time.Second)
				defer cancel()
				if err := p.Close(ctx); !errors.Is(err, context.DeadlineExceeded) {
					t.Errorf("Close = %v", err)
				}
				if err := wait(); err != nil {
					t.Errorf("Run = %v", err)
				}
				st := p.Stats()
				checkReconciled(t, st)
				if st.LeftLocked != st.Received {
					t.Errorf("stats %+v: every received message should be left locked", st)
				}
				t.Logf("peak locked %d, stats %+v", peak, st)
			})
		})
	}
}
