package sbkit_test

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/sbkit/sbkit/internal/testing/chart"
	"github.com/sbkit/sbkit/receiver"
	"github.com/sbkit/sbkit/sbtest"
)

// openLoopConcurrency is the handlers of BenchmarkWireOpenLoop's processor; with
// processWork handlers they can do 6,400 msgs/s (C/h).
const openLoopConcurrency = 32

// openLoopCase is one processor configuration of BenchmarkWireOpenLoop and the offered
// loads it runs at, in messages per second.
type openLoopCase struct {
	name  string
	opts  receiver.Options
	rates []int
}

// openLoopCases are the configurations at each round trip: the default (adaptive
// prefetch) at 100 msgs/s and at 10%, 25%, 50%, 75% and 90% of C/h; at 7 ms also no
// prefetch and fixed prefetches. DisablePrefetch does about 1,350 msgs/s at 7 ms
// (docs/benchmarks.md), so it runs at 100 msgs/s and 5%, 10%, 15% and 20% of C/h.
func openLoopCases(rtt time.Duration) []openLoopCase {
	c := openLoopConcurrency
	most := int(float64(c) / processWork.Seconds())
	loads := []int{100, most / 10, most / 4, most / 2, most * 3 / 4, most * 9 / 10}
	if *openLoopRates != "" {
		loads = nil
		for _, f := range strings.Split(*openLoopRates, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || n <= 0 {
				panic(fmt.Sprintf("-openloop.rates: %q is not a positive number", f))
			}
			loads = append(loads, n)
		}
	}
	cases := []openLoopCase{{"default", receiver.Options{MaxConcurrency: c}, loads}}
	if rtt == processLatency.RoundTrip {
		cases = append(cases,
			openLoopCase{"no-prefetch", receiver.Options{MaxConcurrency: c, DisablePrefetch: true},
				[]int{100, most / 20, most / 10, most * 3 / 20, most / 5}},
			openLoopCase{"prefetch-64", receiver.Options{MaxConcurrency: c, PrefetchCount: 64}, loads},
			openLoopCase{"prefetch-128", receiver.Options{MaxConcurrency: c, PrefetchCount: 128}, loads},
		)
	}
	return cases
}

// openLoopSVG names the file BenchmarkWireOpenLoop charts its results in (settled
// latency, p50 and p99, against the offered load: a line for each configuration at each
// round trip); none when empty.
var openLoopSVG = flag.String("openloop.svg", "", "BenchmarkWireOpenLoop: write a chart of its latencies to this SVG file")

// openLoopConn, when set, is the connection string of a running emulator with a queue
// "work" that BenchmarkWireOpenLoop measures against instead of a server of its own (the
// round trip is then the emulator's -latency, whatever the sub-benchmark's name says):
// the same emulator as cmd/sbemulator/conformance/openloop.mjs, the JavaScript SDK's
// processor measured the same way.
var openLoopConn = flag.String("openloop.conn", "", "BenchmarkWireOpenLoop: measure against the running emulator of this connection string (a queue \"work\")")

// openLoopRates, when set, replaces the default configuration's offered loads.
var openLoopRates = flag.String("openloop.rates", "", "BenchmarkWireOpenLoop: comma-separated offered loads (msgs/s) of the default configuration")

// openLoopResult is one sub-benchmark's result, for the chart.
type openLoopResult struct {
	rtt      time.Duration
	name     string
	rate     int
	achieved float64
	p50, p99 float64 // settled, ms
	startP50 float64 // handler start, ms
}

// openLoopResults keeps the last result of each sub-benchmark (a benchmark function
// runs once with b.N = 1 before its measured run).
var openLoopResults struct {
	sync.Mutex
	byKey map[string]openLoopResult
	order []string
}

func recordOpenLoop(r openLoopResult) {
	openLoopResults.Lock()
	defer openLoopResults.Unlock()
	key := fmt.Sprintf("%v/%s/%d", r.rtt, r.name, r.rate)
	if openLoopResults.byKey == nil {
		openLoopResults.byKey = map[string]openLoopResult{}
	}
	if _, ok := openLoopResults.byKey[key]; !ok {
		openLoopResults.order = append(openLoopResults.order, key)
	}
	openLoopResults.byKey[key] = r
}

