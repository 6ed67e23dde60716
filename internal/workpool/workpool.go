// Package workpool runs jobs on goroutines that start when a job finds none idle and end
// after lingering idle, at most a bound of them at once; jobs beyond the bound wait in a
// queue. It serves calls that block on a round trip (the SDK's settlements and lock
// renewals): as many run at once as are submitted, up to the bound, so that their number
// follows the load instead of a pool sized in advance, and no goroutine stays once the
// load is gone.
package workpool

import (
	"slices"
	"sync"
	"time"
)

// Linger is how long an idle goroutine waits for another job before it ends: under a
// steady load goroutines are reused, not started for every job.
const Linger = time.Second

// Pool runs jobs with run. Submit and Close may be called from any goroutine, Wait too.
type Pool[T any] struct {
	run func(T)
	max int

	mu      sync.Mutex
	queue   []T      // jobs waiting for a goroutine, oldest first
	idle    []chan T // goroutines waiting for a job, the most recently idle last
	running int      // goroutines started and not ended
	peak    int      // the most goroutines running at once
	closed  bool
	wg      sync.WaitGroup
}

// New returns a pool that runs each submitted job with run on at most limit goroutines
// (at least 1).
func New[T any](limit int, run func(T)) *Pool[T] {
	return &Pool[T]{run: run, max: max(1, limit)}
}

// Submit runs job on an idle goroutine, on a new one while fewer than the bound run, or
// queues it for the next goroutine that finishes. It never blocks. Submit must not be
// called after Close.
func (p *Pool[T]) Submit(job T) {
	p.mu.Lock()
	if n := len(p.idle); n > 0 {
		ch := p.idle[n-1]
		p.idle = p.idle[:n-1]
		p.mu.Unlock()
		ch <- job // buffered, and only the pool sends to it: never blocks
		return
	}
	if p.running < p.max {
		p.running++
		p.peak = max(p.peak, p.running)
		p.wg.Add(1)
		p.mu.Unlock()
		go p.work(job)
		return
	}
	p.queue = append(p.queue, job)
	p.mu.Unlock()
}

// Close ends the idle goroutines; the others end once the queue is empty. Call it after
// the last Submit.
func (p *Pool[T]) Close() {
	p.mu.Lock()
	p.closed = true
	idle := p.idle
	p.idle = nil
	p.running -= len(idle)
	p.mu.Unlock()
	for _, ch := range idle {
		close(ch)
	}
}

// Wait waits until every goroutine ended: after Close, until every job ran.
func (p *Pool[T]) Wait() { p.wg.Wait() }

// Peak returns the most goroutines that ran at once.
func (p *Pool[T]) Peak() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.peak
}

// work runs job, then queued jobs and jobs handed to it while idle, until it lingered
// idle for Linger or the pool is closed.
func (p *Pool[T]) work(job T) {
	defer p.wg.Done()
	handoff := make(chan T, 1)
	var timer *time.Timer
	for {
		p.run(job)
		p.mu.Lock()
		if len(p.queue) > 0 {
			job = p.queue[0]
			var zero T
			p.queue[0] = zero
			p.queue = p.queue[1:]
			if len(p.queue) == 0 {
				p.queue = nil // let the backing array go
			}
			p.mu.Unlock()
			continue
		}
		if p.closed {
			p.running--
			p.mu.Unlock()
			return
		}
		p.idle = append(p.idle, handoff)
		p.mu.Unlock()
		if timer == nil {
			timer = time.NewTimer(Linger)
		} else {
			timer.Reset(Linger)
		}
		var ok bool
		select {
		case job, ok = <-handoff:
			timer.Stop()
			if !ok {
				return // closed: Close counted it out
			}
			continue
		case <-timer.C:
		}
		p.mu.Lock()
		if i := slices.Index(p.idle, handoff); i >= 0 {
			p.idle = slices.Delete(p.idle, i, i+1)
			p.running--
			p.mu.Unlock()
			return
		}
		p.mu.Unlock()
		// Submit or Close took it from the idle list as the timer fired: a job or the
		// close is on its way.
		if job, ok = <-handoff; !ok {
			return
		}
	}
}
