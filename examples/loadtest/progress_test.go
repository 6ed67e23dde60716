package main

import (
	"bytes"
	"os"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

func TestProgressRedrawsOneLine(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var b bytes.Buffer
		p := NewProgress(&b, 100*time.Millisecond)
		p.Start("pipelined w=4", 10)
		p.Add(3)
		p.Add(2)
		time.Sleep(150 * time.Millisecond)
		synctest.Wait()
		p.Stop()
		p.Stop() // twice is fine
		out := b.String()
		if !strings.HasPrefix(out, "\rpipelined w=4") || !strings.Contains(out, "5/10") {
			t.Errorf("progress line = %q", out)
		}
		if strings.Contains(out, "\n") {
			t.Errorf("progress wrote a newline: %q", out)
		}
		if !strings.HasSuffix(out, "\r") {
			t.Errorf("Stop did not return the cursor: %q", out)
		}
	})
}

// TestProgressQuiet: a nil *Progress, and one made with a nil writer, draw nothing and
// start no redraw goroutine, so that callers need no conditionals.
func TestProgressQuiet(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var p *Progress
		p.Start("x", 1) // nil: no panic
		p.Add(1)
		p.Stop()
		q := NewProgress(nil, time.Millisecond)
		q.Start("x", 1)
		q.Add(1)
		if q.active || q.stop != nil {
			t.Error("Start with a nil writer started its redraw goroutine")
		}
		// Ten intervals: a redraw would write to the nil writer and panic.
		time.Sleep(10 * time.Millisecond)
		synctest.Wait()
		q.Stop()
		if q.done.Load() != 1 {
			t.Errorf("Add recorded %d messages, want 1", q.done.Load())
		}
	})
}

func TestIsTerminal(t *testing.T) {
	f, err := os.CreateTemp(t.TempDir(), "out")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if isTerminal(f) {
		t.Error("a regular file is not a terminal")
	}
	if isTerminal(nil) {
		t.Error("nil is not a terminal")
	}
}