// writeOpenLoopChart writes the settled p50 and p99 of the default and DisablePrefetch
// against the offered load to path, a line for each at each round trip.
func writeOpenLoopChart(path string) error {
	openLoopResults.Lock()
	defer openLoopResults.Unlock()
	lines := map[string]int{} // series name -> index
	var p50, p99 chart.Panel
	p50 = chart.Panel{Title: "median, enqueue to settled", XLabel: "offered load (msgs/s)", YLabel: "p50 ms"}
	p99 = chart.Panel{Title: "99th percentile, enqueue to settled", XLabel: "offered load (msgs/s)", YLabel: "p99 ms"}
	for _, key := range openLoopResults.order {
		r := openLoopResults.byKey[key]
		if r.name != "default" && r.name != "no-prefetch" {
			continue
		}
		name := fmt.Sprintf("%s, rtt %v", map[string]string{"default": "default", "no-prefetch": "DisablePrefetch"}[r.name], r.rtt)
		i, ok := lines[name]
		if !ok {
			i = len(p50.Series)
			lines[name] = i
			p50.Series = append(p50.Series, chart.Series{Name: name})
			p99.Series = append(p99.Series, chart.Series{Name: name})
		}
		tip := fmt.Sprintf("%s at %d msgs/s (achieved %.0f): p50 %.1f ms, p99 %.1f ms, handler start p50 %.1f ms", name, r.rate, r.achieved, r.p50, r.p99, r.startP50)
		p50.Series[i].Points = append(p50.Series[i].Points, chart.Point{X: float64(r.rate), Y: r.p50, Tip: tip})
		p99.Series[i].Points = append(p99.Series[i].Points, chart.Point{X: float64(r.rate), Y: r.p99, Tip: tip})
	}
	for _, p := range []chart.Panel{p50, p99} {
		for _, s := range p.Series {
			slices.SortFunc(s.Points, func(a, b chart.Point) int { return cmp.Compare(a.X, b.X) })
		}
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	title := fmt.Sprintf("BenchmarkWireOpenLoop: %d handlers of %v, latency at a fixed offered load", openLoopConcurrency, processWork)
	if err := chart.WriteSVG(f, title, []chart.Panel{p50, p99}); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}

// openLoopTimes collects, for every message handled, the time from its EnqueuedTime (the
// broker stored it) to the start of its handler and to the end of its settlement.
type openLoopTimes struct {
	calls   atomic.Int64 // receive calls
	mu      sync.Mutex
	start   []time.Duration
	settled []time.Duration
	want    int
	done    chan struct{}
}

func (t *openLoopTimes) OnReceive(context.Context, receiver.ReceiveCall) { t.calls.Add(1) }

func (t *openLoopTimes) OnHandlerStart(ctx context.Context, e receiver.HandlerStart) context.Context {
	d := time.Since(*e.Message.EnqueuedTime)
	t.mu.Lock()
	t.start = append(t.start, d)
	t.mu.Unlock()
	return ctx
}

func (t *openLoopTimes) OnSettle(_ context.Context, e receiver.Settlement) {
	d := time.Since(*e.Message.EnqueuedTime)
	t.mu.Lock()
	t.settled = append(t.settled, d)
	if len(t.settled) == t.want {
		close(t.done)
	}
	t.mu.Unlock()
}

// percentiles returns the ps-th percentiles (0 to 100) of ds after its first skip, in
// milliseconds.
func percentiles(ds []time.Duration, skip int, ps ...float64) []float64 {
	s := slices.Clone(ds[min(skip, len(ds)-1):])
	slices.Sort(s)
	out := make([]float64, len(ps))
	for i, p := range ps {
		k := min(len(s)-1, int(p/100*float64(len(s))))
		out[i] = float64(s[k]) / float64(time.Millisecond)
	}
	return out
}

// benchOpenLoop offers b.N messages of 1 KiB at rate msgs/s to a queue served over the
// wire with the latency model lat, from a sender of its own (another connection, sends
// in parallel, each paced to its slot), while a processor configured by opts with
// processWork handlers consumes them; it reports the latency from the broker's
// EnqueuedTime to the handler's start and to the end of the settlement (p50, p99,
// p99.9; the first fifth of the messages is the warm-up), the rate achieved, and the
// processor's receive-window counters.
func benchOpenLoop(b *testing.B, lat sbtest.Latency, name string, opts receiver.Options, rate int) {
	conn, released := *openLoopConn, func() int64 { return 0 }
	if conn == "" {
		ns := sbtest.NewTestNamespace(b, &sbtest.NamespaceOptions{Latency: lat, Queues: map[string]*sbtest.EntityOptions{"work": nil}})
		q, _ := ns.Entity("work")
		conn, released = sbtest.NewTestServer(b, &sbtest.ServerOptions{Namespace: ns}).ConnectionString(), func() int64 { return q.Stats().Released }
	}
	client := func() *azservicebus.Client {
		c, err := azservicebus.NewClientFromConnectionString(conn, nil)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = c.Close(context.Background()) })
		return c
	}
	ctx := context.Background()
	snd, err := client().NewSender("work", nil)
	if err != nil {
		b.Fatal(err)
	}
	if err := snd.SendMessage(ctx, &azservicebus.Message{Body: []byte("warm-up")}, nil); err != nil {
		b.Fatal(err)
	}
	rcv, err := client().NewReceiverForQueue("work", nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = rcv.Close(ctx) })
	if msgs, err := rcv.ReceiveMessages(ctx, 1, nil); err != nil || len(msgs) != 1 {
		b.Fatalf("warm-up receive: %d messages, %v", len(msgs), err)
	} else if err := rcv.CompleteMessage(ctx, msgs[0], nil); err != nil {
		b.Fatal(err)
	}

	times := &openLoopTimes{want: b.N, done: make(chan struct{})}
	o := opts
	o.Hooks = append(o.Hooks, times)
	p, err := receiver.New(rcv, func(ctx context.Context, m *azservicebus.ReceivedMessage) error {
		time.Sleep(processWork)
		return nil
	}, &o)
	if err != nil {
		b.Fatal(err)
	}
	res := make(chan error, 1)
	go func() { res <- p.Run(ctx) }()

	body := make([]byte, 1024)
	every := time.Second / time.Duration(rate)
	var sends sync.WaitGroup
	sendErr := make(chan error, 1)
	b.ResetTimer()
	begin := time.Now()
	for i := range b.N {
		if d := time.Until(begin.Add(time.Duration(i) * every)); d > 0 {
			time.Sleep(d)
		}
		sends.Go(func() {
			if err := snd.SendMessage(ctx, &azservicebus.Message{Body: body}, nil); err != nil {
				select {
				case sendErr <- err:
				default:
				}
			}
		})
	}
	sends.Wait()
	select {
	case err := <-sendErr:
		b.Fatal(err)
	default:
	}
	<-times.done
	b.StopTimer()
	atStop := p.Stats()
	if err := p.Close(ctx); err != nil {
		b.Fatal(err)
	}
	if err := <-res; err != nil {
		b.Fatal(err)
	}
	achieved := float64(b.N) / b.Elapsed().Seconds()
	b.ReportMetric(achieved, "msgs/s")
	skip := b.N / 5
	out := openLoopResult{rtt: lat.RoundTrip, name: name, rate: rate, achieved: achieved}
	for _, m := range []struct {
		name string
		ds   []time.Duration
	}{{"start", times.start}, {"settled", times.settled}} {
		pct := percentiles(m.ds, skip, 50, 99, 99.9)
		b.ReportMetric(pct[0], m.name+"-p50-ms")
		b.ReportMetric(pct[1], m.name+"-p99-ms")
		b.ReportMetric(pct[2], m.name+"-p99.9-ms")
		if m.name == "start" {
			out.startP50 = pct[0]
		} else {
			out.p50, out.p99 = pct[0], pct[1]
		}
	}
	recordOpenLoop(out)
	b.ReportMetric(float64(atStop.Prefetch), "prefetch-at-stop")
	b.ReportMetric(float64(times.calls.Load()), "receive-calls")
	s := p.Stats()
	b.ReportMetric(float64(s.PeakBuffered), "peak-buffered")
	b.ReportMetric(float64(s.CutReceives), "cut-receives")
	b.ReportMetric(float64(s.CreditsLeft), "credits-left")
	b.ReportMetric(float64(released()), "released")
}

