package receiver

import (
	"sync"
	"time"
)

// The gate of Options.MoreReceivers: the loop of a further receiver asks for places
// only while it helps, that is while the receive round trip is long and the handlers
// are kept at least half busy. Below saturation a message goes at once to a link with
// credit open, so a further link brings nothing; and there the calls leave credits
// open and say nothing of the round trip (see observeReceive), so its estimate stays
// what it was under load, and only the rate of receipt tells that the load has gone.

// moreReceiversFrom is the receive round trip, in handler calls, from which the
// processor receives through MoreReceivers too: below it a second link brought 32
// handlers of 5 ms no steady gain on the wire at 20 ms (83, 74, 66% of what they can do
// against 74, 74, 70%) and lengthened the median by 2 to 17 ms (docs/benchmarks.md); at
// 50 and 100 ms it brought 1 to 16 points.
const moreReceiversFrom = 8

// moreReceiversLoad is the share of what the handlers can drain (μ, see estimates.rate)
// that the run must receive for MoreReceivers to be used: one receiver kept 32
// handlers of 5 ms 61 to 80% busy at 50 and 100 ms, while a load that lets them idle
// half the time is one a single link keeps up with.
const moreReceiversLoad = 0.5

// idleLinkPoll is how often the loop of one of MoreReceivers, idle while the gate is
// closed, looks at it again.
const idleLinkPoll = 100 * time.Millisecond

// intakePeriod is the shortest period over which intake measures the rate of receipt.
const intakePeriod = 250 * time.Millisecond

// moreReceiversOn reports whether the loops of MoreReceivers may ask for places: while
// the receive round trip is long (longRoundTrip) and the run receives at least
// moreReceiversLoad of what its handlers can drain.
func (r *run) moreReceiversOn() bool {
	if !r.longRoundTrip() {
		return false
	}
	mu, ok := r.p.est.rate(r.cfg.MaxConcurrency, r.cfg.SettleConcurrency)
	return ok && r.intake.perSecond() >= moreReceiversLoad*mu
}

// longRoundTrip reports whether the measured receive round trip is at least
// moreReceiversFrom handler calls: false until both are measured.
func (r *run) longRoundTrip() bool {
	rt, h := r.p.est.receive.seconds(), r.p.est.handler.seconds()
	return h > 0 && rt >= moreReceiversFrom*h
}

// intake measures the rate at which a run's receive loops receive messages, over
// periods of at least intakePeriod. A period ends only when a call returns, so with no
// messages at all the rate stays what it was (the calls wait). Safe for concurrent use.
type intake struct {
	mu    sync.Mutex
	since time.Time // the start of the period under way
	count int       // the messages received in it
	rate  float64   // messages per second over the latest period; 0 until one ended
}

// add records n messages received at now.
func (in *intake) add(n int, now time.Time) {
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.since.IsZero() {
		in.since = now
	}
	in.count += n
	if took := now.Sub(in.since); took >= intakePeriod {
		in.rate = float64(in.count) / took.Seconds()
		in.since, in.count = now, 0
	}
}

// perSecond returns the rate of the latest period.
func (in *intake) perSecond() float64 {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.rate
}
