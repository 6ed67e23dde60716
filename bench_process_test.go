package sbkit_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/sbkit/sbkit"
	"github.com/sbkit/sbkit/internal/latency"
	"github.com/sbkit/sbkit/receiver"
	"github.com/sbkit/sbkit/sbtest"
)

// processLatency models a broker 7 ms away that takes 1 ms to store a request.
var processLatency = sbtest.Latency{RoundTrip: 7 * time.Millisecond, StoreTime: time.Millisecond}

// processWork is what a benchmark handler does with each message.
const processWork = 5 * time.Millisecond

// processNamespace returns a namespace with a queue "work" pre-filled with n messages of
// 1 KiB, filled without latency; the namespace's latency is processLatency from then on.
func processNamespace(b *testing.B, n int) (*sbtest.Namespace, *sbtest.Entity) {
	b.Helper()
	ns := sbtest.NewNamespace(nil)
	q, err := ns.NewQueue("work", nil)
	if err != nil {
		b.Fatal(err)
	}
	s, err := ns.NewSender("work", nil)
	if err != nil {
		b.Fatal(err)
	}
	body := make([]byte, 1024)
	ctx := context.Background()
	for i := 0; i < n; {
		batch, err := s.NewBatch(ctx, nil)
		if err != nil {
			b.Fatal(err)
		}
		for ; i < n; i++ {
			if err := batch.AddMessage(&azservicebus.Message{Body: body}, nil); err != nil {
				break
			}
		}
		if err := s.SendBatch(ctx, batch, nil); err != nil {
			b.Fatal(err)
		}
	}
	ns.SetLatency(processLatency)
	return ns, q
}

// processQueue returns an in-memory receiver of processNamespace's queue.
func processQueue(b *testing.B, n int) (*sbtest.Receiver, *sbtest.Entity) {
	b.Helper()
	ns, q := processNamespace(b, n)
	r, err := ns.NewReceiverForQueue("work", nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = r.Close(context.Background()) })
	return r, q
}

// processRate reports the messages per second of the timed part and fails the benchmark
// unless the broker completed at least every message.
func processRate(b *testing.B, q *sbtest.Entity) {
	b.Helper()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
	if done := q.Stats().Completed; done < int64(b.N) {
		b.Fatalf("broker completed %d of %d messages", done, b.N)
	}
}

// processCase is one processor configuration of BenchmarkProcess and
// BenchmarkWireProcess.
type processCase struct {
	name string
	opts receiver.Options
}

// processCases: the adaptive prefetch (the default), no prefetch, and the former fixed
// default (4 × MaxConcurrency), at 32 handlers and at 1.
var processCases = []processCase{
	{"concurrent-32", receiver.Options{MaxConcurrency: 32}},
	{"concurrent-32-no-prefetch", receiver.Options{MaxConcurrency: 32, DisablePrefetch: true}},
	{"concurrent-32-prefetch-128", receiver.Options{MaxConcurrency: 32, PrefetchCount: 128}},
	{"concurrent-1", receiver.Options{MaxConcurrency: 1}},
	{"concurrent-1-no-prefetch", receiver.Options{MaxConcurrency: 1, DisablePrefetch: true}},
}

// processSpare is how many messages beyond b.N the queue holds for a processor with
// concurrency handlers: more than it may ever hold, so that it runs in steady state
// until the b.N-th completion, where it is stopped.
func processSpare(concurrency int) int { return 7*concurrency + 16 }

// benchProcessor processes b.N messages of q through src with a processor configured
// by c and a handler that works processWork, then stops it (gracefully: running
// handlers finish, buffered messages are abandoned). Besides msgs/s it reports the
// receipt-to-completion latency, the most messages buffered at once (peak-buffered),
// the messages buffered when it was stopped (buffered-at-stop) and those the stop
// abandoned (abandoned-at-stop, a delivery counted for each).
func benchProcessor(b *testing.B, src sbkit.LockingReceiver, q *sbtest.Entity, c processCase) {
	st := latency.New(src, b.N)
	opts := c.opts
	p, err := receiver.New(st, func(ctx context.Context, m *azservicebus.ReceivedMessage) error {
		time.Sleep(processWork)
		return nil
	}, &opts)
	if err != nil {
		b.Fatal(err)
	}
	res := make(chan error, 1)
	b.ResetTimer()
	go func() { res <- p.Run(context.Background()) }()
	<-st.Done()
	b.StopTimer()
	atStop := p.Stats()
	if err := p.Close(context.Background()); err != nil {
		b.Fatal(err)
	}
	if err := <-res; err != nil {
		b.Fatal(err)
	}
	processRate(b, q)
	pct := st.Percentiles(0, 50, 99)
	b.ReportMetric(float64(pct[0])/float64(time.Millisecond), "p50-ms")
	b.ReportMetric(float64(pct[1])/float64(time.Millisecond), "p99-ms")
	end := p.Stats()
	b.ReportMetric(float64(end.PeakBuffered), "peak-buffered")
	b.ReportMetric(float64(atStop.Buffered), "buffered-at-stop")
	b.ReportMetric(float64(end.Abandoned), "abandoned-at-stop")
}

// BenchmarkProcess compares the receiver.Processor with the loop people write first, on
// sbtest with a 7 ms round trip and a handler that works 5 ms. The concurrent target is
// 85% of 32 handlers / 5 ms = 6,400 msgs/s with a median receipt-to-completion latency
// within 3 ms of no prefetch's (handler + complete round trip).
func BenchmarkProcess(b *testing.B) {
	// Receive one, handle, complete, repeat: about 7 + 5 + 7 ms per message.
	b.Run("sequential", func(b *testing.B) {
		r, q := processQueue(b, b.N)
		ctx := context.Background()
		b.ResetTimer()
		for range b.N {
			msgs, err := r.ReceiveMessages(ctx, 1, nil)
			if err != nil || len(msgs) != 1 {
				b.Fatalf("receive: %d messages, %v", len(msgs), err)
			}
			time.Sleep(processWork)
			if err := r.CompleteMessage(ctx, msgs[0], nil); err != nil {
				b.Fatal(err)
			}
		}
		b.StopTimer()
		processRate(b, q)
	})
	// The ceiling of concurrent-32 on this machine: 32 goroutines doing nothing but the
	// handler's work, no broker and no processor. On Linux a 5 ms sleep overshoots by
	// tens of microseconds, so this stays below 32 / 5 ms too.
	b.Run("work-only-32", func(b *testing.B) {
		var started atomic.Int64
		var wg sync.WaitGroup
		b.ResetTimer()
		for range 32 {
			wg.Go(func() {
				for started.Add(1) <= int64(b.N) {
					time.Sleep(processWork)
				}
			})
		}
		wg.Wait()
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
	})
	for _, c := range processCases {
		b.Run(c.name, func(b *testing.B) {
			r, q := processQueue(b, b.N+processSpare(c.opts.MaxConcurrency))
			benchProcessor(b, r, q, c)
		})
	}
}
