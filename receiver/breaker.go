package receiver

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

const (
	// DefaultBreakerWindow is [BreakerOptions.Window]'s default.
	DefaultBreakerWindow = 30 * time.Second
	// DefaultBreakerFailureRatio is [BreakerOptions.FailureRatio]'s default.
	DefaultBreakerFailureRatio = 0.5
	// DefaultBreakerMinimumCalls is [BreakerOptions.MinimumCalls]'s default.
	DefaultBreakerMinimumCalls = 10
	// DefaultBreakerOpenDuration is [BreakerOptions.OpenDuration]'s default.
	DefaultBreakerOpenDuration = 5 * time.Second
	// DefaultBreakerMaxOpenDuration is [BreakerOptions.MaxOpenDuration]'s default.
	DefaultBreakerMaxOpenDuration = time.Minute
	// DefaultBreakerProbes is [BreakerOptions.Probes]'s default.
	DefaultBreakerProbes = 1
)

// breakerBuckets is how many buckets the sliding window is counted in: the window slides
// by a tenth of itself.
const breakerBuckets = 10

// BreakerOptions configure a processor's circuit breaker, as MassTransit's kill switch
// and Wolverine's circuit breaker pause consumption: when, over the last Window, at
// least MinimumCalls handler calls ended and the share of them whose result
// IsDependencyDown reports reaches FailureRatio, the breaker opens. While it is open the
// processor receives nothing (a SessionProcessor accepts no session) and starts no
// handler; the messages it holds already (received and waiting for a handler) keep
// their places and their locks, which are renewed, so that they spend no delivery (an
// abandonment counts one, and so does a lock that expires; MaxAutoLockRenewalDuration
// still bounds the renewals). After OpenDuration the breaker is half-open: Probes
// messages are handled (the held ones first, else received), and it closes when they all
// succeed, or opens again, for twice as long as the last time (at most MaxOpenDuration),
// when one fails with the dependency down. Results of handlers that were running when it
// opened do not count. Every change is told to the [BreakerHook]s, in order, and counted
// in [Stats]. A shutdown ends every wait at once, whatever the state. The breaker keeps
// its state from one Run to the next, and runs no timer between them: an open period
// that ended meanwhile ends when the next Run starts.
type BreakerOptions struct {
	// IsDependencyDown classifies a handler's non-nil result: true when it failed
	// because the dependency the breaker protects is down. Required: only the caller
	// knows which errors say so. It must be fast and safe for concurrent use.
	IsDependencyDown func(err error) bool
	// Window is the sliding window the calls are counted over. Default
	// DefaultBreakerWindow (30 s).
	Window time.Duration
	// FailureRatio is the share of calls failing with the dependency down, in (0, 1],
	// that opens the breaker. Default DefaultBreakerFailureRatio (0.5).
	FailureRatio float64
	// MinimumCalls is how many calls the window must hold before the breaker may open.
	// Default DefaultBreakerMinimumCalls (10).
	MinimumCalls int
	// OpenDuration is how long the breaker stays open the first time. Default
	// DefaultBreakerOpenDuration (5 s).
	OpenDuration time.Duration
	// MaxOpenDuration caps the open period, which doubles each time a probe fails.
	// Default DefaultBreakerMaxOpenDuration (1 min).
	MaxOpenDuration time.Duration
	// Probes is how many messages a half-open breaker lets through; it closes when all of
	// them succeed. Default DefaultBreakerProbes (1).
	Probes int
	// AbandonHeld gives back the messages held when the breaker opens (abandoning them,
	// which counts a delivery each) instead of holding them locked until it closes.
	// Default false: holding spends no delivery (see docs/recoverability.md in the
	// repository for the measurement). In ReceiveAndDelete mode held messages always
	// wait: they cannot be given back.
	AbandonHeld bool
}

// BreakerState is a circuit breaker's state.
type BreakerState int64

const (
	// BreakerClosed: messages flow; calls are counted.
	BreakerClosed BreakerState = iota
	// BreakerOpen: nothing is received or handled.
	BreakerOpen
	// BreakerHalfOpen: a few probe messages are handled.
	BreakerHalfOpen
)

// String returns the state's name in lower case.
func (s BreakerState) String() string {
	switch s {
	case BreakerClosed:
		return "closed"
	case BreakerOpen:
		return "open"
	case BreakerHalfOpen:
		return "half-open"
	}
	return fmt.Sprintf("BreakerState(%d)", int64(s))
}

// BreakerHook observes every change of a circuit breaker's state.
type BreakerHook interface {
	OnBreakerChange(ctx context.Context, e BreakerChange)
}

