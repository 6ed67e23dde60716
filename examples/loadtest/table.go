package main

import (
	"encoding/csv"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

var columns = []string{"mode", "rtt", "msgs/s", "speed-up", "of C/h", "p50 latency", "p99 latency", "peak in-flight", "buffered peak/stop", "abandoned", "errors"}

// WriteTable prints results as an aligned text table. Speed-up is against sequential for
// send modes and against "processor c=1" for processor modes, at the same round trip;
// "-" when that baseline did not run. "of C/h" is a processor run's throughput against
// what its handlers could do (see Result.OfCapacity). The round trip is "-" on a real
// namespace.
func WriteTable(w io.Writer, results []Result) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, strings.Join(columns, "\t"))
	speedUps := SpeedUps(results)
	for i, r := range results {
		speedUp := "-"
		if speedUps[i] > 0 {
			speedUp = fmt.Sprintf("%.1fx", speedUps[i])
		}
		peak := "-"
		if r.PeakInFlightBytes > 0 {
			peak = byteSize(r.PeakInFlightBytes)
		}
		buffered, abandoned, ofCapacity := "-", "-", "-"
		if r.Kind == KindProcess {
			buffered = fmt.Sprintf("%d/%d", r.PeakBuffered, r.BufferedAtStop)
			abandoned = fmt.Sprint(r.AbandonedAtStop)
		}
		if c := r.OfCapacity(); c > 0 {
			ofCapacity = fmt.Sprintf("%.0f%%", 100*c)
		}
		rtt := "-"
		if r.RTT > 0 {
			rtt = r.RTT.String()
		}
		fmt.Fprintf(tw, "%s\t%s\t%.0f\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%d\n",
			r.Name(), rtt, r.Throughput(), speedUp, ofCapacity, roundLatency(r.P50), roundLatency(r.P99), peak, buffered, abandoned, r.Errors)
	}
	return tw.Flush()
}

// WriteCSV writes results as CSV with a header row and raw numbers: throughput in
// messages per second, latencies and the round trip in microseconds, bytes as integers,
// the share of the handlers' capacity as a fraction (0 for send modes).
func WriteCSV(w io.Writer, results []Result) error {
	cw := csv.NewWriter(w)
	_ = cw.Write([]string{"mode", "param", "kind", "messages", "errors", "elapsed_ms",
		"msgs_per_s", "speedup", "p50_us", "p99_us", "peak_inflight_bytes",
		"prefetch", "peak_buffered", "buffered_at_stop", "abandoned_at_stop", "rtt_us", "of_capacity"})
	speedUps := SpeedUps(results)
	for i, r := range results {
		kind := "send"
		if r.Kind == KindProcess {
			kind = "process"
		}
		_ = cw.Write([]string{
			r.Mode, strconv.Itoa(r.Param), kind,
			strconv.Itoa(r.Messages), strconv.Itoa(r.Errors),
			strconv.FormatInt(r.Elapsed.Milliseconds(), 10),
			strconv.FormatFloat(r.Throughput(), 'f', 1, 64),
			strconv.FormatFloat(speedUps[i], 'f', 2, 64),
			strconv.FormatInt(r.P50.Microseconds(), 10),
			strconv.FormatInt(r.P99.Microseconds(), 10),
			strconv.FormatInt(r.PeakInFlightBytes, 10),
			r.Prefetch,
			strconv.FormatInt(r.PeakBuffered, 10),
			strconv.FormatInt(r.BufferedAtStop, 10),
			strconv.FormatInt(r.AbandonedAtStop, 10),
			strconv.FormatInt(r.RTT.Microseconds(), 10),
			strconv.FormatFloat(r.OfCapacity(), 'f', 3, 64),
		})
	}
	cw.Flush()
	return cw.Error()
}

// roundLatency keeps three significant figures or so, for reading.
func roundLatency(d time.Duration) time.Duration {
	switch {
	case d >= time.Second:
		return d.Round(10 * time.Millisecond)
	case d >= time.Millisecond:
		return d.Round(10 * time.Microsecond)
	}
	return d.Round(time.Microsecond)
}

// byteSize formats n bytes with a binary unit: 512 B, 4.0 KiB, 1.5 MiB.
func byteSize(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}
