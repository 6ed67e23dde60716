package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/sbkit/sbkit/deadletter"
)

// isTerminal reports whether w is a terminal (a character device), where a progress
// line that rewrites itself makes sense; in a pipe, a file or a CI log it does not.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// progressLine is a deadletter.ProgressHook that rewrites one line on a terminal: how
// many messages moved, failed and were skipped, the rate, and, when the total is known,
// the ETA. It writes at most every 200ms, and nothing when w is not a terminal.
type progressLine struct {
	w     io.Writer
	verb  string
	total int64 // 0: unknown
	start time.Time
	mu    sync.Mutex
	last  time.Time
	wrote bool
}

func newProgress(w io.Writer, verb string, total int64) *progressLine {
	if !isTerminal(w) {
		return nil
	}
	return &progressLine{w: w, verb: verb, total: total, start: time.Now()}
}

// hooks returns the hooks to give an operation: none when there is no terminal.
func (p *progressLine) hooks() []deadletter.Hook {
	if p == nil {
		return nil
	}
	return []deadletter.Hook{p}
}

// OnProgress implements deadletter.ProgressHook.
func (p *progressLine) OnProgress(_ context.Context, s deadletter.Stats) {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := time.Now()
	if s.Stopped == "" && now.Sub(p.last) < 200*time.Millisecond {
		return
	}
	p.last = now
	p.wrote = true
	fmt.Fprint(p.w, "\r\033[K", progressText(p.verb, s, p.total, now.Sub(p.start)))
	if s.Stopped != "" {
		fmt.Fprintln(p.w)
	}
}

// progressText is the progress line: "redrive: 1200/5000 moved, 3 failed, 0 skipped,
// 950 msg/s, ETA 4s".
func progressText(verb string, s deadletter.Stats, total int64, elapsed time.Duration) string {
	rate := 0.0
	if elapsed > 0 {
		rate = float64(s.Seen) / elapsed.Seconds()
	}
	done := fmt.Sprint(s.Moved)
	eta := ""
	if total > 0 {
		done = fmt.Sprintf("%d/%d", s.Moved, total)
		if rate > 0 && s.Seen < total {
			eta = fmt.Sprintf(", ETA %s", time.Duration(float64(total-s.Seen)/rate*float64(time.Second)).Round(time.Second))
		}
	}
	return fmt.Sprintf("%s: %s moved, %d failed, %d skipped, %.0f msg/s%s", verb, done, s.Failed, s.Skipped, rate, eta)
}
