package chart

import (
	"bytes"
	"encoding/xml"
	"strings"
	"testing"
)

// TestWriteSVG: the document is well-formed XML with a line and a legend entry per
// series, a tooltip per point, and its text escaped.
func TestWriteSVG(t *testing.T) {
	var b bytes.Buffer
	err := WriteSVG(&b, "latency <at> a fixed load", []Panel{{
		Title: "p50", XLabel: "offered msgs/s", YLabel: "ms",
		Series: []Series{
			{Name: "default", Points: []Point{{100, 16, "a"}, {640, 18, "b"}, {3200, 19, "c"}}},
			{Name: "DisablePrefetch & co", Points: []Point{{100, 17, "d"}, {640, 20, "e"}}},
		},
	}, {Title: "p99", XLabel: "offered msgs/s", YLabel: "ms"}})
	if err != nil {
		t.Fatal(err)
	}
	doc := b.String()
	dec := xml.NewDecoder(strings.NewReader(doc))
	counts := map[string]int{}
	for {
		tok, err := dec.Token()
		if err != nil {
			break
		}
		if se, ok := tok.(xml.StartElement); ok {
			counts[se.Name.Local]++
		}
	}
	if counts["svg"] != 1 || counts["polyline"] != 2 || counts["circle"] != 5 {
		t.Fatalf("elements %v, want 1 svg, 2 polylines, 5 circles", counts)
	}
	for _, want := range []string{"latency &lt;at&gt; a fixed load", "DisablePrefetch &amp; co", "<title>e</title>"} {
		if !strings.Contains(doc, want) {
			t.Errorf("document lacks %q", want)
		}
	}
}

func TestNiceStep(t *testing.T) {
	for raw, want := range map[float64]float64{0.5: 1, 3: 5, 7: 10, 15: 20, 1200: 2000} {
		if got := niceStep(raw); got != want {
			t.Errorf("niceStep(%v) = %v, want %v", raw, got, want)
		}
	}
}
