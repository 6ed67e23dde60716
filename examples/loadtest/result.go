package main

import (
	"fmt"
	"slices"
	"time"
)

// Kind says what a mode measures: sending messages, or processing received ones.
type Kind int

const (
	// KindSend measures the send path: latency is from the send call to its outcome.
	KindSend Kind = iota
	// KindProcess measures the processor: latency is from receipt (ReceiveMessages
	// returned the message) to completion (CompleteMessage returned).
	KindProcess
)

// Result is the measurement of one mode.
type Result struct {
	Mode     string        // "sequential", "goroutines", "pipelined", "batched", "processor"
	Param    int           // window (pipelined) or concurrency (processor); 0 when the mode has none
	Prefetch string        // processor: "" or "auto" (adaptive), "none", or a PrefetchCount
	Kind     Kind          // what Latencies measure
	RTT      time.Duration // the in-memory broker's round trip; 0 on a real namespace
	Handler  time.Duration // processor: the time each handler call takes
	Messages int           // messages that succeeded (processor: timed, after the warm-up)
	Errors   int           // messages that failed
	Elapsed  time.Duration // wall time of the measured phase (processor: after the warm-up)
	P50, P99 time.Duration // latency percentiles (see Kind)
	// PeakInFlightBytes is the largest number of message-body bytes inside send or
	// batch requests at the same instant, measured on the client side.
	PeakInFlightBytes int64
	// Processor runs: the most messages waiting for a handler at once, those waiting when
	// the processor was stopped, and those the stop abandoned.
	PeakBuffered, BufferedAtStop, AbandonedAtStop int64
	// FirstErr is the first error among Errors, for the report; nil when none.
	FirstErr error
}

// Name is the row label: the mode and its parameter, e.g. "pipelined w=16".
func (r Result) Name() string {
	switch {
	case r.Mode == "pipelined":
		return fmt.Sprintf("pipelined w=%d", r.Param)
	case r.Mode == "processor" && r.Prefetch == "none":
		return fmt.Sprintf("processor c=%d no-prefetch", r.Param)
	case r.Mode == "processor" && r.Prefetch != "" && r.Prefetch != "auto":
		return fmt.Sprintf("processor c=%d prefetch=%s", r.Param, r.Prefetch)
	case r.Mode == "processor":
		return fmt.Sprintf("processor c=%d", r.Param)
	case r.Param != 0:
		return fmt.Sprintf("%s %d", r.Mode, r.Param)
	}
	return r.Mode
}

// Throughput returns successful messages per second, 0 when nothing was measured.
func (r Result) Throughput() float64 {
	if r.Elapsed <= 0 {
		return 0
	}
	return float64(r.Messages) / r.Elapsed.Seconds()
}

// OfCapacity returns a processor run's throughput as a share of what its handlers could
// do (concurrency / handler time): 0.85 is 85% of C/h. It is 0 for send modes and
// without a handler time.
func (r Result) OfCapacity() float64 {
	if r.Kind != KindProcess || r.Handler <= 0 || r.Param <= 0 {
		return 0
	}
	return r.Throughput() * r.Handler.Seconds() / float64(r.Param)
}

// isBaseline reports whether r is the row the others of its kind and round trip are
// compared with: sequential for sends, the processor with concurrency 1 and the adaptive
// prefetch for processing.
func (r Result) isBaseline() bool {
	return (r.Kind == KindSend && r.Mode == "sequential") ||
		(r.Kind == KindProcess && r.Mode == "processor" && r.Param == 1 && (r.Prefetch == "" || r.Prefetch == "auto"))
}

// SpeedUps returns, for each result, its throughput divided by that of its baseline at
// the same round trip (see isBaseline); 0 where the baseline was not run or measured
// nothing.
func SpeedUps(results []Result) []float64 {
	type group struct {
		kind Kind
		rtt  time.Duration
	}
	base := map[group]float64{}
	for _, r := range results {
		if r.isBaseline() {
			base[group{r.Kind, r.RTT}] = r.Throughput()
		}
	}
	out := make([]float64, len(results))
	for i, r := range results {
		if b := base[group{r.Kind, r.RTT}]; b > 0 {
			out[i] = r.Throughput() / b
		}
	}
	return out
}

// Percentile returns the p-th percentile (0 <= p <= 100) of samples by the nearest-rank
// method: the smallest sample such that at least p% of the samples are <= it. It returns
// 0 for no samples. samples is not modified.
func Percentile(samples []time.Duration, p float64) time.Duration {
	if len(samples) == 0 {
		return 0
	}
	sorted := slices.Clone(samples)
	slices.Sort(sorted)
	return percentileSorted(sorted, p)
}

func percentileSorted(sorted []time.Duration, p float64) time.Duration {
	n := len(sorted)
	if n == 0 {
		return 0
	}
	p = min(max(p, 0), 100)
	// rank = ceil(p/100 * n), at least 1.
	rank := int(p * float64(n) / 100)
	if float64(rank)*100 < p*float64(n) {
		rank++
	}
	rank = max(rank, 1)
	return sorted[rank-1]
}

// summarize fills r's percentiles from the latency samples.
func summarize(r *Result, samples []time.Duration) {
	sorted := slices.Clone(samples)
	slices.Sort(sorted)
	r.P50 = percentileSorted(sorted, 50)
	r.P99 = percentileSorted(sorted, 99)
}
