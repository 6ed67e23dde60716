package receiver

import "sync"

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
