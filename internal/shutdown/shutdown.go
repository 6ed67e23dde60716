// Package shutdown arms the deadlines of a run's shutdown. A run is stopped by whatever
// comes first (its context's end, which gives it a grace; a Close, which gives it its
// own context) and may be stopped again while it shuts down (a Close after the context
// ended, a second Close). Every grace given counts and the earliest end wins: a later,
// shorter deadline shortens the shutdown, a later, longer one changes nothing.
//
// outbox/pgoutbox holds a byte-identical copy of this package in its own internal
// directory (a module never imports another module's internal packages). Edit the
// core's files (internal/shutdown) and copy them over; TestInternalCopies, in the core's
// root package, checks that the copies agree.
package shutdown

import (
	"context"
	"sync"
	"time"
)

// Options are the ends of a shutdown, each called at most once, on a goroutine of its
// own.
type Options struct {
	// Cut cancels the work still running: it is called Reserve before the earliest
	// deadline of the graces armed, or when one of them ends sooner (a grace without
	// deadline that ends cuts at once). Nil: no cut.
	Cut func()
	// Reserve is how long before a grace's deadline the cut comes, given the time left
	// until that deadline when the grace is armed; it leaves the cancelled work time to
	// wind down. Nil: none, the cut comes at the deadline.
	Reserve func(left time.Duration) time.Duration
	// Hard gives up what is still pending: it is called when the first of the graces
	// armed ends, or, when HardAfter is positive, HardAfter after the cut (Cut set, then).
	// Nil: none.
	Hard      func()
	HardAfter time.Duration
}

// Deadlines calls a shutdown's Cut and Hard (see [Options]) at the earliest ends of the
// graces armed, until Disarm. Its methods are safe for concurrent use.
type Deadlines struct {
	o Options

	mu       sync.Mutex
	over     bool     // Disarm was called: nothing more is armed or called
	cutDone  bool     // Cut was called
	hardDone bool     // Hard was called
	release  []func() // stops what Arm and the cut armed
}

// New returns the Deadlines of one shutdown. It arms nothing.
func New(o Options) *Deadlines { return &Deadlines{o: o} }

// Arm gives the shutdown grace: the cut and the hard end come by grace's end (see
// [Options]) unless an earlier grace brought them already. A grace that never ends
// ([context.Context.Done] returns nil) arms nothing; after Disarm, Arm arms nothing.
func (d *Deadlines) Arm(grace context.Context) {
	if grace.Done() == nil {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.over {
		return
	}
	if d.o.Cut != nil {
		cut, cancel := grace, context.CancelFunc(func() {})
		if deadline, ok := grace.Deadline(); ok && d.o.Reserve != nil {
			cut, cancel = context.WithDeadline(grace, deadline.Add(-d.o.Reserve(time.Until(deadline))))
		}
		stop := context.AfterFunc(cut, d.cut)
		d.release = append(d.release, func() { stop(); cancel() })
	}
	if d.o.Hard != nil && d.o.HardAfter <= 0 {
		stop := context.AfterFunc(grace, d.hard)
		d.release = append(d.release, func() { stop() })
	}
}

// Disarm releases the timers Arm and the cut armed, for good: the shutdown is over. No
// Cut or Hard starts after it returns; one that started before may still be running.
func (d *Deadlines) Disarm() {
	d.mu.Lock()
	d.over = true
	release := d.release
	d.release = nil
	d.mu.Unlock()
	for _, f := range release {
		f()
	}
}

func (d *Deadlines) cut() {
	d.mu.Lock()
	if d.over || d.cutDone {
		d.mu.Unlock()
		return
	}
	d.cutDone = true
	if d.o.Hard != nil && d.o.HardAfter > 0 {
		t := time.AfterFunc(d.o.HardAfter, d.hard)
		d.release = append(d.release, func() { t.Stop() })
	}
	d.mu.Unlock()
	d.o.Cut()
}

func (d *Deadlines) hard() {
	d.mu.Lock()
	if d.over || d.hardDone {
		d.mu.Unlock()
		return
	}
	d.hardDone = true
	d.mu.Unlock()
	d.o.Hard()
}

// Grace returns the grace of a shutdown given d (a ShutdownGrace option): a context that
// ends d from now, or never when d is negative (no limit). cancel releases its timer.
func Grace(d time.Duration) (grace context.Context, cancel context.CancelFunc) {
	if d < 0 {
		return context.Background(), func() {}
	}
	return context.WithTimeout(context.Background(), d)
}
