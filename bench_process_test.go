package sbkit_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/sbkit/sbkit/receiver"
	"github.com/sbkit/sbkit/sbtest"
)

// processLatency models a broker 7 ms away that takes 1 ms to store a request.
var processLatency = sbtest.Latency{RoundTrip: 7 * time.Millisecond, StoreTime: time.Millisecond}

// processWork is what a benchmark handler does with each message.
const processWork = 5 * time.Millisecond

// processQueue returns a receiver of a queue pre-filled with n messages of 1 KiB, filled
// without latency; the namespace's latency is processLatency from then on.
func processQueue(b *testing.B, n int) (*sbtest.Receiver, *sbtest.Entity) {
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
	r, err := ns.NewReceiverForQueue("work", nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = r.Close(context.Background()) })
	ns.SetLatency(processLatency)
	return r, q
}

// processRate reports the messages per second of the timed part and fails the benchmark
// unless the broker completed every message.
func processRate(b *testing.B, q *sbtest.Entity) {
	b.Helper()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
	if done := q.Stats().Completed; done != int64(b.N) {
		b.Fatalf("broker completed %d of %d messages", done, b.N)
	}
}

// BenchmarkProcess compares the receiver.Processor with the loop people write first, on
// sbtest with a 7 ms round trip and a handler that works 5 ms. The concurrent target is
// 85% of 32 handlers / 5 ms = 6,400 msgs/s.
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
	b.Run("concurrent-32", func(b *testing.B) {
		r, q := processQueue(b, b.N)
		var handled atomic.Int64
		all := make(chan struct{})
		p, err := receiver.New(r, func(ctx context.Context, m *azservicebus.ReceivedMessage) error {
			time.Sleep(processWork)
			if handled.Add(1) == int64(b.N) {
				close(all)
			}
			return nil
		}, &receiver.Options{MaxConcurrency: 32})
		if err != nil {
			b.Fatal(err)
		}
		res := make(chan error, 1)
		b.ResetTimer()
		go func() { res <- p.Run(context.Background()) }()
		<-all
		// The last completions are still in flight: wait for them, on the clock.
		for q.Stats().Completed < int64(b.N) {
			time.Sleep(time.Millisecond)
		}
		b.StopTimer()
		if err := p.Close(context.Background()); err != nil {
			b.Fatal(err)
		}
		if err := <-res; err != nil {
			b.Fatal(err)
		}
		processRate(b, q)
	})
}
