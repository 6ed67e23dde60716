package deadletter_test

import (
	"context"
	"fmt"
	"math"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
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
func fillDLQ(b testing.TB, ns *sbtest.Namespace, q string, n int) {
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
func redriveTimed(tb testing.TB, ns *sbtest.Namespace, n int, opts *deadletter.RedriveOptions) time.Duration {
	tb.Helper()
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
		tb.Fatalf("%+v %v", st, err)
	}
	return (<-done).Sub(start)
}

// senderTimed sends n messages of 1 KiB to a new namespace's queue with the plain
// pipelined sender (ordered, as a re-drive's), on the 7 ms model, and returns the time
// until the last was accepted.
func senderTimed(tb testing.TB, n int) time.Duration {
	tb.Helper()
	ctx := context.Background()
	ns := sbtest.NewNamespace(&sbtest.NamespaceOptions{Queues: map[string]*sbtest.EntityOptions{"dst": nil}})
	ns.SetLatency(benchLatency)
	dst, _ := ns.NewSender("dst", nil)
	msgs := make([]*azservicebus.Message, n)
	for i := range msgs {
		msgs[i] = &azservicebus.Message{Body: benchBody, MessageID: new(fmt.Sprint("m", i))}
	}
	start := time.Now()
	s, _ := sender.New(dst, &sender.Options{Ordered: true})
	if err := s.SendAll(ctx, msgs); err != nil {
		tb.Fatal(err)
	}
	_ = s.Close(ctx)
	return time.Since(start)
}

func newBenchNamespace() *sbtest.Namespace {
	return sbtest.NewNamespace(&sbtest.NamespaceOptions{Queues: map[string]*sbtest.EntityOptions{"q": nil, "dst": nil}})
}

// BenchmarkRedrive compares re-driving a dead-letter queue of 1 KiB messages on the 7 ms
// model with the plain pipelined sender sending the same messages (the ceiling: a
// re-drive also receives and completes each one). Each iteration runs both, one after
// the other, and the ratio is of that iteration's two rates (redrive/sender). Also
// measured: pages of 250 (smaller than the sender's window) and, for 200 messages, the
// sequential way (receive one, send it, complete it).
//
// 20,000 messages measure the throughput: the pipeline's fill and drain (the first
// receive, the last complete: two round trips) are small against the run. 2,000
// messages show them: the sender needs about two of its round trips for 2,000, and a
// re-drive adds a receive before them and a complete after. The CPU per message is the
// process's (the model's work included) during the sender's run and the re-drive's
// (whose time also counts its last receive's IdleTimeout, idle).
func BenchmarkRedrive(b *testing.B) {
	for _, n := range []int{20_000, 2_000} {
		b.Run(fmt.Sprint("n=", n), func(b *testing.B) {
			var snd, rd, rd250, sndCPU, rdCPU time.Duration
			for range b.N {
				c0, _ := cpuTime()
				s := senderTimed(b, n)
				c1, _ := cpuTime()
				ns := newBenchNamespace()
				fillDLQ(b, ns, "q", n)
				runtime.GC() // the fill's garbage is not the re-drive's work
				c2, _ := cpuTime()
				r := redriveTimed(b, ns, n, &deadletter.RedriveOptions{IdleTimeout: time.Second})
				c3, ok := cpuTime()
				if ok {
					sndCPU, rdCPU = sndCPU+c1-c0, rdCPU+c3-c2
				}
				ns = newBenchNamespace()
				fillDLQ(b, ns, "q", n)
				r250 := redriveTimed(b, ns, n, &deadletter.RedriveOptions{IdleTimeout: time.Second, PageSize: 250})
				snd, rd, rd250 = snd+s, rd+r, rd250+r250
			}
			rate := func(d time.Duration) float64 { return float64(n*b.N) / d.Seconds() }
			b.ReportMetric(rate(snd), "sender-msgs/s")
			b.ReportMetric(rate(rd), "redrive-msgs/s")
			b.ReportMetric(rate(rd250), "redrive-page250-msgs/s")
			b.ReportMetric(snd.Seconds()/rd.Seconds(), "redrive/sender")
			b.ReportMetric(snd.Seconds()/rd250.Seconds(), "page250/sender")
			if sndCPU > 0 {
				// CPU per message (the model's work included): on a loaded machine the
				// rates follow it more than the round trips.
				perMsg := func(d time.Duration) float64 { return float64(d.Microseconds()) / float64(n*b.N) }
				b.ReportMetric(perMsg(sndCPU), "sender-cpu-µs/msg")
				b.ReportMetric(perMsg(rdCPU), "redrive-cpu-µs/msg")
			}
		})
	}
	b.Run("sequential", func(b *testing.B) {
		const n = 200
		ctx := context.Background()
		var total time.Duration
		for range b.N {
			ns := newBenchNamespace()
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

// TestRedriveKeepsUpWithSender re-drives 10,000 dead letters on the 7 ms model in
// virtual time (testing/synctest: the clock moves only when every goroutine waits, so
// the machine's load does not count, only how the re-drive overlaps its round trips)
// and requires at least 80% of the plain sender's rate on the same messages. One
// receiver receives one page per round trip, so pages much smaller than the sender's
// window leave the sender waiting: pages of 250 reach about a third.
func TestRedriveKeepsUpWithSender(t *testing.T) {
	const n = 10_000
	synctest.Test(t, func(t *testing.T) {
		ns := newBenchNamespace()
		fillDLQ(t, ns, "q", n)
		rd := redriveTimed(t, ns, n, &deadletter.RedriveOptions{IdleTimeout: time.Second})
		snd := senderTimed(t, n)
		ratio := snd.Seconds() / rd.Seconds()
		t.Logf("virtual time: re-drive %v, sender %v: %.0f%% of the sender", rd, snd, 100*ratio)
		if ratio < 0.8 {
			t.Errorf("re-drive at %.0f%% of the sender's rate (%v against %v), want at least 80%%", 100*ratio, rd, snd)
		}
	})
}

// BenchmarkRedriveLarge re-drives a dead-letter queue of 100,000 messages of 1 KiB on
// the 7 ms model and reports the heap the re-drive holds: every 100 ms, after a GC, the
// heap profile's live bytes allocated by a call through package deadletter (the pages
// it received, the copies it made, its tracking, what the sender and the receiver
// allocated for its calls), scaled from the profile's samples; its peak is
// redrive-heap-MiB. Bounded memory means this stays near MaxInFlight messages and two
// pages, whatever the queue's length. The live heap before (the namespace holding the
// dead letters) and after (holding the copies, each with one property more) are the
// model's. SBKIT_REDRIVE_LARGE_N sets another size, to see how the re-drive's heap
// scales.
func BenchmarkRedriveLarge(b *testing.B) {
	n := 100_000
	if v, err := strconv.Atoi(os.Getenv("SBKIT_REDRIVE_LARGE_N")); err == nil && v > 0 {
		n = v
	}
	// One sample per 16 KiB allocated instead of 512 KiB: about one message in ten.
	defer func(r int) { runtime.MemProfileRate = r }(runtime.MemProfileRate)
	runtime.MemProfileRate = 16 << 10
	for range b.N {
		ns := newBenchNamespace()
		fillDLQ(b, ns, "q", n)
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		before := ms.HeapAlloc
		base := heapBy(deadletterFrame) // the fill's calls through deadletter: none
		var peak atomic.Int64
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
					runtime.GC()
					if h := heapBy(deadletterFrame) - base; h > peak.Load() {
						peak.Store(h)
					}
				}
			}
		})
		elapsed := redriveTimed(b, ns, n, &deadletter.RedriveOptions{IdleTimeout: time.Second})
		close(stop)
		wg.Wait()
		runtime.GC()
		runtime.ReadMemStats(&ms)
		after := ms.HeapAlloc
		runtime.KeepAlive(ns)
		b.ReportMetric(float64(n)/elapsed.Seconds(), "msgs/s")
		b.ReportMetric(float64(peak.Load())/(1<<20), "redrive-heap-MiB")
		b.ReportMetric(float64(before)/(1<<20), "heap-before-MiB")
		b.ReportMetric(float64(after)/(1<<20), "heap-after-MiB")
	}
}

// deadletterFrame reports whether fn is a function of package deadletter (not of its
// tests).
func deadletterFrame(fn string) bool {
	return strings.HasPrefix(fn, "github.com/sbkit/sbkit/deadletter.")
}

// heapBy returns the live bytes of the heap profile (as of the last GC) allocated by a
// call stack with a frame that match accepts, scaled as pprof scales the samples.
func heapBy(match func(fn string) bool) int64 {
	var recs []runtime.MemProfileRecord
	n, _ := runtime.MemProfile(nil, false)
	for {
		recs = make([]runtime.MemProfileRecord, n+50)
		var ok bool
		if n, ok = runtime.MemProfile(recs, false); ok {
			recs = recs[:n]
			break
		}
	}
	rate := float64(runtime.MemProfileRate)
	var total float64
	for _, r := range recs {
		objs, bytes := r.InUseObjects(), r.InUseBytes()
		if objs == 0 || !matchStack(r.Stack(), match) {
			continue
		}
		// A sample stands for 1/(1-e^(-size/rate)) allocations of its size
		// (runtime/pprof's scaleHeapSample).
		size := float64(bytes) / float64(objs)
		total += float64(bytes) / (1 - math.Exp(-size/rate))
	}
	return int64(total)
}

func matchStack(stk []uintptr, match func(string) bool) bool {
	frames := runtime.CallersFrames(stk)
	for {
		f, more := frames.Next()
		if match(f.Function) {
			return true
		}
		if !more {
			return false
		}
	}
}
