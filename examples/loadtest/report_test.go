package main

import (
	"bytes"
	"encoding/csv"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"
)

func ms(n int) time.Duration { return time.Duration(n) * time.Millisecond }

func TestPercentile(t *testing.T) {
	hundred := make([]time.Duration, 100)
	for i := range hundred {
		hundred[i] = ms(100 - i) // reversed: Percentile must sort
	}
	tests := []struct {
		name    string
		samples []time.Duration
		p       float64
		want    time.Duration
	}{
		{"empty", nil, 50, 0},
		{"one sample", []time.Duration{ms(7)}, 99, ms(7)},
		{"p50 of 1..100", hundred, 50, ms(50)},
		{"p99 of 1..100", hundred, 99, ms(99)},
		{"p100 is max", hundred, 100, ms(100)},
		{"p0 is min", hundred, 0, ms(1)},
		{"nearest rank rounds up", []time.Duration{ms(1), ms(2), ms(3)}, 50, ms(2)},
		{"p99 of few samples is max", []time.Duration{ms(1), ms(2), ms(3), ms(4)}, 99, ms(4)},
		{"out of range clamps", []time.Duration{ms(1), ms(2)}, 150, ms(2)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := Percentile(tc.samples, tc.p); got != tc.want {
				t.Errorf("Percentile(%v) = %v, want %v", tc.p, got, tc.want)
			}
		})
	}
	if hundred[0] != ms(100) {
		t.Error("Percentile modified its input")
	}
}

var sample = []Result{
	{Mode: "sequential", Kind: KindSend, Messages: 100, Elapsed: time.Second, P50: ms(8), P99: ms(9), PeakInFlightBytes: 200},
	{Mode: "pipelined", Param: 16, Kind: KindSend, Messages: 100, Elapsed: 100 * time.Millisecond, P50: ms(9), P99: ms(12), PeakInFlightBytes: 3200},
	{Mode: "pipelined", Param: 1, Kind: KindSend, Messages: 100, Elapsed: time.Second, PeakInFlightBytes: 200},
	{Mode: "batched", Kind: KindSend, Messages: 100, Elapsed: 20 * time.Millisecond, Errors: 2, PeakInFlightBytes: 2 << 20},
	{Mode: "processor", Param: 1, Kind: KindProcess, Messages: 50, Elapsed: time.Second},
	{Mode: "processor", Param: 8, Kind: KindProcess, Prefetch: "auto", Messages: 50, Elapsed: 250 * time.Millisecond,
		PeakBuffered: 40, BufferedAtStop: 3, AbandonedAtStop: 3},
}

func TestResultName(t *testing.T) {
	for _, tc := range []struct {
		r    Result
		want string
	}{
		{Result{Mode: "processor", Param: 8}, "processor c=8"},
		{Result{Mode: "processor", Param: 8, Prefetch: "auto"}, "processor c=8"},
		{Result{Mode: "processor", Param: 8, Prefetch: "none"}, "processor c=8 no-prefetch"},
		{Result{Mode: "processor", Param: 8, Prefetch: "64"}, "processor c=8 prefetch=64"},
	} {
		if got := tc.r.Name(); got != tc.want {
			t.Errorf("%+v: Name %q, want %q", tc.r, got, tc.want)
		}
	}
	// Only the adaptive prefetch at concurrency 1 is the processors' baseline.
	rs := []Result{
		{Mode: "processor", Param: 1, Kind: KindProcess, Prefetch: "none", Messages: 10, Elapsed: time.Second},
		{Mode: "processor", Param: 1, Kind: KindProcess, Prefetch: "auto", Messages: 20, Elapsed: time.Second},
	}
	if s := SpeedUps(rs); s[0] != 0.5 || s[1] != 1 {
		t.Errorf("speed-ups %v, want [0.5 1]", s)
	}
}

func TestSpeedUps(t *testing.T) {
	got := SpeedUps(sample)
	want := []float64{1, 10, 1, 50, 1, 4}
	for i := range want {
		if diff := got[i] - want[i]; diff > 1e-9 || diff < -1e-9 {
			t.Errorf("%s: speed-up %v, want %v", sample[i].Name(), got[i], want[i])
		}
	}
	// Without a baseline nothing is compared.
	if s := SpeedUps(sample[1:2]); s[0] != 0 {
		t.Errorf("speed-up without baseline = %v, want 0", s[0])
	}
}

func TestWriteTable(t *testing.T) {
	var b bytes.Buffer
	if err := WriteTable(&b, sample); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimRight(b.String(), "\n"), "\n")
	if len(lines) != len(sample)+1 {
		t.Fatalf("got %d lines, want %d:\n%s", len(lines), len(sample)+1, b.String())
	}
	// Columns are aligned: every row's throughput starts where the header's does.
	col := strings.Index(lines[0], "msgs/s")
	for _, l := range lines[1:] {
		if l[col-1] != ' ' || l[col] == ' ' {
			t.Errorf("row not aligned on column %d: %q", col, l)
		}
	}
	for _, want := range []string{
		"pipelined w=16", "10.0x", "1000", "9ms", "12ms", "3.1 KiB",
		"batched", "50.0x", "2.0 MiB", "processor c=8", "4.0x", "40/3",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, b.String())
		}
	}
}