// BreakerHookFunc adapts a function to a [BreakerHook].
type BreakerHookFunc func(ctx context.Context, e BreakerChange)

// OnBreakerChange calls f(ctx, e).
func (f BreakerHookFunc) OnBreakerChange(ctx context.Context, e BreakerChange) { f(ctx, e) }

// BreakerChange is one change of a circuit breaker's state.
type BreakerChange struct {
	// From and To are the states before and after.
	From, To BreakerState
	// Calls and Failures are the window's counts when the breaker opened from closed.
	Calls, Failures int
	// OpenFor is how long the breaker stays open, when To is BreakerOpen.
	OpenFor time.Duration
	// Err is the result that opened the breaker (the last failure counted, or the
	// failed probe), nil otherwise.
	Err error
}

func breakerConfig(o *BreakerOptions) (*BreakerOptions, error) {
	if o == nil {
		return nil, nil
	}
	c := *o
	switch {
	case c.IsDependencyDown == nil:
		return nil, fmt.Errorf("%w: Breaker without IsDependencyDown", ErrInvalidOptions)
	case c.Window < 0 || c.OpenDuration < 0 || c.MaxOpenDuration < 0 || c.MinimumCalls < 0 || c.Probes < 0:
		return nil, fmt.Errorf("%w: negative Breaker Window %v, OpenDuration %v, MaxOpenDuration %v, MinimumCalls %d or Probes %d",
			ErrInvalidOptions, c.Window, c.OpenDuration, c.MaxOpenDuration, c.MinimumCalls, c.Probes)
	case c.FailureRatio < 0 || c.FailureRatio > 1:
		return nil, fmt.Errorf("%w: Breaker FailureRatio %v outside (0, 1]", ErrInvalidOptions, c.FailureRatio)
	}
	if c.Window == 0 {
		c.Window = DefaultBreakerWindow
	}
	if c.FailureRatio == 0 {
		c.FailureRatio = DefaultBreakerFailureRatio
	}
	if c.MinimumCalls == 0 {
		c.MinimumCalls = DefaultBreakerMinimumCalls
	}
	if c.OpenDuration == 0 {
		c.OpenDuration = DefaultBreakerOpenDuration
	}
	if c.MaxOpenDuration == 0 {
		c.MaxOpenDuration = max(DefaultBreakerMaxOpenDuration, c.OpenDuration)
	}
	if c.MaxOpenDuration < c.OpenDuration {
		return nil, fmt.Errorf("%w: Breaker MaxOpenDuration %v below OpenDuration %v", ErrInvalidOptions, c.MaxOpenDuration, c.OpenDuration)
	}
	if c.Probes == 0 {
		c.Probes = DefaultBreakerProbes
	}
	return &c, nil
}

// breaker is a circuit breaker shared by a processor's runs (and by a SessionProcessor's
// sessions). Safe for concurrent use.
type breaker struct {
	o     *BreakerOptions
	hooks *hooks

	mu      sync.Mutex
	state   BreakerState
	change  chan struct{} // closed and replaced at every change
	openFor time.Duration // the next open period
	until   time.Time     // the end of the open period
	timer   *time.Timer   // ends the open period; nil while no Run is active
	timerWG sync.WaitGroup
	timerID uint64 // which timer is current: a stopped one that fired anyway changes nothing
	paused  bool   // no Run is active: the open period ends when the next one starts
	// pending are the changes the hooks have not heard of yet, in order; notifying is
	// true while a goroutine tells them (and the ones added meanwhile).
	pending   []BreakerChange
	notifying bool
	permits   int // probes not yet handed out (half-open)
	successes int // probes that succeeded (half-open)
	buckets   [breakerBuckets]struct {
		start           time.Time
		calls, failures int
	}

	gauge                      atomic.Int64 // state, read by Stats without mu
	opened, halfOpened, closed atomic.Int64
}

func newBreaker(o *BreakerOptions, h *hooks) *breaker {
	if o == nil {
		return nil
	}
	return &breaker{o: o, hooks: h, change: make(chan struct{}), openFor: o.OpenDuration, paused: true}
}

