package deadletter_test

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/sbkit/sbkit/deadletter"
	"github.com/sbkit/sbkit/sbtest"
	"github.com/sbkit/sbkit/sender"
)

// benchLatency is the repository's latency model (bench_test.go in the root): a 7 ms
// round trip and 1 ms to store a request.
var benchLatency = sbtest.Latency{RoundTrip: 7 * time.Millisecond, StoreTime: time.Millisecond}

// benchBody is a 1 KiB body, as the root's benchmarks send.
var benchBody = make([]byte, 1024)

// fillDLQ puts n messages of 1 KiB in the dead-letter queue of q with no latency, then
// sets the latency model.
func fillDLQ(b *testing.B, ns *sbtest.Namespace, q string, n int) {
	b.Helper()
	ns.SetLatency(sbtest.Latency{})
	ctx := context.Background()
	snd, _ := ns.NewSender(q, nil)
	r, err := ns.NewReceiverForQueue(q, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close(ctx)
	for sent := 0; sent < n; {
		k := min(200, n-sent)
		batch, _ := snd.NewBatch(ctx, nil)
		for i := range k {
			if err := batch.AddMessage(&azservicebus.Message{Body: benchBody, MessageID: new(fmt.Sprint("m", sent+i))}, nil); err != nil {
				b.Fatal(err)
			}
		}
		if err := snd.SendBatch(ctx, batch, nil); err != nil {
			b.Fatal(err)
		}
		sent += k
		for got := 0; got < k; {
			ms, err := r.ReceiveMessages(ctx, k-got, nil)
			if err != nil {
				b.Fatal(err)
			}
			for _, m := range ms {
				if err := r.DeadLetterMessage(ctx, m, &azservicebus.DeadLetterOptions{Reason: new("bench")}); err != nil {
					b.Fatal(err)
				}
			}
			got += len(ms)
		}
	}
	ns.SetLatency(benchLatency)
}

// redriveTimed re-drives the dead-letter queue of q to dst and returns the time until
// the queue was empty and the destination held all n copies: the re-drive's own end
// comes IdleTimeout later (its last receive waits for nothing).
func redriveTimed(b *testing.B, ns *sbtest.Namespace, n int, opts *deadletter.RedriveOptions) time.Duration {
	b.Helper()
	ctx := context.Background()
	q, _ := ns.Entity("q")
	d, _ := ns.Entity("dst")
	src, _ := ns.NewReceiverForQueue("q", &sbtest.ReceiverOptions{SubQueue: azservicebus.SubQueueDeadLetter})
	dst, _ := ns.NewSender("dst", nil)
	done := make(chan time.Time, 1)
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	start := time.Now()
	go func() {
		_, _ = q.WaitUntil(wctx, func(c sbtest.Counts) bool { return c.DeadLetter == 0 })
		_, _ = d.WaitUntil(wctx, func(c sbtest.Counts) bool { return c.Active == n })
		done <- time.Now()
	}()
	st, err := deadletter.Redrive(ctx, src, dst, opts)
	if err != nil || st.Moved != int64(n) {
		b.Fatalf("%+v %v", st, err)
	}
	return (<-done).Sub(start)
}

// BenchmarkRedrive compares re-driving a dead-letter queue of 2,000 messages of 1 KiB
// on the 7 ms model with the plain pipelined sender sending the same messages (the
// ceiling: a re-drive also receives and completes each one) and with the sequential way
// (receive one, send it, complete it). msgs/s is the throughput.
func BenchmarkRedrive(b *testing.B) {
	const n = 2000
	ctx := context.Background()
	newNS := func() *sbtest.Namespace {
		return sbtest.NewNamespace(&sbtest.NamespaceOptions{Queues: map[string]*sbtest.EntityOptions{"q": nil, "dst": nil}})
	}
	b.Run("sender", func(b *testing.B) {
		var total time.Duration
		for range b.N {
			ns := newNS()
			ns.SetLatency(benchLatency)
			dst, _ := ns.NewSender("dst", nil)
			msgs := make([]*azservicebus.Message, n)
			for i := range msgs {
				msgs[i] = &azservicebus.Message{Body: benchBody, MessageID: new(fmt.Sprint("m", i))}
			}
			start := time.Now()
			s, _ := sender.New(dst, &sender.Options{Ordered: true})
			if err := s.SendAll(ctx, msgs); err != nil {
				b.Fatal(err)
			}
			_ = s.Close(ctx)
			total += time.Since(start)
		}
		b.ReportMetric(float64(n*b.N)/total.Seconds(), "msgs/s")
	})
	for _, pageSize := range []int{deadletter.DefaultPageSize, 1000} {
		b.Run(fmt.Sprintf("redrive-page-%d", pageSize), func(b *testing.B) {
			var total time.Duration
			for range b.N {
				ns := newNS()
				fillDLQ(b, ns, "q", n)
				total += redriveTimed(b, ns, n, &deadletter.RedriveOptions{IdleTimeout: time.Second, PageSize: pageSize})
			}
			b.ReportMetric(float64(n*b.N)/total.Seconds(), "msgs/s")
		})
	}
	b.Run("sequential", func(b *testing.B) {
		const n = 200
		var total time.Duration
		for range b.N {
			ns := newNS()
			fillDLQ(b, ns, "q", n)
			src, _ := ns.NewReceiverForQueue("q", &sbtest.ReceiverOptions{SubQueue: azservicebus.SubQueueDeadLetter})
			dst, _ := ns.NewSender("dst", nil)
			start := time.Now()
			for range n {
				ms, err := src.ReceiveMessages(ctx, 1, nil)
				if err != nil {
					b.Fatal(err)
				}
				m := ms[0].Message()
				m.ApplicationProperties = nil
				if err := dst.SendMessage(ctx, m, nil); err != nil {
					b.Fatal(err)
				}
				if err := src.CompleteMessage(ctx, ms[0], nil); err != nil {
					b.Fatal(err)
				}
			}
			total += time.Since(start)
		}
		b.ReportMetric(float64(n*b.N)/total.Seconds(), "msgs/s")
	})
}

// BenchmarkRedriveLarge re-drives a dead-letter queue of 100,000 messages of 1 KiB on
// the 7 ms model and reports the heap the re-drive itself holds: the peak of the live
// heap while it runs (sampled every 100 ms after a GC) minus the larger of the live heap
// before (the namespace holding the dead letters) and after (holding the copies, each
// with one property more). Bounded memory means this stays near MaxInFlight messages
// and two pages, whatever the queue's length.
// SBKIT_REDRIVE_LARGE_N sets another size, to see how the added heap scales.
func BenchmarkRedriveLarge(b *testing.B) {
	n := 100_000
	if v, err := strconv.Atoi(os.Getenv("SBKIT_REDRIVE_LARGE_N")); err == nil && v > 0 {
		n = v
	}
	for range b.N {
		ns := sbtest.NewNamespace(&sbtest.NamespaceOptions{Queues: map[string]*sbtest.EntityOptions{"q": nil, "dst": nil}})
		fillDLQ(b, ns, "q", n)
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		before := ms.HeapAlloc
		var peak atomic.Uint64
		stop := make(chan struct{})
		var wg sync.WaitGroup
		wg.Go(func() {
			t := time.NewTicker(100 * time.Millisecond)
			defer t.Stop()
			for {
				select {
				case <-stop:
					return
				case <-t.C:
					// The live heap: after a collection, so that garbage not yet
					// collected (up to GOGC's 100% more) does not count.
					runtime.GC()
					var m runtime.MemStats
					runtime.ReadMemStats(&m)
					if m.HeapAlloc > peak.Load() {
						peak.Store(m.HeapAlloc)
					}
				}
			}
		})
		elapsed := redriveTimed(b, ns, n, &deadletter.RedriveOptions{IdleTimeout: time.Second})
		close(stop)
		wg.Wait()
		runtime.GC()
		runtime.ReadMemStats(&ms)
		after := ms.HeapAlloc // the copies, each with a property map more than its original
		runtime.KeepAlive(ns)
		b.ReportMetric(float64(n)/elapsed.Seconds(), "msgs/s")
		b.ReportMetric(float64(int64(peak.Load())-int64(max(before, after)))/(1<<20), "transient-heap-MiB")
		b.ReportMetric(float64(before)/(1<<20), "heap-before-MiB")
		b.ReportMetric(float64(after)/(1<<20), "heap-after-MiB")
	}
}
