package receiver

import (
	"sync"
	"time"
)

// The gate of Options.MoreReceivers: the loop of a further receiver asks for places
// only while it helps, that is while the receive round trip is long and the handlers
// are kept busy. Below saturation a message goes at once to a link with credit open, so
// a further link brings nothing; and there the calls leave credits open and say nothing
// of the round trip (see observeReceive), so its estimate stays what it was under load,
// and only the rate of receipt tells that the load has gone. The gate opens and closes
// at different levels: at 50 ms the round trip of 32 handlers of 5 ms is 8 to 10 of
// their calls, and a gate that closes where it opens closed about one call in ten,
// each time for the finishing of the link's credits and a poll.

// The receive round trip, in handler calls, from which the processor receives through
// MoreReceivers too (and below which it stops): below 8 a second link brought 32
// handlers of 5 ms no steady gain on the wire at 20 ms, a round trip of about 4 (83,
// 74, 66% of what they can do against 74, 74, 70%), and lengthened the median by 2 to
// 17 ms (docs/benchmarks.md); at 50 and 100 ms it brought 1 to 16 points.
const (
	moreReceiversFrom = 8
	moreReceiversTo   = 6
)

// The share of what the handlers can drain (μ, see estimates.rate) that the run must
// receive for MoreReceivers to be used (and below which they stop): one receiver kept
// 32 handlers of 5 ms 61 to 80% busy at 50 and 100 ms, while a load that lets them idle
// more than half the time is one a single link keeps up with.
const (
	moreReceiversLoad   = 0.5
	moreReceiversUnload = 1.0 / 3
)

// idleLinkPoll is how often the loop of one of MoreReceivers, idle while the gate is
// closed, looks at it again.
const idleLinkPoll = 100 * time.Millisecond

// intakePeriod is the period over which intake counts the messages received; intake
// averages the rates of successive periods with intakeWeight, so that the batches of a
// long round trip do not make the rate swing much, and a fall of the load from all
// the handlers can drain to a quarter of it closes the gate within a second.
const (
	intakePeriod = 250 * time.Millisecond
	intakeWeight = 0.5
)

// moreReceiversOn reports whether the loops of MoreReceivers may ask for places. The gate
// opens when both the receive round trip is at least moreReceiversFrom handler calls and
// the run receives at least moreReceiversLoad of what its handlers can drain (or that
// rate is not measured yet), and closes when the round trip falls below
// moreReceiversTo handler calls or the rate below moreReceiversUnload; false until the
// round trip and the handler time are measured.
func (r *run) moreReceiversOn() bool {
	rt, h := r.p.est.receive.seconds(), r.p.est.handler.seconds()
	mu, ok := r.p.est.rate(r.cfg.MaxConcurrency, r.cfg.SettleConcurrency)
	if h == 0 || !ok {
		return false
	}
	calls, load := float64(moreReceiversFrom), moreReceiversLoad
	if r.moreOn.Load() {
		calls, load = moreReceiversTo, moreReceiversUnload
	}
	rate, measured := r.intake.perSecond()
	on := rt >= calls*h && (!measured || rate >= load*mu)
	r.moreOn.Store(on)
	return on
}

// intake measures the rate at which a run's receive loops receive messages: a moving
// average of the rates of periods of at least intakePeriod. A period ends only when a
// call returns, so with no messages at all the rate stays what it was (the calls wait).
// Safe for concurrent use.
type intake struct {
	mu       sync.Mutex
	since    time.Time // the start of the period under way
	count    int       // the messages received in it
	rate     float64   // messages per second
	measured bool      // a period has ended
}

// add records n messages received at now.
func (in *intake) add(n int, now time.Time) {
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.since.IsZero() {
		in.since = now
	}
	in.count += n
	took := now.Sub(in.since)
	if took < intakePeriod {
		return
	}
	rate := float64(in.count) / took.Seconds()
	if in.measured {
		rate = in.rate + intakeWeight*(rate-in.rate)
	}
	in.rate, in.measured = rate, true
	in.since, in.count = now, 0
}

// perSecond returns the rate, and false until a period has ended.
func (in *intake) perSecond() (float64, bool) {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.rate, in.measured
}