// BenchmarkWireOpenLoop measures latency at a fixed offered load, the way users feel
// it: a sender of its own offers 1 KiB messages at a fixed rate to a queue served by
// sbtest.NewServer with the latency model at 7 and 50 ms round trips, and a processor of
// 32 handlers of 5 ms (C/h 6,400 msgs/s) consumes them through the real SDK client.
// Latency runs from the broker's EnqueuedTime to the handler's start and to the end of
// its settlement. -benchtime sets the messages offered: 2000x at 100 msgs/s is 20 s.
func BenchmarkWireOpenLoop(b *testing.B) {
	before := runtime.NumGoroutine()
	for _, rtt := range []time.Duration{processLatency.RoundTrip, 50 * time.Millisecond} {
		b.Run(rttName(rtt), func(b *testing.B) {
			for _, c := range openLoopCases(rtt) {
				for _, rate := range c.rates {
					b.Run(fmt.Sprintf("%s/rate=%d", c.name, rate), func(b *testing.B) {
						benchOpenLoop(b, processLatencyAt(rtt), c.name, c.opts, rate)
					})
				}
			}
		})
	}
	if *openLoopSVG != "" {
		if err := writeOpenLoopChart(*openLoopSVG); err != nil {
			b.Fatal(err)
		}
	}
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before {
		if time.Now().After(deadline) {
			b.Fatalf("%d goroutines remain after the benchmarks, %d before", runtime.NumGoroutine(), before)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
