package receiver

import "sync/atomic"

// Stats are a Processor's counters since New, and gauges of the current Run.
//
// In peek-lock mode every received message ends in exactly one of Completed (which
// includes Skipped), Abandoned, DeadLettered, Deferred or LockLost: once Run has returned,
// Received == Completed + Abandoned + DeadLettered + Deferred + LockLost. In
// ReceiveAndDelete mode, Received == Handled + Dropped.
type Stats struct {
	Received     int64 // messages received
	Handled      int64 // handler calls that returned (panics included)
	Completed    int64 // messages completed, Skipped included
	Skipped      int64 // messages completed because the handler returned sbkit.Skip
	Abandoned    int64 // messages abandoned (handler error, shutdown, unsettled)
	DeadLettered int64 // messages dead-lettered
	Deferred     int64 // messages deferred
	LockLost     int64 // messages whose lock was lost or whose settlement failed
	Dropped      int64 // ReceiveAndDelete messages a shutdown left unhandled

	HandlerErrors int64 // handler results that were plain errors (panics included)
	Panics        int64 // handler panics recovered
	ReceiveErrors int64 // failed ReceiveMessages calls
	SettleErrors  int64 // failed settlement attempts (retried or not)
	RenewErrors   int64 // failed renewal attempts
	Renewed       int64 // successful lock renewals

	InFlight int // gauge: handlers running now
	Buffered int // gauge: received messages waiting for a handler now
	Held     int // gauge: failed messages held locked before abandoning (AbandonDelay)
}

type counters struct {
	received, handled, completed, skipped, abandoned, deadLettered, deferred, lockLost, dropped atomic.Int64
	handlerErrors, panics, receiveErrors, settleErrors, renewErrors, renewed                    atomic.Int64
	inFlight                                                                                    atomic.Int64
}

// Stats returns the processor's counters. It is safe to call at any time.
func (p *Processor) Stats() Stats {
	c := &p.counters
	s := Stats{
		Received:      c.received.Load(),
		Handled:       c.handled.Load(),
		Completed:     c.completed.Load(),
		Skipped:       c.skipped.Load(),
		Abandoned:     c.abandoned.Load(),
		DeadLettered:  c.deadLettered.Load(),
		Deferred:      c.deferred.Load(),
		LockLost:      c.lockLost.Load(),
		Dropped:       c.dropped.Load(),
		HandlerErrors: c.handlerErrors.Load(),
		Panics:        c.panics.Load(),
		ReceiveErrors: c.receiveErrors.Load(),
		SettleErrors:  c.settleErrors.Load(),
		RenewErrors:   c.renewErrors.Load(),
		Renewed:       c.renewed.Load(),
		InFlight:      int(c.inFlight.Load()),
	}
	p.mu.Lock()
	r := p.cur
	p.mu.Unlock()
	if r != nil {
		s.Buffered = len(r.buf)
		s.Held = r.heldCount()
		if r.engine != nil {
			s.Renewed += r.engine.Stats().Renewed
		}
	}
	return s
}
