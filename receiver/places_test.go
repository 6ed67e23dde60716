package receiver_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/sbkit/sbkit/receiver"
	"github.com/sbkit/sbkit/sbtest"
)

// TestSlowSettlementsHoldPlaces: a message keeps its place until its settlement is over,
// so that settlements the broker does not answer cannot let the processor lock more
// than its bound: running + buffered + held + settling ≤ MaxConcurrency + PrefetchCount.
// With the adaptive prefetch the settlements under way get places on top of the
// prefetch: here MaxConcurrency 2, a prefetch of at most its initial 2 (without latency
// the measured receive round trip makes it 0), and the 3 settlements SettleConcurrency
// lets start. With the defaults (adaptive prefetch, SettleConcurrency every place) the
// settlements in flight grow with the places, and the places stop at the adaptive
// ceiling: MaxConcurrency + 64 × MaxConcurrency, whatever the broker leaves unanswered.
// A place was once freed when the settlement was queued: with MaxConcurrency 1,
// DisablePrefetch and a Complete that hangs, 17 messages ended up locked.
func TestSlowSettlementsHoldPlaces(t *testing.T) {
	tests := []struct {
		name  string
		opts  receiver.Options
		fail  bool // the handler fails: AbandonDelay holds, then abandons
		bound int
		exact bool // the processor fills its bound: peak == bound
	}{
		{"DisablePrefetch", receiver.Options{MaxConcurrency: 1, DisablePrefetch: true}, false, 1, true},
		{"PrefetchCount", receiver.Options{MaxConcurrency: 2, PrefetchCount: 3}, false, 5, true},
		{"adaptive", receiver.Options{MaxConcurrency: 2, SettleConcurrency: 3}, false, 7, false},
		{"adaptive, default SettleConcurrency", receiver.Options{MaxConcurrency: 2}, false, 2 + 64*2, true},
		{"AbandonDelay", receiver.Options{MaxConcurrency: 2, DisablePrefetch: true,
			AbandonDelay: func(*azservicebus.ReceivedMessage, error) time.Duration { return time.Second }}, true, 2, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e := newEnv(t, &sbtest.EntityOptions{LockDuration: time.Minute})
				e.send(t, tt.bound+60) // more than the processor may hold
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
					peak = max(peak, e.q.Counts().Locked)
				}
				if peak > tt.bound {
					t.Errorf("%d messages locked at the broker at once, bound %d", peak, tt.bound)
				}
				if tt.exact && peak < tt.bound {
					t.Errorf("at most %d messages locked at the broker at once: the processor did not fill its bound %d", peak, tt.bound)
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

// TestSettlementsFollowRoundTrip: settlements in flight follow the rate and the round
// trip, up to the places, not a pool's size. 8 handlers of 1 ms and PrefetchCount 200
// against a broker 100 ms away: each receive brings 208 messages, the handlers get
// through them in 26 ms, and every one of their settlements is in flight at once, so the
// processor does 208 messages per receive and settlement round trip. With a pool of 16
// settle goroutines (the former default, max(8, 2 × MaxConcurrency)) at most 16 were in
// flight and 160 settled per second. SettleConcurrency still caps them when set, and the
// processor's goroutines are gone once Run returned.
func TestSettlementsFollowRoundTrip(t *testing.T) {
	tests := []struct {
		name        string
		settlers    int
		minRate     float64
		minSettling int64
	}{
		{"default", 0, 500, 150},
		{"SettleConcurrency 4", 4, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e := newEnv(t, &sbtest.EntityOptions{LockDuration: time.Minute})
				e.send(t, 3000)
				e.ns.SetLatency(sbtest.Latency{RoundTrip: 100 * time.Millisecond})
				o := receiver.Options{MaxConcurrency: 8, PrefetchCount: 200, SettleConcurrency: tt.settlers}
				p := newProcessor(t, e.r, func(context.Context, *azservicebus.ReceivedMessage) error {
					time.Sleep(time.Millisecond)
					return nil
				}, &o)
				wait := start(t, p, context.Background())
				var peak int64
				for range 200 { // 2 s
					time.Sleep(10 * time.Millisecond)
					st := p.Stats()
					peak = max(peak, st.Settling)
					if held := e.q.Counts().Locked; held > 208 {
						t.Fatalf("%d messages locked at once, above MaxConcurrency + PrefetchCount (208)", held)
					}
				}
				rate := float64(e.q.Stats().Completed) / 2
				if err := p.Close(context.Background()); err != nil {
					t.Fatal(err)
				}
				if err := wait(); err != nil {
					t.Fatal(err)
				}
				checkReconciled(t, p.Stats())
				t.Logf("%.0f msgs/s, at most %d settlements in flight", rate, peak)
				if rate < tt.minRate || peak < tt.minSettling {
					t.Errorf("%.0f msgs/s with at most %d settlements in flight; want at least %.0f and %d", rate, peak, tt.minRate, tt.minSettling)
				}
				if tt.settlers > 0 && peak > int64(tt.settlers) {
					t.Errorf("%d settlements in flight, above SettleConcurrency %d", peak, tt.settlers)
				}
				synctest.Wait()
				if left := processorGoroutines(); left != "" {
					t.Errorf("goroutines left after Close:\n%s", left)
				}
			})
		})
	}
}

// sdkBatchLimit refuses, as azservicebus does, a ReceiveMessages call that asks for more
// than its link's 5,000 credits (receiver.go, defaultLinkRxBuffer), with an error that
// is not retried.
type sdkBatchLimit struct{ *sbtest.Receiver }

func (r sdkBatchLimit) ReceiveMessages(ctx context.Context, n int, o *azservicebus.ReceiveMessagesOptions) ([]*azservicebus.ReceivedMessage, error) {
	if n > 5000 {
		return nil, &azservicebus.Error{Code: azservicebus.CodeUnauthorizedAccess} // permanent, as the SDK's NonRetriable
	}
	return r.Receiver.ReceiveMessages(ctx, n, o)
}

// TestReceiveBatchWithinSDKLimit: places beyond the SDK's 5,000 messages per receive
// call are asked for over several calls: a processor with 6,001 places once asked for all
// of them at once, and the SDK's refusal ended Run.
func TestReceiveBatchWithinSDKLimit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, &sbtest.EntityOptions{LockDuration: time.Minute})
		e.send(t, 6100)
		var asked []int
		hook := receiveHook(func(c receiver.ReceiveCall) { asked = append(asked, c.Requested) })
		p := newProcessor(t, sdkBatchLimit{e.r}, func(context.Context, *azservicebus.ReceivedMessage) error { return nil },
			&receiver.Options{PrefetchCount: 6000, Hooks: []receiver.Hook{hook}})
		wait := start(t, p, context.Background())
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_ = e.q.WaitDrained(ctx) // what was completed by then is checked below
		if err := p.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		if err := wait(); err != nil {
			t.Fatalf("Run = %v", err)
		}
		if n := e.q.Stats().Completed; n != 6100 {
			t.Errorf("%d of 6100 messages completed", n)
		}
		if len(asked) == 0 || slices.Max(asked) != 5000 {
			t.Errorf("receive calls asked for %v, want at most 5000 and 5000 at first", asked)
		}
	})
}

// receiveHook is a ReceiveHook made of a function.
type receiveHook func(receiver.ReceiveCall)

func (h receiveHook) OnReceive(_ context.Context, c receiver.ReceiveCall) { h(c) }