// setLocked moves b to state and returns the change to report (after unlocking).
func (b *breaker) setLocked(to BreakerState, e BreakerChange) BreakerChange {
	e.From, e.To = b.state, to
	b.state = to
	b.gauge.Store(int64(to))
	close(b.change)
	b.change = make(chan struct{})
	switch to {
	case BreakerOpen:
		b.opened.Add(1)
		e.OpenFor = b.openFor
		b.until = time.Now().Add(b.openFor)
		b.armLocked(b.openFor)
		b.openFor = min(2*b.openFor, b.o.MaxOpenDuration)
	case BreakerHalfOpen:
		b.halfOpened.Add(1)
		b.permits, b.successes = b.o.Probes, 0
	case BreakerClosed:
		b.closed.Add(1)
		b.openFor = b.o.OpenDuration
		b.buckets = [breakerBuckets]struct {
			start           time.Time
			calls, failures int
		}{}
	}
	return e
}

// armLocked starts the timer that ends the open period after d, unless no Run is active.
func (b *breaker) armLocked(d time.Duration) {
	b.timerStopLocked()
	if b.paused {
		return
	}
	b.timerWG.Add(1)
	b.timerID++
	id := b.timerID
	b.timer = time.AfterFunc(d, func() {
		defer b.timerWG.Done()
		b.halfOpen(id)
	})
}

func (b *breaker) timerStopLocked() {
	if b.timer != nil && b.timer.Stop() {
		b.timerWG.Done()
	}
	b.timer = nil
}

// pause stops the breaker's timer when a Run ends, and waits for a notice it is giving,
// so that nothing of the breaker runs once Run returned. The state stays.
func (b *breaker) pause() {
	if b == nil {
		return
	}
	b.mu.Lock()
	b.paused = true
	b.timerStopLocked()
	b.mu.Unlock()
	b.timerWG.Wait()
}

// resume starts the breaker's timer again when a Run starts: an open period that ended
// meanwhile ends at once.
func (b *breaker) resume() {
	if b == nil {
		return
	}
	b.mu.Lock()
	b.paused = false
	if b.state == BreakerOpen {
		b.armLocked(max(0, time.Until(b.until)))
	}
	b.mu.Unlock()
}

// notifyLocked tells the hooks of e after the changes before it, and unlocks mu. The
// goroutine that tells them of a change also tells them of those made meanwhile, so that
// they hear the changes in order and no goroutine waits for another's hook.
func (b *breaker) notifyLocked(e BreakerChange) {
	b.pending = append(b.pending, e)
	if b.notifying {
		b.mu.Unlock()
		return
	}
	b.notifying = true
	for len(b.pending) > 0 {
		next := b.pending[0]
		b.pending = b.pending[1:]
		b.mu.Unlock()
		b.hooks.onBreaker(context.Background(), next)
		b.mu.Lock()
	}
	b.notifying = false
	b.mu.Unlock()
}

// halfOpen ends the open period, when timer id is still the current one.
func (b *breaker) halfOpen(id uint64) {
	b.mu.Lock()
	if b.state != BreakerOpen || id != b.timerID {
		b.mu.Unlock()
		return
	}
	b.timer = nil
	b.notifyLocked(b.setLocked(BreakerHalfOpen, BreakerChange{}))
}

// admit waits until a handler may run: at once when closed, for a probe's permit when
// half-open (probe is then true). ok is false when ctx ended first; with abandonHeld
// set, also when the breaker is open (the caller then gives the message back).
func (b *breaker) admit(ctx context.Context, abandonHeld bool) (probe, ok bool) {
	for {
		b.mu.Lock()
		switch {
		case b.state == BreakerClosed:
			b.mu.Unlock()
			return false, true
		case b.state == BreakerHalfOpen && b.permits > 0:
			b.permits--
			b.mu.Unlock()
			return true, true
		case b.state == BreakerOpen && abandonHeld:
			b.mu.Unlock()
			return false, false
		}
		ch := b.change
		b.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return false, false
		}
	}
}

// receivable waits until the processor may receive, and returns how many of the n
// messages asked for it may: n when closed, at most the probes not handed out yet when
// half-open. ok is false when ctx ended first.
func (b *breaker) receivable(ctx context.Context, n int) (_ int, ok bool) {
	for {
		b.mu.Lock()
		switch {
		case b.state == BreakerClosed:
			b.mu.Unlock()
			return n, true
		case b.state == BreakerHalfOpen && b.permits > 0:
			n = min(n, b.permits)
			b.mu.Unlock()
			return n, true
		}
		ch := b.change
		b.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return 0, false
		}
	}
}

