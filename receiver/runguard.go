package receiver

import (
	"context"
	"sync"
	"time"
)

// runGuard is the Run/Close bookkeeping of Processor and SessionProcessor: one Run at a
// time, none after Close. The zero value is ready; it is safe for concurrent use.
type runGuard[R any] struct {
	mu     sync.Mutex
	cur    *R
	closed bool
}

// start makes the next run with newRun and records it as the current one. It returns
// ErrClosed after close, ErrRunning while another run is current, or newRun's error.
func (g *runGuard[R]) start(newRun func() (*R, error)) (*R, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	switch {
	case g.closed:
		return nil, ErrClosed
	case g.cur != nil:
		return nil, ErrRunning
	}
	r, err := newRun()
	if err != nil {
		return nil, err
	}
	g.cur = r
	return r, nil
}

// end records that the current run returned.
func (g *runGuard[R]) end() {
	g.mu.Lock()
	g.cur = nil
	g.mu.Unlock()
}

// close forbids further runs and returns the current one, or nil.
func (g *runGuard[R]) close() *R {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.closed = true
	return g.cur
}

// current returns the current run, or nil.
func (g *runGuard[R]) current() *R {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.cur
}

// closeSlack is how long Close waits for Run after Close's context ended: long enough for
// the settlements given up at that moment to be counted. A handler that ignores its
// cancelled context (or waits in Close itself, called with another context) keeps Run
// going longer; Close does not wait for it.
const closeSlack = 100 * time.Millisecond

// awaitRun waits until done is closed, or until closeSlack after ctx ended, and reports
// whether done was closed (Run returned).
func awaitRun(ctx context.Context, done <-chan struct{}) bool {
	select {
	case <-done:
		return true
	case <-ctx.Done():
	}
	t := time.NewTimer(closeSlack)
	defer t.Stop()
	select {
	case <-done:
		return true
	case <-t.C:
		return false
	}
}
