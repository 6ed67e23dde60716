// Package chart draws line charts as standalone SVG documents for the benchmarks that
// chart what they measure (BenchmarkWireOpenLoop's -openloop.svg): panels one above the
// other, each with linear axes from zero, a line and a legend entry per series, and a
// tooltip on every point. All text is XML-escaped.
package chart

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"io"
	"math"
	"strings"
)

// Geometry, in SVG user units.
const (
	width       = 640
	titleHeight = 30
	panelHeight = 340
	marginLeft  = 70
	marginRight = 20
	marginTop   = 40
	marginBot   = 50
)

// palette colours the series of a panel, in order.
var palette = []string{"#1f6feb", "#d1242f", "#1a7f37", "#9a6700", "#8250df", "#bf3989"}

// Point is one value of a series, with its tooltip.
type Point struct {
	X, Y float64
	Tip  string
}

// Series is one line, its points in ascending X.
type Series struct {
	Name   string
	Points []Point
}

// Panel is one chart.
type Panel struct {
	Title, XLabel, YLabel string
	Series                []Series
}

// WriteSVG writes panels, one above the other under title, to w.
func WriteSVG(w io.Writer, title string, panels []Panel) error {
	height := titleHeight + panelHeight*max(1, len(panels))
	var b bytes.Buffer
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n",
		width, height, width, height)
	fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="white"/>`+"\n", width, height)
	text(&b, width/2, 20, "middle", 13, title)
	for i, p := range panels {
		p.draw(&b, float64(titleHeight+i*panelHeight))
	}
	b.WriteString("</svg>\n")
	_, err := w.Write(b.Bytes())
	return err
}

// draw writes p with its top edge at top.
func (p Panel) draw(b *bytes.Buffer, top float64) {
	text(b, width/2, top+24, "middle", 12, p.Title)
	var xMax, yMax float64
	for _, s := range p.Series {
		for _, pt := range s.Points {
			xMax, yMax = math.Max(xMax, pt.X), math.Max(yMax, pt.Y)
		}
	}
	xStep, yStep := niceStep(xMax/6), niceStep(yMax/5)
	xTop := math.Max(xStep, math.Ceil(xMax/xStep)*xStep)
	yTop := math.Max(yStep, math.Ceil(yMax/yStep)*yStep)
	plotW := float64(width - marginLeft - marginRight)
	plotH := float64(panelHeight - marginTop - marginBot)
	x0, y0 := float64(marginLeft), top+float64(panelHeight-marginBot)
	x := func(v float64) float64 { return x0 + v/xTop*plotW }
	y := func(v float64) float64 { return y0 - v/yTop*plotH }

	fmt.Fprintf(b, `<g stroke="black" stroke-width="1"><line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f"/><line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f"/></g>`+"\n",
		x0, y0, x0+plotW, y0, x0, y0, x0, y0-plotH)
	for v := 0.0; v <= xTop+xStep/2; v += xStep {
		fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="black"/>`+"\n", x(v), y0, x(v), y0+5)
		text(b, x(v), y0+18, "middle", 11, fmt.Sprintf("%.0f", v))
	}
	text(b, x0+plotW/2, y0+40, "middle", 12, p.XLabel)
	for v := 0.0; v <= yTop+yStep/2; v += yStep {
		fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#ddd"/>`+"\n", x0, y(v), x0+plotW, y(v))
		text(b, x0-8, y(v)+4, "end", 11, fmt.Sprintf("%.0f", v))
	}
	mid := y0 - plotH/2
	fmt.Fprintf(b, `<text x="16" y="%.1f" text-anchor="middle" font-size="12" transform="rotate(-90 16 %.1f)">`, mid, mid)
	_ = xml.EscapeText(b, []byte(p.YLabel))
	b.WriteString("</text>\n")
	for i, s := range p.Series {
		color := palette[i%len(palette)]
		var pts strings.Builder
		for j, pt := range s.Points {
			if j > 0 {
				pts.WriteByte(' ')
			}
			fmt.Fprintf(&pts, "%.1f,%.1f", x(pt.X), y(pt.Y))
		}
		fmt.Fprintf(b, `<polyline fill="none" stroke="%s" stroke-width="2" points="%s"/>`+"\n", color, pts.String())
		for _, pt := range s.Points {
			fmt.Fprintf(b, `<circle cx="%.1f" cy="%.1f" r="4" fill="%s"><title>`, x(pt.X), y(pt.Y), color)
			_ = xml.EscapeText(b, []byte(pt.Tip))
			b.WriteString("</title></circle>\n")
		}
		ly := top + float64(marginTop) + 4 + float64(i)*14
		fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-width="2"/>`+"\n", x0+10, ly-4, x0+28, ly-4, color)
		text(b, x0+32, ly, "start", 11, s.Name)
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
	for _, m := range []float64{1, 2, 5} {
		if m*mag >= raw {
			return m * mag
		}
	}
	return 10 * mag
}
