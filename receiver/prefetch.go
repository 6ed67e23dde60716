package receiver

import (
	"context"
	"math"
	"sync"
	"sync/atomic"
	"time"
)

// Adaptive prefetch (Options.PrefetchCount zero, DisablePrefetch false).
//
// One ReceiveMessages call is in flight at a time, and it takes a receive round trip R;
// it asks for the places freed since the previous call began, and its messages arrive R
// later, all at once. For the handlers never to wait, the messages that arrive must
// last them until the next call's arrive, R later again: at a drain rate of μ messages
// per second, μ × R messages are on their way (asked for, not arrived) while μ × R wait
// in the buffer when a call returns, 2 × μ × R places beyond the handlers'. Fewer leave
// handlers idle for part of every round trip (1.5 × μ × R keeps them busy about 88% of
// the time at long round trips); more only lengthen the buffer (each extra message
// waits 1/μ longer and holds a lock for nothing). A message waits R/2 in the buffer on
// average, so its latency from receipt to settled is about the handler time plus one
// and a half round trips. μ is what the processor can drain: MaxConcurrency / H for a
// handler call of H, unless settlements are slower: then 90% of SettleConcurrency / S
// for a settlement call of S (see settleUtilization). R, H and S are moving averages of
// what the processor measured.
const (
	// prefetchGain is the receive round trips of drain the adaptive prefetch covers: one
	// on the way, one waiting (see above).
	prefetchGain = 2
	// ceilingFactor × MaxConcurrency bounds the adaptive prefetch, and the adaptive
	// prefetch together with the messages held or settling: room for 2 × μ × R and μ × S
	// settling up to round trips of about 20 handler calls (100 ms for 5 ms handlers).
	ceilingFactor = 64
	// settleUtilization is the share of the settle goroutines' capacity the prefetch
	// sizes for when they are the bottleneck: a server kept fully busy has a queue that
	// only grows, here settlements waiting for a goroutine while their messages' lock and
	// latency run on.
	settleUtilization = 0.9
	// ewmaWeight is the weight of a new sample in the moving averages (as TCP's SRTT).
	ewmaWeight = 0.125
)

// ewma is a moving average of durations, safe for concurrent use. Zero means no sample.
type ewma struct{ bits atomic.Uint64 } // float64 seconds

func (e *ewma) add(d time.Duration) {
	x := max(d.Seconds(), 1e-9)
	for {
		old := e.bits.Load()
		v := x
		if old != 0 {
			prev := math.Float64frombits(old)
			v = prev + ewmaWeight*(x-prev)
		}
		if e.bits.CompareAndSwap(old, math.Float64bits(v)) {
			return
		}
	}
}

// lower adds d only when it is below the average (or there is none): a sample known to
// overstate the quantity may still show that the average is too high.
func (e *ewma) lower(d time.Duration) {
	if cur := e.seconds(); cur == 0 || d.Seconds() < cur {
		e.add(d)
	}
}

func (e *ewma) seconds() float64 { return math.Float64frombits(e.bits.Load()) }

// estimates are the moving averages the adaptive prefetch is computed from. A
// SessionProcessor shares one across its sessions (same handler, same entity), so a
// newly accepted session starts from what earlier ones measured.
type estimates struct {
	receive ewma // a ReceiveMessages call that returned messages
	handler ewma // a handler call
	settle  ewma // a successful settlement, retries included
}

// observeReceive records a receive call that got got messages in took, as its window
// saw it (see receiveWindow): the duration of a call that issued credit and got every
// message it asked for is a receive round trip; one that got fewer may have waited for
// messages to be enqueued, so only when it started with no credits open (its first
// message was sent for its own credit) does its duration lower the average. Other calls
// may have collected messages already on their way, and say nothing.
func (e *estimates) observeReceive(w windowResult, got int, took time.Duration) {
	switch {
	case got <= 0:
	case w.roundTrip:
		e.receive.add(took)
	case w.left > 0 && w.clean:
		e.receive.lower(took)
	}
}

// drain returns μ × R: the messages concurrency handlers and at most settlers
// settlements in flight drain during one receive round trip (see above); false until
// the receive round trip and the handler time have been measured.
func (e *estimates) drain(concurrency, settlers int) (float64, bool) {
	r := e.receive.seconds()
	rate, ok := e.rate(concurrency, settlers)
	if r == 0 || !ok {
		return 0, false
	}
	return rate * r, true
}

// rate returns μ, the messages per second concurrency handlers and at most settlers
// settlements in flight drain (see above); false until the handler time has been
// measured.
func (e *estimates) rate(concurrency, settlers int) (float64, bool) {
	h := e.handler.seconds()
	if h == 0 {
		return 0, false
	}
	rate := float64(concurrency) / h
	if s := e.settle.seconds(); s > 0 && settlers > 0 {
		rate = min(rate, settleUtilization*float64(settlers)/s)
	}
	return rate, true
}

// prefetch returns the adaptive prefetch for concurrency handlers and at most settlers
// settlements in flight: round(2 × μ × R) within [0, ceiling] (see above); initial
// until the receive round trip and the handler time have been measured.
func (e *estimates) prefetch(concurrency, settlers, initial, ceiling int) int {
	d, ok := e.drain(concurrency, settlers)
	if !ok {
		return initial
	}
	p := math.Round(prefetchGain * d)
	if p >= float64(ceiling) {
		return ceiling
	}
	return max(0, int(p))
}

// places counts the messages a run holds or has asked for (requested by the receive
// call in flight, received and waiting, handled, held by AbandonDelay, or settling)
// against a limit that may change between calls. Its methods are safe for concurrent
// use: each receive loop (one per receiver, see Options.MoreReceivers) calls acquire,
// and release and wake are called from any goroutine.
type places struct {
	mu    sync.Mutex
	used  int
	freed chan struct{} // signalled after a release
}

func newPlaces() *places { return &places{freed: make(chan struct{}, 1)} }

// acquire takes every free place up to maxBatch and returns how many it took. With wait,
// it first waits until fewer than limit() places are used (limit is read again after
// every release and wake); without, it may take none. A release signals one waiting
// caller, so one that leaves places free signals again. False when ctx ends first.
func (p *places) acquire(ctx context.Context, limit func() int, maxBatch int, wait bool) (int, bool) {
	for {
		if ctx.Err() != nil { // stopped while a place was freed: take none
			return 0, false
		}
		p.mu.Lock()
		lim := limit()
		free := min(lim-p.used, maxBatch)
		if free > 0 || !wait {
			n := max(0, free)
			p.used += n
			left := lim - p.used
			p.mu.Unlock()
			if n > 0 && left > 0 {
				p.wake() // pass the signal on: another loop may be waiting
			}
			return n, true
		}
		p.mu.Unlock()
		select {
		case <-p.freed:
		case <-ctx.Done():
			return 0, false
		}
	}
}

// release gives back n places.
func (p *places) release(n int) {
	if n <= 0 {
		return
	}
	p.mu.Lock()
	p.used -= n
	p.mu.Unlock()
	p.wake()
}

// wake makes a waiting acquire read the limit again.
func (p *places) wake() {
	select {
	case p.freed <- struct{}{}:
	default:
	}
}
