package deadletter

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"
)

// workers runs do for each value put, on at most max goroutines. A value goes straight
// to a goroutine waiting for one; when none waits, a new goroutine starts with it, below
// max; at max the value waits in the queue for the first goroutine done. Goroutines stay
// until close, so that a re-drive does not start a goroutine (nor grow a new stack) per
// message. Each goroutine passes do its own [deadline], whose contexts derive from ctx.
//
// put never blocks when at most cap(queue) values are waiting, which the caller
// guarantees (a re-drive puts only messages that hold a token of its window); put and
// close are safe for concurrent use, put must not be called after close.
type workers[T any] struct {
	ctx     context.Context
	timeout time.Duration
	do      func(dl *deadline, v T)
	handoff chan T // unbuffered: a send succeeds only if a goroutine waits right then
	queue   chan T
	max     int32
	n       atomic.Int32 // goroutines started
}

func newWorkers[T any](ctx context.Context, timeout time.Duration, max, queue int, do func(dl *deadline, v T)) *workers[T] {
	return &workers[T]{ctx: ctx, timeout: timeout, do: do, handoff: make(chan T), queue: make(chan T, queue), max: int32(max)}
}

func (w *workers[T]) put(v T) {
	select {
	case w.handoff <- v:
		return
	default:
	}
	for {
		n := w.n.Load()
		if n >= w.max {
			w.queue <- v
			return
		}
		if w.n.CompareAndSwap(n, n+1) {
			go w.loop(v)
			return
		}
	}
}

func (w *workers[T]) loop(v T) {
	dl := &deadline{parent: w.ctx, d: w.timeout}
	defer dl.close()
	for {
		w.do(dl, v)
		select {
		case v = <-w.handoff:
		case next, ok := <-w.queue:
			if !ok {
				return
			}
			v = next
		}
	}
}

// close ends the goroutines once the values put are done.
func (w *workers[T]) close() { close(w.queue) }

// deadline gives the calls one goroutine makes, one after another, a context that ends
// d after the call began, with one context and one timer for all of them where
// context.WithTimeout makes both for each call. Not safe for concurrent use.
type deadline struct {
	parent context.Context
	d      time.Duration
	ctx    context.Context // nil when the last call's timer fired
	cancel context.CancelCauseFunc
	timer  *time.Timer
}

// errDeadline is the cause of a deadline's context that ended by its timer.
var errDeadline = fmt.Errorf("deadletter: settlement timed out: %w", context.DeadlineExceeded)

// begin returns the context of a call, which ends d from now or when parent ends.
func (dl *deadline) begin() context.Context {
	if dl.ctx == nil || dl.ctx.Err() != nil {
		ctx, cancel := context.WithCancelCause(dl.parent)
		dl.ctx, dl.cancel = ctx, cancel
		dl.timer = time.AfterFunc(dl.d, func() { cancel(errDeadline) })
		return ctx
	}
	dl.timer.Reset(dl.d)
	return dl.ctx
}

// end ends the call that returned err: it returns err, or one that wraps
// [context.DeadlineExceeded] when the call failed because its time ran out.
func (dl *deadline) end(err error) error {
	if !dl.timer.Stop() {
		// The timer fired, or is firing: the next call gets a new context.
		if err != nil && context.Cause(dl.ctx) == errDeadline {
			err = fmt.Errorf("%w (%w)", errDeadline, err)
		}
		dl.ctx = nil
	}
	return err
}

func (dl *deadline) close() {
	if dl.cancel != nil {
		dl.timer.Stop()
		dl.cancel(nil)
	}
}
