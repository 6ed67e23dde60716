package sbtest

import (
	"context"
	"time"
)

// Counts is one consistent snapshot of the messages an entity holds, taken after what
// time made due was applied (lock and TTL expiry, scheduled messages becoming active).
// Every message of the main queue is in exactly one of Active, Locked, Deferred and
// Scheduled.
type Counts struct {
	// Active are the messages available for delivery now.
	Active int
	// Locked are the messages of the main queue locked by receivers, the locks of a
	// closed receiver included until they expire.
	Locked int
	// Deferred are the deferred messages not locked by a receiver. The administration
	// API's ActiveMessageCount is Active + Locked + Deferred, as the service counts them.
	Deferred int
	// Scheduled are the scheduled messages waiting for their enqueue time.
	Scheduled int
	// DeadLetter are the messages of the dead-letter queue, locked ones included.
	DeadLetter int
	// Size is the size of every message of the entity, its dead-letter queue's included,
	// in bytes ([sbkit.MessageSize] of each message as sent).
	Size int64
}

// Counts returns the entity's message counts.
func (e *Entity) Counts() Counts {
	e.ns.flushForwards()
	e.mu.Lock()
	defer e.mu.Unlock()
	e.tick(time.Now())
	return e.countsLocked()
}

// countsLocked returns the counts. Called with e.mu held, after tick.
func (e *Entity) countsLocked() Counts {
	c := Counts{
		Active:     e.availLen(),
		Locked:     len(e.main.byToken),
		Scheduled:  e.main.heaps[hSched].Len(),
		DeadLetter: len(e.dlq.bySeq),
		Size:       e.main.bytes + e.dlq.bytes,
	}
	c.Deferred = len(e.main.bySeq) - c.Active - c.Locked - c.Scheduled
	return c
}

// WaitUntil waits until cond holds for the entity's counts and returns them. cond is
// called with the entity locked, so it must be fast and must not call the entity; it is
// checked at once, after every change of the counts and whenever time makes one due (a
// lock or a time-to-live expiring, a scheduled message becoming active). When ctx ends
// first, WaitUntil returns the last counts and ctx.Err(). It holds no goroutine and
// waits on channels and timers only, so inside a testing/synctest bubble (the one the
// entity was created in) it takes no real time: a test can wait for a lock to expire.
//
// It replaces polling in tests: wait for what a test expects to happen, such as
// WaitUntil(ctx, func(c Counts) bool { return c.DeadLetter == 1 }).
func (e *Entity) WaitUntil(ctx context.Context, cond func(Counts) bool) (Counts, error) {
	var w waiter
	defer w.stop()
	for {
		e.ns.flushForwards()
		e.mu.Lock()
		now := time.Now()
		e.tick(now)
		c := e.countsLocked()
		if cond(c) {
			e.mu.Unlock()
			return c, nil
		}
		if e.watch == nil {
			e.watch = make(chan struct{})
		}
		wake := e.watch
		due, ok := e.nextDueLocked()
		e.mu.Unlock()
		if err := w.wait(ctx, wake, nil, now, due, ok); err != nil {
			return c, err
		}
	}
}

// WaitDrained waits until the entity has no message left to deliver or settle: none
// active, locked or scheduled (deferred and dead-lettered messages stay and do not
// count). Errors and synctest as for WaitUntil.
func (e *Entity) WaitDrained(ctx context.Context) error {
	_, err := e.WaitUntil(ctx, func(c Counts) bool { return c.Active == 0 && c.Locked == 0 && c.Scheduled == 0 })
	return err
}

// changed wakes the WaitUntil calls waiting for a change of the counts. Called with e.mu
// held by every operation that moves a message between states.
func (e *Entity) changed() {
	if e.watch != nil {
		close(e.watch)
		e.watch = nil
	}
}

// nextDueLocked returns the next instant at which time alone changes the counts: a lock
// expiring (a message's or a session's), a scheduled message becoming active, a message
// expiring. Called with e.mu held.
func (e *Entity) nextDueLocked() (time.Time, bool) {
	var due time.Time
	ok := false
	next := func(t time.Time, has bool) {
		if has && (!ok || t.Before(due)) {
			due, ok = t, true
		}
	}
	next(e.main.nextDue())
	next(e.dlq.nextDue())
	if m := e.main.heaps[hExp].top(); m != nil {
		next(m.expiresAt, true)
	}
	if e.sessions != nil {
		next(e.nextSessionLockDue())
	}
	return due, ok
}
