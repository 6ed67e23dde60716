package receiver_test

import (
	"context"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/sbkit/sbkit/internal/latency"
	"github.com/sbkit/sbkit/receiver"
	"github.com/sbkit/sbkit/sbtest"
)

// steady is what a processor did in steady state: throughput, median receipt-to-
// completion latency, and its Stats when it was stopped.
type steady struct {
	rate    float64
	p50     time.Duration
	atStop  receiver.Stats
	stopped receiver.Stats // after Close
}

func (s steady) String() string {
	return fmt.Sprintf("%.0f msgs/s, p50 %v, prefetch %d, buffered %d (peak %d), in handlers %d, abandoned %d, left locked %d",
		s.rate, s.p50, s.atStop.Prefetch, s.atStop.Buffered, s.stopped.PeakBuffered, s.atStop.InFlight,
		s.stopped.Abandoned, s.stopped.LeftLocked)
}

// runSteady runs a processor with opts over a queue deeper than it can finish, with the
// broker's round trip rtt and handlers that work for work, until n messages were
// completed and then offset passed, then stops it with Close, given grace (none: a
// context that never ends).
// It must run in a synctest bubble: the numbers are those of the model, without a
// machine's noise.
func runSteady(t *testing.T, opts receiver.Options, rtt, work time.Duration, n int, offset, grace time.Duration) steady {
	t.Helper()
	e := newEnv(t, &sbtest.EntityOptions{LockDuration: time.Minute})
	e.send(t, n+6*opts.MaxConcurrency+16)
	e.ns.SetLatency(sbtest.Latency{RoundTrip: rtt, StoreTime: time.Millisecond})
	src := latency.New(e.r, n)
	p := newProcessor(t, src, func(ctx context.Context, m *azservicebus.ReceivedMessage) error {
		select {
		case <-time.After(work):
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}, &opts)
	begin := time.Now()
	wait := start(t, p, context.Background())
	for e.q.Stats().Completed < int64(n) {
		time.Sleep(time.Millisecond)
	}
	var s steady
	s.rate = float64(n) / time.Since(begin).Seconds()
	time.Sleep(offset)
	synctest.Wait()
	s.atStop = p.Stats()
	ctx, cancel := context.Background(), context.CancelFunc(func() {})
	if grace > 0 {
		ctx, cancel = context.WithTimeout(ctx, grace)
	}
	defer cancel()
	if err := p.Close(ctx); err != nil && grace == 0 {
		t.Fatal(err)
	}
	if err := wait(); err != nil {
		t.Fatal(err)
	}
	s.stopped = p.Stats()
	checkReconciled(t, s.stopped)
	s.p50 = src.Percentiles(n, 50)[0]
	return s
}

// Issue 20: the adaptive prefetch (the default) in virtual time against the latency
// model of BenchmarkProcess (7 ms round trip, 5 ms handlers): 5,300 msgs/s with 32
// handlers and 170 msgs/s with 1, each with a median receipt-to-completion latency of at
// most 15 ms; with a 50 ms round trip and with 1 ms handlers, throughput within 10% of
// the best fixed PrefetchCount of a sweep and the median within 1.3× of
// DisablePrefetch's. Both of the last two are bound by the default settle goroutines
// (64 settlements of a round trip each at a time), which the adaptive prefetch takes
// into account.
func TestAdaptivePrefetchTargets(t *testing.T) {
	ms := time.Millisecond
	tests := []struct {
		concurrency int
		rtt, work   time.Duration
		sweep       []int // compared with when not empty
		minRate     float64
		maxP50      time.Duration
	}{
		{32, 7 * ms, 5 * ms, nil, 5300, 15 * ms},
		{1, 7 * ms, 5 * ms, nil, 170, 15 * ms},
		{32, 50 * ms, 5 * ms, []int{32, 64, 96, 128, 256}, 0, 0},
		{32, 7 * ms, 1 * ms, []int{32, 64, 96, 128, 256}, 0, 0},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("c=%d,rtt=%v,handler=%v", tt.concurrency, tt.rtt, tt.work), func(t *testing.T) {
			measure := func(o receiver.Options) (s steady) {
				o.MaxConcurrency = tt.concurrency
				n := max(200, min(2000, tt.concurrency*60))
				synctest.Test(t, func(t *testing.T) { s = runSteady(t, o, tt.rtt, tt.work, n, 0, 0) })
				return s
			}
			adaptive := measure(receiver.Options{})
			none := measure(receiver.Options{DisablePrefetch: true})
			t.Logf("adaptive:   %v", adaptive)
			t.Logf("no prefetch: %v", none)
			var best steady
			for _, pf := range tt.sweep {
				s := measure(receiver.Options{PrefetchCount: pf})
				t.Logf("prefetch %3d: %v", pf, s)
				if s.rate > best.rate {
					best = s
				}
			}
			if len(tt.sweep) > 0 && adaptive.rate < 0.9*best.rate {
				t.Errorf("adaptive %.0f msgs/s, below 90%% of the best fixed prefetch's %.0f", adaptive.rate, best.rate)
			}
			if len(tt.sweep) > 0 && float64(adaptive.p50) > 1.3*float64(none.p50) {
				t.Errorf("adaptive p50 %v, above 1.3 × no prefetch's %v", adaptive.p50, none.p50)
			}
			if adaptive.rate < tt.minRate || (tt.maxP50 > 0 && adaptive.p50 > tt.maxP50) {
				t.Errorf("adaptive %.0f msgs/s, p50 %v; want at least %.0f msgs/s, p50 at most %v",
					adaptive.rate, adaptive.p50, tt.minRate, tt.maxP50)
			}
		})
	}
}

