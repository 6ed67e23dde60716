package receiver

import "sync/atomic"

// Stats are a Processor's counters since New, and gauges of the current Run.
//
// In peek-lock mode every received message ends in exactly one of Completed (which
// includes Skipped), Redelivered, Abandoned, DeadLettered, Deferred, LocksLost or
// LeftLocked: once Run has returned, Received == Completed + Redelivered + Abandoned +
// DeadLettered + Deferred + LocksLost + LeftLocked. In ReceiveAndDelete mode, Received == Handled + Dropped. Counters are
// totals since New; gauges (InFlight, Buffered, Held, Settling) are of the current Run.
type Stats struct {
	Received     int64 // messages received
	Handled      int64 // handler calls that returned (panics included)
	Completed    int64 // messages completed, Skipped included
	Skipped      int64 // messages completed because the handler returned sbkit.Skip
	Abandoned    int64 // messages abandoned (handler error, shutdown, unsettled)
	DeadLettered int64 // messages dead-lettered
	Deferred     int64 // messages deferred
	LocksLost    int64 // messages whose lock was lost or whose settlement failed
	LeftLocked   int64 // messages a shutdown deadline left locked at the broker (their locks expire)
	Dropped      int64 // ReceiveAndDelete messages a shutdown left unhandled
	// Redelivered counts messages completed after a copy of them was scheduled
	// ([Options.Redelivery]): the copy carries their work on.
	Redelivered int64
	// Scheduled counts the copies the broker accepted; above Redelivered when a
	// completion failed after its copy was scheduled (see [RedeliveryOptions]).
	Scheduled int64
	// Exhausted counts messages the redelivery policy dead-lettered (its redeliveries
	// spent, or expiring before the next); DeadLettered includes them.
	Exhausted int64
	// ScheduleErrors counts failed attempts to schedule a copy (retried or not).
	ScheduleErrors int64
	// BreakerState is a gauge: the circuit breaker's [BreakerState] now (0, closed,
	// without [Options.Breaker]).
	BreakerState int64
	// BreakerOpened, BreakerHalfOpened and BreakerClosed count the circuit breaker's
	// changes to each state.
	BreakerOpened, BreakerHalfOpened, BreakerClosed int64

	HandlerErrors int64 // handler results that were plain errors (panics included)
	Panics        int64 // handler panics recovered
	ReceiveErrors int64 // failed ReceiveMessages calls
	SettleErrors  int64 // failed settlement attempts (retried or not)
	RenewErrors   int64 // failed renewal attempts
	Renewed       int64 // successful lock renewals

	// CutReceives counts the ReceiveMessages calls whose window (TimeAfterFirstMessage:
	// 1 ms in peek-lock mode until the broker is backed up) ended while the messages they
	// asked for were still arriving: the broker had locked those they got at about the
	// same moment. The next call gets the rest, and the window grows to cover such a
	// batch.
	CutReceives int64
	// CreditsLeft sums, over the ReceiveMessages calls, the messages each asked for and
	// returned without. Their credits stay open on the link: the next call gets what
	// arrives for them while it runs, and azservicebus releases what arrives between two
	// calls (receiver.go, newReleaserFunc), which comes back to the queue without a
	// delivery counted (AMQP 1.0 part 3.4.4) and makes the next call wait a round trip
	// for the release's answer. The processor does not see a release:
	// CreditsLeft bounds them, loosely (a credit left open by several calls in a row
	// counts at each; one that no message came for, at a queue with fewer messages
	// than asked for, releases nothing).
	CreditsLeft int64

	InFlight int64 // gauge: handlers running now
	Buffered int64 // gauge: received messages waiting for a handler now
	Held     int64 // gauge: failed messages held locked before abandoning (AbandonDelay)
	// Settling is a gauge: messages whose settlement is under way now (retries
	// included). Each keeps its place until its settlement is over, as a running,
	// buffered or held message does: together they stay within the processor's bound
	// (MaxConcurrency + PrefetchCount; with the adaptive prefetch, at most 65 ×
	// MaxConcurrency).
	Settling int64
	// Prefetch is a gauge: how many received messages may wait for a handler now, the
	// adaptive prefetch's current size or PrefetchCount (0 with DisablePrefetch, and
	// when no Run is active). Buffered stays at or below it, except for a moment when it
	// shrinks.
	Prefetch int64
	// PeakBuffered is the most messages seen waiting for a handler at once (Buffered
	// right after a receive call) since New.
	PeakBuffered int64
}

type counters struct {
	received, handled, completed, skipped, abandoned, deadLettered, deferred, locksLost, leftLocked, dropped atomic.Int64
	handlerErrors, panics, receiveErrors, settleErrors, renewErrors, renewed                                 atomic.Int64
	inFlight, peakBuffered                                                                                   atomic.Int64
	redelivered, scheduled, exhausted, scheduleErrors                                                        atomic.Int64
	cutReceives, creditsLeft                                                                                 atomic.Int64
}

// windowed records what a receive call showed of its window.
func (c *counters) windowed(w windowResult) {
	if w.cut {
		c.cutReceives.Add(1)
	}
	if w.left > 0 {
		c.creditsLeft.Add(int64(w.left))
	}
}

// buffered records that n messages are waiting for a handler.
func (c *counters) buffered(n int) {
	for {
		peak := c.peakBuffered.Load()
		if int64(n) <= peak || c.peakBuffered.CompareAndSwap(peak, int64(n)) {
			return
		}
	}
}

// Stats returns the processor's counters. It is safe to call at any time.
func (p *Processor) Stats() Stats {
	c := &p.counters
	s := Stats{
		Received:       c.received.Load(),
		Handled:        c.handled.Load(),
		Completed:      c.completed.Load(),
		Skipped:        c.skipped.Load(),
		Abandoned:      c.abandoned.Load(),
		DeadLettered:   c.deadLettered.Load(),
		Deferred:       c.deferred.Load(),
		LocksLost:      c.locksLost.Load(),
		LeftLocked:     c.leftLocked.Load(),
		Dropped:        c.dropped.Load(),
		Redelivered:    c.redelivered.Load(),
		Scheduled:      c.scheduled.Load(),
		Exhausted:      c.exhausted.Load(),
		ScheduleErrors: c.scheduleErrors.Load(),
		HandlerErrors:  c.handlerErrors.Load(),
		Panics:         c.panics.Load(),
		ReceiveErrors:  c.receiveErrors.Load(),
		SettleErrors:   c.settleErrors.Load(),
		RenewErrors:    c.renewErrors.Load(),
		Renewed:        c.renewed.Load(),
		CutReceives:    c.cutReceives.Load(),
		CreditsLeft:    c.creditsLeft.Load(),
		InFlight:       c.inFlight.Load(),
		PeakBuffered:   c.peakBuffered.Load(),
	}
	if p.ownsBreaker {
		p.breaker.stats(&s)
	}
	if r := p.runs.current(); r != nil {
		s.Buffered = int64(len(r.buf))
		s.Held = int64(r.heldCount())
		s.Settling = r.settling.Load()
		s.Prefetch = int64(r.prefetch())
	}
	return s
}