// record counts a handler's result; probe tells whether admit gave it a probe's permit.
func (b *breaker) record(err error, probe bool) {
	down := err != nil && b.o.IsDependencyDown(err)
	now := time.Now()
	b.mu.Lock()
	var e BreakerChange
	changed := false
	switch {
	case probe && b.state == BreakerHalfOpen && down:
		e, changed = b.setLocked(BreakerOpen, BreakerChange{Err: err}), true
	case probe && b.state == BreakerHalfOpen:
		b.successes++
		if b.successes >= b.o.Probes {
			e, changed = b.setLocked(BreakerClosed, BreakerChange{}), true
		}
	case !probe && b.state == BreakerClosed:
		calls, failures := b.countLocked(now, down)
		if failures > 0 && calls >= b.o.MinimumCalls && float64(failures) >= b.o.FailureRatio*float64(calls) {
			e, changed = b.setLocked(BreakerOpen, BreakerChange{Calls: calls, Failures: failures, Err: err}), true
		}
	}
	if changed {
		b.notifyLocked(e)
		return
	}
	b.mu.Unlock()
}

// countLocked adds a call to the window and returns the window's counts.
func (b *breaker) countLocked(now time.Time, down bool) (calls, failures int) {
	width := b.o.Window / breakerBuckets
	if width <= 0 {
		width = 1
	}
	start := now.Truncate(width)
	i := int(start.UnixNano()/int64(width)) % breakerBuckets
	if i < 0 {
		i += breakerBuckets
	}
	if !b.buckets[i].start.Equal(start) {
		b.buckets[i].start, b.buckets[i].calls, b.buckets[i].failures = start, 0, 0
	}
	b.buckets[i].calls++
	if down {
		b.buckets[i].failures++
	}
	oldest := start.Add(-b.o.Window)
	for _, bk := range b.buckets {
		if bk.start.After(oldest) {
			calls += bk.calls
			failures += bk.failures
		}
	}
	return calls, failures
}

// stats writes b's gauge and counters into s.
func (b *breaker) stats(s *Stats) {
	if b == nil {
		return
	}
	s.BreakerState = b.gauge.Load()
	s.BreakerOpened = b.opened.Load()
	s.BreakerHalfOpened = b.halfOpened.Load()
	s.BreakerClosed = b.closed.Load()
}

// breakerReceive is the receive loop's wait for the breaker: n places were acquired;
// it returns how many to ask for, having released the rest. ok is false when receiving
// stopped.
func (r *run) breakerReceive(n int) (int, bool) {
	b := r.p.breaker
	if b == nil {
		return n, true
	}
	m, ok := b.receivable(r.recvCtx, n)
	if !ok {
		r.release(n)
		return 0, false
	}
	r.release(n - m)
	return m, true
}

// breakerAdmit is a handler goroutine's wait for the breaker before it handles d: false
// when d was given back instead (AbandonHeld while open). A shutdown ends the wait and
// lets process abandon d.
func (r *run) breakerAdmit(d *delivery) bool {
	b := r.p.breaker
	if b == nil {
		return true
	}
	// A ReceiveAndDelete message cannot be given back: it waits, as with AbandonHeld off.
	probe, ok := b.admit(r.recvCtx, b.o.AbandonHeld && r.cfg.peekLock)
	if !ok && r.recvCtx.Err() == nil {
		r.abandonNow(d)
		return false
	}
	d.probe = probe
	return true
}

// breakerRecord counts d's handler result in the breaker.
func (r *run) breakerRecord(d *delivery, err error) {
	if b := r.p.breaker; b != nil {
		b.record(err, d.probe)
		d.probe = false
	}
}

// breakerUnprobe gives back the probe's permit of d when its handler did not run (its
// lock was lost while it waited, or a shutdown started), so that a half-open breaker
// does not wait for a result that never comes.
func (r *run) breakerUnprobe(d *delivery) {
	if b := r.p.breaker; b != nil && d.probe {
		d.probe = false
		b.mu.Lock()
		if b.state == BreakerHalfOpen {
			b.permits++
			close(b.change)
			b.change = make(chan struct{})
		}
		b.mu.Unlock()
	}
}

// breakerAccept is a session slot's wait for the breaker before it accepts a session:
// false when accepting stopped.
func (r *sessionRun) breakerAccept() bool {
	if r.p.breaker == nil {
		return true
	}
	_, ok := r.p.breaker.receivable(r.acceptCtx, 1)
	return ok
}

// breakerStart and breakerEnd resume and pause the processor's own breaker with its
// Run (a SessionProcessor's sessions do not own theirs: see sessionRun).
func (p *Processor) breakerStart() {
	if p.ownsBreaker {
		p.breaker.resume()
	}
}

func (p *Processor) breakerEnd() {
	if p.ownsBreaker {
		p.breaker.pause()
	}
}
