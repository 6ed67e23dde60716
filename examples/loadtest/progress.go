package main

import (
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// isTerminal reports whether f is a character device (a terminal), without any
// dependency beyond the os package.
func isTerminal(f *os.File) bool {
	if f == nil {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// Progress redraws one status line ("\r...") on a terminal while a mode runs. A nil
// *Progress or one made with a nil writer draws nothing, so callers need no conditionals.
// Done may be called from many goroutines at once; Start and Stop from one.
type Progress struct {
	w        io.Writer
	interval time.Duration

	done   atomic.Int64
	label  string
	total  int
	start  time.Time
	stop   chan struct{}
	wg     sync.WaitGroup
	active bool
}

// NewProgress returns a Progress that redraws on w every interval, or one that draws
// nothing when w is nil.
func NewProgress(w io.Writer, interval time.Duration) *Progress {
	return &Progress{w: w, interval: interval}
}

// Start begins a new line for the mode label with total messages to go.
func (p *Progress) Start(label string, total int) {
	if p == nil || p.w == nil {
		return
	}
	p.Stop()
	p.label, p.total, p.start = label, total, time.Now()
	p.done.Store(0)
	p.stop = make(chan struct{})
	p.active = true
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		t := time.NewTicker(p.interval)
		defer t.Stop()
		for {
			select {
			case <-p.stop:
				return
			case <-t.C:
				p.draw()
			}
		}
	}()
}

// Add records n more finished messages.
func (p *Progress) Add(n int) {
	if p != nil {
		p.done.Add(int64(n))
	}
}

// Stop ends the current line, erasing it. It is safe to call when nothing was started.
func (p *Progress) Stop() {
	if p == nil || p.w == nil || !p.active {
		return
	}
	close(p.stop)
	p.wg.Wait()
	p.active = false
	fmt.Fprintf(p.w, "\r%-78s\r", "")
}

func (p *Progress) draw() {
	done := p.done.Load()
	elapsed := time.Since(p.start)
	rate := 0.0
	if s := elapsed.Seconds(); s > 0 {
		rate = float64(done) / s
	}
	fmt.Fprintf(p.w, "\r%-78s", fmt.Sprintf("%-18s %6d/%-6d %8.0f msgs/s  %6.1fs",
		p.label, done, p.total, rate, elapsed.Seconds()))
}