func TestWriteTableNoBaseline(t *testing.T) {
	var b bytes.Buffer
	_ = WriteTable(&b, sample[1:2])
	row := strings.Split(b.String(), "\n")[1]
	if fields := strings.Fields(row); fields[4] != "-" { // pipelined w=16, rtt, msgs/s, speed-up
		t.Errorf("speed-up without baseline: %q, want -", fields[3])
	}
}

func TestWriteCSV(t *testing.T) {
	var b bytes.Buffer
	if err := WriteCSV(&b, sample); err != nil {
		t.Fatal(err)
	}
	rows, err := csv.NewReader(&b).ReadAll()
	if err != nil {
		t.Fatalf("CSV does not parse back: %v", err)
	}
	if len(rows) != len(sample)+1 {
		t.Fatalf("%d rows, want %d", len(rows), len(sample)+1)
	}
	header := strings.Join(rows[0], ",")
	if header != "mode,param,kind,messages,errors,elapsed_ms,msgs_per_s,speedup,p50_us,p99_us,peak_inflight_bytes,"+
		"prefetch,peak_buffered,buffered_at_stop,abandoned_at_stop,rtt_us,of_capacity" {
		t.Errorf("header = %s", header)
	}
	got := strings.Join(rows[2], ",")
	if want := "pipelined,16,send,100,0,100,1000.0,10.00,9000,12000,3200,,0,0,0,0,0.000"; got != want {
		t.Errorf("row = %s\nwant  %s", got, want)
	}
	if rows[5][2] != "process" {
		t.Errorf("processor kind = %q", rows[5][2])
	}
	if got := strings.Join(rows[6][11:], ","); got != "auto,40,3,3,0,0.000" {
		t.Errorf("processor prefetch columns = %s", got)
	}
}

type failWriter struct{}

func (failWriter) Write([]byte) (int, error) { return 0, errors.New("disk full") }

func TestWritersReportErrors(t *testing.T) {
	for name, write := range map[string]func(io.Writer, []Result) error{
		"table": WriteTable, "csv": WriteCSV,
		"svg": func(w io.Writer, r []Result) error { return WriteSVG(w, "t", r) },
	} {
		if err := write(failWriter{}, sample); err == nil {
			t.Errorf("%s: write error not reported", name)
		}
	}
}

// parseSVG decodes the whole document and returns the count of each element name.
func parseSVG(t *testing.T, doc []byte) map[string]int {
	t.Helper()
	d := xml.NewDecoder(bytes.NewReader(doc))
	d.Strict = true
	count := map[string]int{}
	depth := 0
	for {
		tok, err := d.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("SVG is not well-formed XML: %v\n%s", err, doc)
		}
		switch tok := tok.(type) {
		case xml.StartElement:
			if depth == 0 && (tok.Name.Local != "svg" || tok.Name.Space != "http://www.w3.org/2000/svg") {
				t.Fatalf("root element %v, want svg in the SVG namespace", tok.Name)
			}
			depth++
			count[tok.Name.Local]++
		case xml.EndElement:
			depth--
		}
	}
	return count
}

func TestWriteSVG(t *testing.T) {
	results := append([]Result{}, sample...)
	results = append(results,
		Result{Mode: "pipelined", Param: 4, Kind: KindSend, Messages: 100, Elapsed: 300 * time.Millisecond},
		Result{Mode: "pipelined", Param: 256, Kind: KindSend, Messages: 100, Elapsed: 10 * time.Millisecond},
	)
	var b bytes.Buffer
	title := `throughput <rtt=7ms & store="1ms">`
	if err := WriteSVG(&b, title, results); err != nil {
		t.Fatal(err)
	}
	count := parseSVG(t, b.Bytes())
	// The pipelined sends, and the two processor runs' throughput and latency.
	if count["polyline"] != 1+2*2 {
		t.Errorf("%d polylines, want 5", count["polyline"])
	}
	if count["circle"] != 4+2*2 { // windows 1, 4, 16, 256; one round trip
		t.Errorf("%d points, want 8", count["circle"])
	}
	// x ticks at each power of two from 1 to 256: 9 labels.
	for _, w := range []string{">1<", ">2<", ">8<", ">128<", ">256<"} {
		if !strings.Contains(b.String(), w) {
			t.Errorf("missing x tick label %s", w)
		}
	}
	if !strings.Contains(b.String(), "&lt;rtt=7ms &amp; store=&#34;1ms&#34;&gt;") {
		t.Errorf("title not escaped:\n%s", b.String())
	}
	if !strings.Contains(b.String(), "stroke-dasharray") {
		t.Error("no reference line for sequential/batched")
	}
}

