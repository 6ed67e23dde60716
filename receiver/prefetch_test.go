package receiver_test

import (
	"context"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/sbkit/sbkit/internal/testing/latency"
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
// context that never ends). The rate and the median are those of the completions after
// the first quarter (the warm-up: the estimates' first measurements and first full
// receive).
// It must run in a synctest bubble: the numbers are those of the model, without a
// machine's noise.
func runSteady(t *testing.T, opts receiver.Options, rtt, work time.Duration, n int, offset, grace time.Duration) steady {
	t.Helper()
	e := newEnv(t, &sbtest.EntityOptions{LockDuration: time.Minute})
	e.send(t, n+65*opts.MaxConcurrency+16) // more than the processor may hold
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
	wait := start(t, p, context.Background())
	warm := n / 4
	<-src.At(warm)
	begin := time.Now()
	<-src.Done()
	var s steady
	s.rate = float64(n-warm) / time.Since(begin).Seconds()
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
	s.p50 = src.Percentiles(warm, n, 50)[0]
	return s
}

// The adaptive prefetch (the default) in virtual time against the latency model of
// BenchmarkProcess (5 ms handlers) at round trips from 1 to 100 ms, in steady state:
// with 8 and 32 handlers at least 95% of what the handlers can do (concurrency / 5 ms;
// settlements in flight follow the rate and the round trip, not a pool's size), a
// median receipt-to-completion latency of at most the handler time and two round trips,
// and a stop that abandons at most MaxConcurrency + the prefetch. At 7 ms, with 32
// handlers and with 1, and with 1 ms handlers, the throughput is within 5% of the best
// fixed PrefetchCount of a sweep.
func TestAdaptivePrefetchTargets(t *testing.T) {
	ms := time.Millisecond
	type test struct {
		concurrency int
		rtt, work   time.Duration
		sweep       []int // the fixed prefetches compared with, if any
	}
	var tests []test
	for _, c := range []int{8, 32} {
		for _, rtt := range []time.Duration{1 * ms, 7 * ms, 20 * ms, 50 * ms, 100 * ms} {
			tests = append(tests, test{c, rtt, 5 * ms, nil})
		}
	}
	tests = append(tests,
		test{32, 7 * ms, 5 * ms, []int{64, 96, 128, 192, 256}},
		test{1, 7 * ms, 5 * ms, []int{1, 2, 3, 4, 8}},
		test{32, 7 * ms, 1 * ms, []int{128, 256, 384, 512}},
	)
	for _, tt := range tests {
		name := fmt.Sprintf("c=%d,rtt=%v,handler=%v", tt.concurrency, tt.rtt, tt.work)
		if len(tt.sweep) > 0 {
			name += ",sweep"
		}
		t.Run(name, func(t *testing.T) {
			measure := func(o receiver.Options) (s steady) {
				o.MaxConcurrency = tt.concurrency
				// At least ten receive round trips of steady state.
				n := max(400, int(16*max(tt.rtt, tt.work)*time.Duration(tt.concurrency)/tt.work))
				synctest.Test(t, func(t *testing.T) { s = runSteady(t, o, tt.rtt, tt.work, n, 0, 0) })
				return s
			}
			adaptive := measure(receiver.Options{})
			t.Logf("adaptive: %v", adaptive)
			most := float64(tt.concurrency) / tt.work.Seconds()
			if len(tt.sweep) == 0 {
				if adaptive.rate < 0.95*most {
					t.Errorf("adaptive %.0f msgs/s, below 95%% of the handlers' %.0f", adaptive.rate, most)
				}
				if limit := tt.work + 2*tt.rtt; adaptive.p50 > limit {
					t.Errorf("adaptive p50 %v, above the handler and two round trips (%v)", adaptive.p50, limit)
				}
				if a := adaptive.stopped.Abandoned; a > int64(tt.concurrency)+adaptive.atStop.Prefetch {
					t.Errorf("the stop abandoned %d, above MaxConcurrency + prefetch (%d + %d)", a, tt.concurrency, adaptive.atStop.Prefetch)
				}
				return
			}
			var best steady
			for _, pf := range tt.sweep {
				s := measure(receiver.Options{PrefetchCount: pf})
				t.Logf("prefetch %3d: %v", pf, s)
				if s.rate > best.rate {
					best = s
				}
			}
			if adaptive.rate < 0.95*best.rate {
				t.Errorf("adaptive %.0f msgs/s, below 95%% of the best fixed prefetch's %.0f", adaptive.rate, best.rate)
			}
		})
	}
}

// TestAdaptivePrefetchShutdown: stopping a processor of 16 handlers in steady state (7 ms
// round trip) gives back at most MaxConcurrency + its prefetch messages, and the prefetch
// is the adaptive size. With 5 ms handlers (adaptive prefetch round(2 × 16 / 5 ms × 7 ms)
// = 45) and Close without deadline, running handlers finish and only the buffered
// messages, which never reached a handler, are abandoned. With 50 ms handlers (adaptive
// prefetch round(2 × 16 / 50 ms × 7 ms) = 4) and Close given 40 ms, the handlers still
// running 30 ms in are cancelled and their messages abandoned too. Each case stops at 14
// moments a millisecond apart (two receive round trips).
func TestAdaptivePrefetchShutdown(t *testing.T) {
	ms := time.Millisecond
	tests := []struct {
		name         string
		prefetch     int
		work, grace  time.Duration
		maxAbandoned int64
	}{
		{"adaptive, 5 ms handlers finish", 0, 5 * ms, 0, 45},
		{"prefetch 64, 5 ms handlers finish", 64, 5 * ms, 0, 64},
		{"adaptive, 50 ms handlers cut", 0, 50 * ms, 40 * ms, 16 + 4},
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

// TestSessionProcessorPrefetch: with several calls per session, each session's receive
// loop prefetches (adaptively), and a session released at its MaxMessagesPerSession bound
// or when idle gives back no message unhandled; with one call per session nothing is
// prefetched.
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
				waitDrained(t, sq.q)
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

// Where order allows it (several calls per session), a session's settlements follow the
// rate and the round trip as a Processor's do: 2 sessions of 4 handlers each (5 ms) at a
// 50 ms round trip keep their handlers busy. With a pool of settle goroutines per
// session (max(8, 2 × 4)), each session settled at most 8 messages per round trip: 320
// msgs/s of the handlers' 1,600.
func TestSessionSettlementsFollowRoundTrip(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sq := newSessionQueue(t, &sbtest.EntityOptions{LockDuration: time.Minute})
		for _, id := range []string{"a", "b"} {
			for i := range 2000 {
				sq.send(t, id, fmt.Sprintf("%s%d", id, i))
			}
		}
		sq.ns.SetLatency(sbtest.Latency{RoundTrip: 50 * time.Millisecond})
		_, stop := startSessions(t, sq, func(context.Context, *azservicebus.ReceivedMessage) error {
			time.Sleep(5 * time.Millisecond)
			return nil
		}, &receiver.SessionOptions{MaxConcurrentSessions: 2, MaxConcurrentCallsPerSession: 4})
		time.Sleep(500 * time.Millisecond) // the estimates' first measurements
		before := sq.q.Stats().Completed
		time.Sleep(time.Second)
		rate := float64(sq.q.Stats().Completed - before)
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		if rate < 0.9*1600 {
			t.Errorf("%.0f msgs/s, below 90%% of the handlers' 1,600", rate)
		}
	})
}
