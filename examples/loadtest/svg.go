package main

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
)

// Chart geometry, in SVG user units.
const (
	chartWidth  = 640
	chartHeight = 400
	marginLeft  = 70
	marginRight = 20
	marginTop   = 40
	marginBot   = 50
)

// WriteSVG draws the throughput of the pipelined results against their window size, on a
// log2 x axis, as a standalone SVG document. Sequential and batched results, when present,
// are drawn as dashed horizontal reference lines. With no pipelined result the chart says
// so instead of drawing an empty plot. All text is XML-escaped.
func WriteSVG(w io.Writer, title string, results []Result) error {
	var points []Result
	var refs []Result
	for _, r := range results {
		switch {
		case r.Mode == "pipelined" && r.Param > 0:
			points = append(points, r)
		case r.Kind == KindSend && (r.Mode == "sequential" || r.Mode == "batched"):
			refs = append(refs, r)
		}
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n",
		chartWidth, chartHeight, chartWidth, chartHeight)
	fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="white"/>`+"\n", chartWidth, chartHeight)
	text(&b, chartWidth/2, 22, "middle", 13, title)
	slices.SortFunc(points, func(a, b Result) int { return a.Param - b.Param })
	if len(points) == 0 {
		text(&b, chartWidth/2, chartHeight/2, "middle", 12, "no pipelined results to plot")
		b.WriteString("</svg>\n")
		_, err := w.Write(b.Bytes())
		return err
	}

	// x: log2(window) over [floor(log2 min), ceil(log2 max)], at least one unit wide.
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, p := range points {
		l := math.Log2(float64(p.Param))
		lo, hi = math.Min(lo, l), math.Max(hi, l)
	}
	lo, hi = math.Floor(lo), math.Ceil(hi)
	if hi == lo {
		hi = lo + 1
	}
	// y: 0 .. a rounded maximum covering points and reference lines.
	yMax := 0.0
	for _, r := range append(points[:len(points):len(points)], refs...) {
		yMax = math.Max(yMax, r.Throughput())
	}
	yStep := niceStep(yMax / 5)
	yTop := math.Max(yStep, math.Ceil(yMax/yStep)*yStep)

	plotW := float64(chartWidth - marginLeft - marginRight)
	plotH := float64(chartHeight - marginTop - marginBot)
	x := func(window int) float64 {
		return marginLeft + (math.Log2(float64(window))-lo)/(hi-lo)*plotW
	}
	y := func(v float64) float64 { return marginTop + plotH - v/yTop*plotH }

	// Axes.
	x0, y0 := float64(marginLeft), float64(chartHeight-marginBot)
	fmt.Fprintf(&b, `<g stroke="black" stroke-width="1"><line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f"/><line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f"/></g>`+"\n",
		x0, y0, x0+plotW, y0, x0, y0, x0, float64(marginTop))
	// X ticks at every power of two.
	for e := lo; e <= hi; e++ {
		win := int(math.Exp2(e))
		px := x(win)
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="black"/>`+"\n", px, y0, px, y0+5)
		text(&b, px, y0+18, "middle", 11, fmt.Sprint(win))
	}
	text(&b, x0+plotW/2, chartHeight-10, "middle", 12, "window (messages in flight, log2 scale)")
	// Y ticks and grid.
	for v := 0.0; v <= yTop+yStep/2; v += yStep {
		py := y(v)
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#ddd"/>`+"\n", x0, py, x0+plotW, py)
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="black"/>`+"\n", x0-5, py, x0, py)
		text(&b, x0-8, py+4, "end", 11, fmt.Sprintf("%.0f", v))
	}
	fmt.Fprintf(&b, `<text x="16" y="%.1f" text-anchor="middle" font-size="12" transform="rotate(-90 16 %.1f)">msgs/s</text>`+"\n",
		marginTop+plotH/2, marginTop+plotH/2)

	// Reference lines.
	for i, r := range refs {
		py := y(r.Throughput())
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#888" stroke-dasharray="6 4"/>`+"\n", x0, py, x0+plotW, py)
		text(&b, x0+plotW-4, py-4-float64(i%2)*12, "end", 11, fmt.Sprintf("%s %.0f msgs/s", r.Name(), r.Throughput()))
	}

	// The series.
	var pts strings.Builder
	for i, p := range points {
		if i > 0 {
			pts.WriteByte(' ')
		}
		fmt.Fprintf(&pts, "%.1f,%.1f", x(p.Param), y(p.Throughput()))
	}
	fmt.Fprintf(&b, `<polyline fill="none" stroke="#1f6feb" stroke-width="2" points="%s"/>`+"\n", pts.String())
	for _, p := range points {
		fmt.Fprintf(&b, `<circle cx="%.1f" cy="%.1f" r="4" fill="#1f6feb"><title>`, x(p.Param), y(p.Throughput()))
		_ = xml.EscapeText(&b, []byte(fmt.Sprintf("%s: %.0f msgs/s", p.Name(), p.Throughput())))
		b.WriteString("</title></circle>\n")
		text(&b, x(p.Param), y(p.Throughput())-8, "middle", 10, fmt.Sprintf("%.0f", p.Throughput()))
	}
	b.WriteString("</svg>\n")
	_, err := w.Write(b.Bytes())
	return err
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