// Issue 20: stopping a processor of 16 handlers in steady state (7 ms round trip) gives
// back at most MaxConcurrency + its prefetch messages, and the prefetch is the adaptive
// size, not the former 4 × 16. With 5 ms handlers (adaptive prefetch round(1.5 × 16 /
// 5 ms × 7 ms) = 34) and Close without deadline, running handlers finish and only the
// buffered messages, which never reached a handler, are abandoned. With 50 ms handlers
// (adaptive prefetch round(1.5 × 16 / 50 ms × 7 ms) = 3) and Close given 40 ms, the
// handlers still running 30 ms in are cancelled and their messages abandoned too. Each
// case stops at 14 moments a millisecond apart (two receive round trips).
func TestAdaptivePrefetchShutdown(t *testing.T) {
	ms := time.Millisecond
	tests := []struct {
		name         string
		prefetch     int
		work, grace  time.Duration
		maxAbandoned int64
	}{
		{"adaptive, 5 ms handlers finish", 0, 5 * ms, 0, 34},
		{"prefetch 64, 5 ms handlers finish", 64, 5 * ms, 0, 64},
		{"adaptive, 50 ms handlers cut", 0, 50 * ms, 40 * ms, 16 + 3},
		{"prefetch 64, 50 ms handlers cut", 64, 50 * ms, 40 * ms, 16 + 64},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var most int64
			for offset := range 14 * ms / ms {
				synctest.Test(t, func(t *testing.T) {
					o := receiver.Options{MaxConcurrency: 16, PrefetchCount: tt.prefetch}
					s := runSteady(t, o, 7*ms, tt.work, 1000, offset*ms, tt.grace)
					most = max(most, s.stopped.Abandoned)
					if s.stopped.LeftLocked != 0 {
						t.Errorf("stopped %v later: %d messages left locked", offset*ms, s.stopped.LeftLocked)
					}
					if a := s.stopped.Abandoned; a > int64(o.MaxConcurrency)+s.atStop.Prefetch || a > tt.maxAbandoned {
						t.Errorf("stopped %v later: %v; want at most MaxConcurrency %d + prefetch %d, and %d abandoned",
							offset*ms, s, o.MaxConcurrency, s.atStop.Prefetch, tt.maxAbandoned)
					}
					if tt.grace == 0 && s.stopped.Abandoned != s.atStop.Buffered {
						t.Errorf("stopped %v later: abandoned %d, want the %d buffered", offset*ms, s.stopped.Abandoned, s.atStop.Buffered)
					}
				})
			}
			t.Logf("at most %d abandoned", most)
		})
	}
}

// Issue 20: with several calls per session, each session's receive loop prefetches
// (adaptively), and a session released at its MaxMessagesPerSession bound or when idle
// gives back no message unhandled; with one call per session nothing is prefetched.
func TestSessionProcessorPrefetch(t *testing.T) {
	tests := []struct {
		name     string
		calls    int
		disable  bool
		buffered bool
	}{
		{"4 calls, adaptive", 4, false, true},
		{"4 calls, no prefetch", 4, true, false},
		{"1 call", 1, false, false},
	}
	took := map[string]time.Duration{}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				sq := newSessionQueue(t, nil)
				for _, id := range []string{"a", "b", "c"} {
					for i := range 30 {
						sq.send(t, id, fmt.Sprintf("%s%d", id, i))
					}
				}
				sq.ns.SetLatency(sbtest.Latency{RoundTrip: 7 * time.Millisecond})
				h := func(ctx context.Context, m *azservicebus.ReceivedMessage) error {
					time.Sleep(5 * time.Millisecond)
					return nil
				}
				begin := time.Now()
				p, stop := startSessions(t, sq, h, &receiver.SessionOptions{
					Options:               receiver.Options{DisablePrefetch: tt.disable},
					MaxConcurrentSessions: 2, MaxConcurrentCallsPerSession: tt.calls, MaxMessagesPerSession: 10,
				})
				for sq.q.Stats().Completed < 90 {
					time.Sleep(time.Millisecond)
				}
				took[tt.name] = time.Since(begin)
				if err := stop(); err != nil {
					t.Fatal(err)
				}
				s := p.Stats()
				t.Logf("%v: %+v", took[tt.name], s)
				checkReconciled(t, s.Stats)
				if s.Received != 90 || s.Abandoned != 0 {
					t.Errorf("received %d, abandoned %d; want 90 and none", s.Received, s.Abandoned)
				}
				if (s.PeakBuffered > 0) != tt.buffered {
					t.Errorf("peak buffered %d", s.PeakBuffered)
				}
			})
		})
	}
	if a, n := took["4 calls, adaptive"], took["4 calls, no prefetch"]; a >= n {
		t.Errorf("adaptive took %v, no prefetch %v", a, n)
	}
}
