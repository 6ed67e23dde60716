package main

import (
	"bytes"
	"cmp"
	"encoding/xml"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"time"
)

// Chart geometry, in SVG user units: each panel is panelHeight tall below the document's
// title.
const (
	chartWidth  = 640
	titleHeight = 30
	panelHeight = 370
	marginLeft  = 70
	marginRight = 20
	marginTop   = 40 // within a panel: its title
	marginBot   = 50
)

// palette colours the lines of a panel, in order.
var palette = []string{"#1f6feb", "#d1242f", "#1a7f37", "#9a6700", "#8250df", "#bf3989", "#0a7f8f", "#57606a"}

// point is one plotted value; tip is its tooltip.
type point struct {
	x, y float64
	tip  string
}

// series is one line of a panel.
type series struct {
	name   string
	points []point // by x
}

// refLine is a dashed horizontal reference line.
type refLine struct {
	label string
	y     float64
}

// panel is one line chart.
type panel struct {
	title    string
	xLabel   string
	xLog     bool      // log scale (every x > 0)
	xTicks   []float64 // tick positions, ascending
	xFormat  func(float64) string
	yLabel   string
	lines    []series
	refs     []refLine
	valueTag bool // write each point's value above it
}

// WriteSVG draws results as a standalone SVG document of line charts: the throughput of
// the pipelined sends against their window (log2 x axis; sequential and batched as
// dashed reference lines), and for processor runs their throughput (with what the
// handlers could do, C/h, as dashed reference lines) and their median latency against
// the round trip, a line for each configuration (concurrency and prefetch). A chart is drawn when its results are present; with none, the document
// says so instead of drawing an empty plot. All text is XML-escaped.
func WriteSVG(w io.Writer, title string, results []Result) error {
	var panels []panel
	if p, ok := pipelinedPanel(results); ok {
		panels = append(panels, p)
	}
	panels = append(panels, processorPanels(results)...)
	height := titleHeight + panelHeight*max(1, len(panels))
	var b bytes.Buffer
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n",
		chartWidth, height, chartWidth, height)
	fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="white"/>`+"\n", chartWidth, height)
	text(&b, chartWidth/2, 20, "middle", 13, title)
	if len(panels) == 0 {
		text(&b, chartWidth/2, float64(height)/2, "middle", 12, "no pipelined or processor results to plot")
	}
	for i, p := range panels {
		p.draw(&b, float64(titleHeight+i*panelHeight))
	}
	b.WriteString("</svg>\n")
	_, err := w.Write(b.Bytes())
	return err
}

// pipelinedPanel is the throughput of the pipelined sends against their window; false
// when no pipelined send ran.
func pipelinedPanel(results []Result) (panel, bool) {
	p := panel{title: "pipelined sends", xLabel: "window (messages in flight, log2 scale)", xLog: true,
		xFormat: func(v float64) string { return fmt.Sprint(int(v)) }, yLabel: "msgs/s", valueTag: true}
	var line series
	for _, r := range results {
		switch {
		case r.Mode == "pipelined" && r.Param > 0:
			line.points = append(line.points, point{float64(r.Param), r.Throughput(),
				fmt.Sprintf("%s: %.0f msgs/s", r.Name(), r.Throughput())})
		case r.Kind == KindSend && (r.Mode == "sequential" || r.Mode == "batched"):
			p.refs = append(p.refs, refLine{fmt.Sprintf("%s %.0f msgs/s", r.Name(), r.Throughput()), r.Throughput()})
		}
	}
	if len(line.points) == 0 {
		return p, false
	}
	slices.SortFunc(line.points, func(a, b point) int { return cmpFloat(a.x, b.x) })
	// Ticks at every power of two across the windows.
	lo := math.Floor(math.Log2(line.points[0].x))
	hi := math.Ceil(math.Log2(line.points[len(line.points)-1].x))
	for e := lo; e <= max(hi, lo+1); e++ {
		p.xTicks = append(p.xTicks, math.Exp2(e))
	}
	line.name = "pipelined"
	p.lines = []series{line}
	return p, true
}

// processorPanels are the processor runs' throughput and median latency against the
// round trip, a line for each configuration; none when no processor ran.
func processorPanels(results []Result) []panel {
	var names []string // the configurations, in the order they ran
	var rtts []float64 // the round trips, in ms
	for _, r := range results {
		if r.Kind != KindProcess {
			continue
		}
		if !slices.Contains(names, r.Name()) {
			names = append(names, r.Name())
		}
		if x := float64(r.RTT) / float64(time.Millisecond); !slices.Contains(rtts, x) {
			rtts = append(rtts, x)
		}
	}
	if len(names) == 0 {
		return nil
	}
	slices.Sort(rtts)
	logScale := len(rtts) > 1 && rtts[0] > 0
	format := func(v float64) string { return time.Duration(v * float64(time.Millisecond)).String() }
	xLabel := "round trip"
	if logScale {
		xLabel += " (log scale)"
	}
	throughput := panel{title: "processor: throughput", xLabel: xLabel, xLog: logScale, xTicks: rtts, xFormat: format, yLabel: "msgs/s"}
	latency := panel{title: "processor: p50 latency, receipt to completion", xLabel: xLabel, xLog: logScale, xTicks: rtts, xFormat: format, yLabel: "p50 ms"}
	var capacities []int // concurrencies with a reference line at what their handlers could do
	for _, name := range names {
		var tput, p50 series
		tput.name, p50.name = name, name
		for _, r := range results {
			if r.Kind != KindProcess || r.Name() != name {
				continue
			}
			if r.Handler > 0 && !slices.Contains(capacities, r.Param) {
				capacities = append(capacities, r.Param)
				c := float64(r.Param) / r.Handler.Seconds()
				throughput.refs = append(throughput.refs, refLine{fmt.Sprintf("C/h of c=%d: %.0f msgs/s", r.Param, c), c})
			}
			x := float64(r.RTT) / float64(time.Millisecond)
			ms := float64(r.P50) / float64(time.Millisecond)
			tput.points = append(tput.points, point{x, r.Throughput(),
				fmt.Sprintf("%s, rtt %v: %.0f msgs/s (%.0f%% of C/h)", name, r.RTT, r.Throughput(), 100*r.OfCapacity())})
			p50.points = append(p50.points, point{x, ms, fmt.Sprintf("%s, rtt %v: p50 %.1f ms", name, r.RTT, ms)})
		}
		byX := func(a, b point) int { return cmpFloat(a.x, b.x) }
		slices.SortStableFunc(tput.points, byX)
		slices.SortStableFunc(p50.points, byX)
		throughput.lines = append(throughput.lines, tput)
		latency.lines = append(latency.lines, p50)
	}
	return []panel{throughput, latency}
}

func cmpFloat(a, b float64) int { return cmp.Compare(a, b) }

// draw writes p with its top edge at top.
func (p panel) draw(b *bytes.Buffer, top float64) {
	text(b, chartWidth/2, top+24, "middle", 12, p.title)
	tx := func(v float64) float64 {
		if p.xLog {
			return math.Log10(v)
		}
		return v
	}
	lo, hi := tx(p.xTicks[0]), tx(p.xTicks[len(p.xTicks)-1])
	if hi == lo {
		lo, hi = lo-1, hi+1 // one position: in the middle
	}
	// y: 0 .. a rounded maximum covering points and reference lines.
	yMax := 0.0
	for _, l := range p.lines {
		for _, pt := range l.points {
			yMax = math.Max(yMax, pt.y)
		}
	}
	for _, r := range p.refs {
		yMax = math.Max(yMax, r.y)
	}
	yStep := niceStep(yMax / 5)
	yTop := math.Max(yStep, math.Ceil(yMax/yStep)*yStep)

	plotW := float64(chartWidth - marginLeft - marginRight)
	plotH := float64(panelHeight - marginTop - marginBot)
	x0, y0 := float64(marginLeft), top+float64(panelHeight-marginBot)
	x := func(v float64) float64 { return x0 + (tx(v)-lo)/(hi-lo)*plotW }
	y := func(v float64) float64 { return y0 - v/yTop*plotH }

	// Axes.
	fmt.Fprintf(b, `<g stroke="black" stroke-width="1"><line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f"/><line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f"/></g>`+"\n",
		x0, y0, x0+plotW, y0, x0, y0, x0, y0-plotH)
	for _, v := range p.xTicks {
		px := x(v)
		fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="black"/>`+"\n", px, y0, px, y0+5)
		text(b, px, y0+18, "middle", 11, p.xFormat(v))
	}
	text(b, x0+plotW/2, y0+40, "middle", 12, p.xLabel)
	// Y ticks and grid.
	for v := 0.0; v <= yTop+yStep/2; v += yStep {
		py := y(v)
		fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#ddd"/>`+"\n", x0, py, x0+plotW, py)
		fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="black"/>`+"\n", x0-5, py, x0, py)
		text(b, x0-8, py+4, "end", 11, fmt.Sprintf("%.0f", v))
	}
	mid := y0 - plotH/2
	fmt.Fprintf(b, `<text x="16" y="%.1f" text-anchor="middle" font-size="12" transform="rotate(-90 16 %.1f)">`, mid, mid)
	_ = xml.EscapeText(b, []byte(p.yLabel))
	b.WriteString("</text>\n")

	// Reference lines.
	for i, r := range p.refs {
		py := y(r.y)
		fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#888" stroke-dasharray="6 4"/>`+"\n", x0, py, x0+plotW, py)
		text(b, x0+plotW-4, py-4-float64(i%2)*12, "end", 11, r.label)
	}

	// The lines, with a legend when there are several.
	for i, l := range p.lines {
		color := palette[i%len(palette)]
		var pts strings.Builder
		for j, pt := range l.points {
			if j > 0 {
				pts.WriteByte(' ')
			}
			fmt.Fprintf(&pts, "%.1f,%.1f", x(pt.x), y(pt.y))
		}
		fmt.Fprintf(b, `<polyline fill="none" stroke="%s" stroke-width="2" points="%s"/>`+"\n", color, pts.String())
		for _, pt := range l.points {
			fmt.Fprintf(b, `<circle cx="%.1f" cy="%.1f" r="4" fill="%s"><title>`, x(pt.x), y(pt.y), color)
			_ = xml.EscapeText(b, []byte(pt.tip))
			b.WriteString("</title></circle>\n")
			if p.valueTag {
				text(b, x(pt.x), y(pt.y)-8, "middle", 10, fmt.Sprintf("%.0f", pt.y))
			}
		}
		if len(p.lines) > 1 {
			ly := top + float64(marginTop) + 4 + float64(i)*14
			fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-width="2"/>`+"\n", x0+10, ly-4, x0+28, ly-4, color)
			text(b, x0+32, ly, "start", 11, l.name)
		}
	}
}

// text writes an escaped <text> element.
func text(b *bytes.Buffer, x, y float64, anchor string, size int, s string) {
	fmt.Fprintf(b, `<text x="%.1f" y="%.1f" text-anchor="%s" font-size="%d">`, x, y, anchor, size)
	_ = xml.EscapeText(b, []byte(s))
	b.WriteString("</text>\n")
}

// niceStep rounds raw up to 1, 2 or 5 times a power of ten (at least 1).
func niceStep(raw float64) float64 {
	if raw <= 1 {
		return 1
	}
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*mag >= raw {
			return m * mag
		}
	}
	return 10 * mag
}