func TestWriteSVGWithoutPipelined(t *testing.T) {
	var b bytes.Buffer
	if err := WriteSVG(&b, "t", sample[:1]); err != nil {
		t.Fatal(err)
	}
	count := parseSVG(t, b.Bytes())
	if count["polyline"] != 0 || !strings.Contains(b.String(), "no pipelined or processor results") {
		t.Errorf("empty chart not explained:\n%s", b.String())
	}
}

// Processor runs at several round trips are plotted against the round trip, on a log
// scale, a line per configuration in each of the throughput and latency charts, each
// line's points in the order of the round trips whatever the order of the runs.
func TestWriteSVGProcessorRoundTrips(t *testing.T) {
	var results []Result
	for _, rtt := range []time.Duration{ms(50), ms(1), ms(100), ms(7)} {
		for _, c := range []int{8, 32} {
			results = append(results, Result{Mode: "processor", Param: c, Kind: KindProcess, RTT: rtt, Handler: ms(5),
				Messages: 1000, Elapsed: 5 * time.Second / time.Duration(c), P50: ms(5) + 2*rtt})
		}
	}
	var b bytes.Buffer
	if err := WriteSVG(&b, "t", results); err != nil {
		t.Fatal(err)
	}
	count := parseSVG(t, b.Bytes())
	if count["polyline"] != 4 || count["circle"] != 16 {
		t.Errorf("%d polylines and %d points, want 4 and 16", count["polyline"], count["circle"])
	}
	for _, want := range []string{">1ms<", ">7ms<", ">50ms<", ">100ms<", "processor c=8", "processor c=32",
		"p50 latency", "log scale", "(100% of C/h)", "C/h of c=32: 6400 msgs/s"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("chart lacks %q", want)
		}
	}
	if strings.Contains(b.String(), "pipelined sends") {
		t.Error("a pipelined chart without pipelined results")
	}
	for _, pts := range polylines(t, b.String()) {
		for i := 1; i < len(pts); i++ {
			if pts[i][0] <= pts[i-1][0] {
				t.Errorf("polyline x not increasing: %v", pts)
			}
		}
		// Log scale: 1 → 7 ms spans more than 50 → 100 ms.
		if len(pts) == 4 && pts[1][0]-pts[0][0] <= pts[3][0]-pts[2][0] {
			t.Errorf("round trips not on a log scale: %v", pts)
		}
	}
}

// polylines returns the points of every polyline of an SVG document.
func polylines(t *testing.T, s string) [][][2]float64 {
	t.Helper()
	var out [][][2]float64
	for rest := s; ; {
		i := strings.Index(rest, `points="`)
		if i < 0 {
			return out
		}
		rest = rest[i+len(`points="`):]
		var line [][2]float64
		for _, p := range strings.Fields(rest[:strings.Index(rest, `"`)]) {
			var x, y float64
			if _, err := fmt.Sscanf(p, "%f,%f", &x, &y); err != nil {
				t.Fatalf("point %q: %v", p, err)
			}
			line = append(line, [2]float64{x, y})
		}
		out = append(out, line)
	}
}

func TestByteSize(t *testing.T) {
	tests := []struct {
		n    int64
		want string
	}{{0, "0 B"}, {1023, "1023 B"}, {1024, "1.0 KiB"}, {1536, "1.5 KiB"}, {3 << 20, "3.0 MiB"}, {5 << 30, "5.0 GiB"}}
	for _, tc := range tests {
		if got := byteSize(tc.n); got != tc.want {
			t.Errorf("byteSize(%d) = %q, want %q", tc.n, got, tc.want)
		}
	}
}

func TestNiceStep(t *testing.T) {
	tests := []struct{ raw, want float64 }{{0, 1}, {0.5, 1}, {3, 5}, {12, 20}, {180, 200}, {4100, 5000}, {7000, 10000}}
	for _, tc := range tests {
		if got := niceStep(tc.raw); got != tc.want {
			t.Errorf("niceStep(%v) = %v, want %v", tc.raw, got, tc.want)
		}
	}
}

func TestWriteSVGSortsWindows(t *testing.T) {
	results := []Result{
		{Mode: "pipelined", Param: 16, Kind: KindSend, Messages: 10, Elapsed: time.Millisecond},
		{Mode: "pipelined", Param: 1, Kind: KindSend, Messages: 10, Elapsed: 10 * time.Millisecond},
		{Mode: "pipelined", Param: 4, Kind: KindSend, Messages: 10, Elapsed: 5 * time.Millisecond},
	}
	var b bytes.Buffer
	if err := WriteSVG(&b, "t", results); err != nil {
		t.Fatal(err)
	}
	s := b.String()
	i := strings.Index(s, `points="`) + len(`points="`)
	pts := strings.Fields(s[i : i+strings.Index(s[i:], `"`)])
	var last float64 = -1
	for _, p := range pts {
		var x, y float64
		if _, err := fmt.Sscanf(p, "%f,%f", &x, &y); err != nil {
			t.Fatalf("point %q: %v", p, err)
		}
		if x <= last {
			t.Errorf("polyline x not increasing: %v", pts)
		}
		last = x
	}
}
