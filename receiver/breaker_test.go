package receiver_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/sbkit/sbkit/receiver"
	"github.com/sbkit/sbkit/sbtest"
)

// breakerLog is a BreakerHook that records the changes with their times.
type breakerLog struct {
	mu      sync.Mutex
	changes []receiver.BreakerChange
	at      []time.Time
}

func (l *breakerLog) OnBreakerChange(_ context.Context, e receiver.BreakerChange) {
	l.mu.Lock()
	l.changes = append(l.changes, e)
	l.at = append(l.at, time.Now())
	l.mu.Unlock()
}

func (l *breakerLog) all() ([]receiver.BreakerChange, []time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]receiver.BreakerChange(nil), l.changes...), append([]time.Time(nil), l.at...)
}

// outage is a downstream that fails every call (errDown) until its end.
type outage struct {
	end   time.Time
	calls atomic.Int64
	mu    sync.Mutex
	times []time.Time
}

func (o *outage) call(context.Context, *azservicebus.ReceivedMessage) error {
	o.calls.Add(1)
	o.mu.Lock()
	o.times = append(o.times, time.Now())
	o.mu.Unlock()
	if time.Now().Before(o.end) {
		return errDown
	}
	return nil
}

// callsBetween counts the calls made in [from, to).
func (o *outage) callsBetween(from, to time.Time) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	n := 0
	for _, t := range o.times {
		if !t.Before(from) && t.Before(to) {
			n++
		}
	}
	return n
}

func isDown(err error) bool { return errors.Is(err, errDown) }

// TestBreakerOpensProbesReopensCloses: the breaker opens when the window's failures
// reach the ratio, lets one probe through after OpenDuration, opens again for twice as
// long when the probe fails, and closes when the next probe succeeds; no handler runs
// while it is open, every change is told to the hook and counted in Stats, and the queue
// drains without a dead letter.
func TestBreakerOpensProbesReopensCloses(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, &sbtest.EntityOptions{MaxDeliveryCount: 10, LockDuration: time.Minute})
		e.send(t, 20)
		start0 := time.Now()
		down := &outage{end: start0.Add(25 * time.Second)}
		log := &breakerLog{}
		p := newProcessor(t, e.r, down.call, &receiver.Options{DisablePrefetch: true, Hooks: []receiver.Hook{log},
			Breaker: &receiver.BreakerOptions{IsDependencyDown: isDown, MinimumCalls: 5, OpenDuration: 10 * time.Second}})
		runUntil(t, p, e.q, drained)

		changes, at := log.all()
		want := []struct {
			from, to receiver.BreakerState
			at       time.Duration
			openFor  time.Duration
		}{
			{receiver.BreakerClosed, receiver.BreakerOpen, 0, 10 * time.Second},
			{receiver.BreakerOpen, receiver.BreakerHalfOpen, 10 * time.Second, 0},
			{receiver.BreakerHalfOpen, receiver.BreakerOpen, 10 * time.Second, 20 * time.Second},
			{receiver.BreakerOpen, receiver.BreakerHalfOpen, 30 * time.Second, 0},
			{receiver.BreakerHalfOpen, receiver.BreakerClosed, 30 * time.Second, 0},
		}
		if len(changes) != len(want) {
			t.Fatalf("changes %+v, want %d", changes, len(want))
		}
		for i, w := range want {
			c := changes[i]
			if c.From != w.from || c.To != w.to || at[i].Sub(start0) != w.at || c.OpenFor != w.openFor {
				t.Errorf("change %d: %v→%v at +%v open for %v; want %v→%v at +%v open for %v",
					i, c.From, c.To, at[i].Sub(start0), c.OpenFor, w.from, w.to, w.at, w.openFor)
			}
		}
		if changes[0].Calls != 5 || changes[0].Failures != 5 || !isDown(changes[0].Err) {
			t.Errorf("opened on %d calls, %d failures, %v", changes[0].Calls, changes[0].Failures, changes[0].Err)
		}
		if n := down.callsBetween(start0.Add(time.Nanosecond), start0.Add(10*time.Second)); n != 0 {
			t.Errorf("%d handler calls while open", n)
		}
		if n := down.calls.Load(); n != 5+1+20 {
			t.Errorf("%d handler calls, want 5 failures, 1 failed probe and 20 successes", n)
		}
		s := p.Stats()
		if s.BreakerOpened != 2 || s.BreakerHalfOpened != 2 || s.BreakerClosed != 1 || s.BreakerState != int64(receiver.BreakerClosed) {
			t.Errorf("stats %+v", s)
		}
		if s.DeadLettered != 0 || s.Completed != 20 {
			t.Errorf("stats %+v", s)
		}
		checkReconciled(t, s)
	})
}

// TestBreakerHoldOrAbandon measures what the breaker's two ways of treating the messages
// it holds when it opens cost in deliveries: holding them (their locks renewed) or
// abandoning them (AbandonHeld). Holding spends none.
func TestBreakerHoldOrAbandon(t *testing.T) {
	spent := map[bool]int64{}
	for _, abandon := range []bool{false, true} {
		t.Run(fmt.Sprintf("abandon=%v", abandon), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e := newEnv(t, &sbtest.EntityOptions{MaxDeliveryCount: 10, LockDuration: 30 * time.Second})
				e.send(t, 50)
				down := &outage{end: time.Now().Add(2 * time.Minute)}
				p := newProcessor(t, e.r, down.call, &receiver.Options{MaxConcurrency: 2, PrefetchCount: 20,
					Breaker: &receiver.BreakerOptions{IsDependencyDown: isDown, MinimumCalls: 4, OpenDuration: 10 * time.Second,
						MaxOpenDuration: 30 * time.Second, AbandonHeld: abandon}})
				runUntil(t, p, e.q, drained)
				s := p.Stats()
				spent[abandon] = e.q.Stats().Received
				t.Logf("abandon=%v: %d deliveries for 50 messages, %d handler calls, %d renewals, %d abandoned, dead-lettered %d",
					abandon, e.q.Stats().Received, s.Handled, s.Renewed, s.Abandoned, s.DeadLettered)
				if s.DeadLettered != 0 || len(e.q.DeadLetters()) != 0 {
					t.Errorf("dead-lettered %d", s.DeadLettered)
				}
				checkReconciled(t, s)
			})
		})
	}
	if spent[false] >= spent[true] {
		t.Errorf("holding spent %d deliveries, abandoning %d: holding must spend fewer", spent[false], spent[true])
	}
}

// TestBreakerCloseWhileOpen: Close while the breaker is open returns by its deadline and
// gives the held messages back at once.
func TestBreakerCloseWhileOpen(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, &sbtest.EntityOptions{LockDuration: time.Minute})
		e.send(t, 10)
		down := &outage{end: time.Now().Add(time.Hour)}
		p := newProcessor(t, e.r, down.call, &receiver.Options{PrefetchCount: 5,
			Breaker: &receiver.BreakerOptions{IsDependencyDown: isDown, MinimumCalls: 2, OpenDuration: time.Hour}})
		wait := start(t, p, context.Background())
		time.Sleep(time.Second)
		synctest.Wait()
		if s := p.Stats(); s.BreakerState != int64(receiver.BreakerOpen) {
			t.Fatalf("breaker %v, want open", receiver.BreakerState(s.BreakerState))
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		begin := time.Now()
		if err := p.Close(ctx); err != nil {
			t.Errorf("Close = %v", err)
		}
		if took := time.Since(begin); took > 2*time.Second {
			t.Errorf("Close took %v", took)
		}
		if err := wait(); err != nil {
			t.Fatal(err)
		}
		if c := e.q.Counts(); c.Locked != 0 || c.Active != 10 {
			t.Errorf("counts %+v: every message must be back", c)
		}
		checkReconciled(t, p.Stats())
	})
}

// TestSessionBreakerStopsAccepting: a SessionProcessor whose breaker opens accepts no
// session until it is half-open.
func TestSessionBreakerStopsAccepting(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sq := newSessionQueue(t, &sbtest.EntityOptions{MaxDeliveryCount: 10})
		for i := range 20 {
			sq.send(t, fmt.Sprintf("s%d", i), "a")
		}
		begin := time.Now()
		down := &outage{end: begin.Add(15 * time.Second)}
		log := &breakerLog{}
		p, stop := startSessions(t, sq, down.call, &receiver.SessionOptions{MaxConcurrentSessions: 2, Options: receiver.Options{
			Hooks: []receiver.Hook{log}, Breaker: &receiver.BreakerOptions{IsDependencyDown: isDown, MinimumCalls: 3, OpenDuration: 10 * time.Second}}})
		time.Sleep(5 * time.Second)
		synctest.Wait()
		accepted := sq.q.Stats().SessionsAccepted
		if s := p.Stats(); s.BreakerState != int64(receiver.BreakerOpen) || s.BreakerOpened != 1 {
			t.Fatalf("breaker %v after 5s, want open", receiver.BreakerState(s.BreakerState))
		}
		time.Sleep(4 * time.Second) // still open
		synctest.Wait()
		if got := sq.q.Stats().SessionsAccepted; got != accepted {
			t.Errorf("%d sessions accepted while open", got-accepted)
		}
		if _, err := sq.q.WaitUntil(t.Context(), func(c sbtest.Counts) bool { return c.Active == 0 && c.Locked == 0 }); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		s := p.Stats()
		if s.DeadLettered != 0 || s.Completed != 20 || s.BreakerClosed < 1 {
			t.Errorf("stats %+v", s)
		}
		if changes, _ := log.all(); changes[len(changes)-1].To != receiver.BreakerClosed {
			t.Errorf("last change %+v", changes[len(changes)-1])
		}
	})
}

// TestBreakerOptions: a breaker without a classifier, or with values out of range,
// fails at construction.
func TestBreakerOptions(t *testing.T) {
	e := newEnv(t, nil)
	h := func(context.Context, *azservicebus.ReceivedMessage) error { return nil }
	for name, b := range map[string]*receiver.BreakerOptions{
		"no classifier":   {},
		"ratio above one": {IsDependencyDown: isDown, FailureRatio: 1.5},
		"negative window": {IsDependencyDown: isDown, Window: -1},
		"max below open":  {IsDependencyDown: isDown, OpenDuration: time.Minute, MaxOpenDuration: time.Second},
	} {
		if _, err := receiver.New(e.r, h, &receiver.Options{Breaker: b}); !errors.Is(err, receiver.ErrInvalidOptions) {
			t.Errorf("%s: New = %v, want ErrInvalidOptions", name, err)
		}
	}
}

// slowHalfOpenLog is a breakerLog whose half-open notices take a moment, as a hook that
// exports a span may.
type slowHalfOpenLog struct{ breakerLog }

func (l *slowHalfOpenLog) OnBreakerChange(ctx context.Context, e receiver.BreakerChange) {
	if e.To == receiver.BreakerHalfOpen {
		time.Sleep(time.Millisecond)
	}
	l.breakerLog.OnBreakerChange(ctx, e)
}

// TestBreakerHooksInOrder: the hooks hear the changes in the order they happened, even
// when a probe fails while the hook is still being told of the half-open state.
func TestBreakerHooksInOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, &sbtest.EntityOptions{MaxDeliveryCount: 10, LockDuration: time.Minute})
		e.send(t, 10)
		down := &outage{end: time.Now().Add(15 * time.Second)}
		log := &slowHalfOpenLog{}
		p := newProcessor(t, e.r, down.call, &receiver.Options{DisablePrefetch: true, Hooks: []receiver.Hook{log},
			Breaker: &receiver.BreakerOptions{IsDependencyDown: isDown, MinimumCalls: 3, OpenDuration: 10 * time.Second}})
		runUntil(t, p, e.q, drained)
		changes, _ := log.all()
		for i := 1; i < len(changes); i++ {
			if changes[i].From != changes[i-1].To {
				t.Fatalf("change %d is %v→%v after a change to %v: out of order (%+v)", i, changes[i].From, changes[i].To, changes[i-1].To, changes)
			}
		}
		if len(changes) != 5 {
			t.Errorf("%d changes, want open, half-open, open, half-open, closed", len(changes))
		}
	})
}

// TestBreakerAcrossRuns: a breaker open when Run returns stays open, with no timer
// running, and its open period ends when the next Run starts, at once if it is over.
func TestBreakerAcrossRuns(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, &sbtest.EntityOptions{MaxDeliveryCount: 10, LockDuration: time.Minute})
		e.send(t, 10)
		down := &outage{end: time.Now().Add(20 * time.Second)}
		log := &breakerLog{}
		p := newProcessor(t, e.r, down.call, &receiver.Options{DisablePrefetch: true, Hooks: []receiver.Hook{log},
			Breaker: &receiver.BreakerOptions{IsDependencyDown: isDown, MinimumCalls: 3, OpenDuration: 10 * time.Second}})
		ctx, cancel := context.WithCancel(context.Background())
		wait := start(t, p, ctx)
		time.Sleep(time.Second)
		cancel()
		if err := wait(); !errors.Is(err, context.Canceled) {
			t.Fatalf("Run = %v", err)
		}
		time.Sleep(time.Minute) // no Run: the breaker changes nothing
		if s := p.Stats(); s.BreakerState != int64(receiver.BreakerOpen) || s.BreakerHalfOpened != 0 {
			t.Fatalf("after Run: %v, half-opened %d", receiver.BreakerState(s.BreakerState), s.BreakerHalfOpened)
		}
		runUntil(t, p, e.q, drained)
		changes, at := log.all()
		if len(changes) != 3 || changes[1].To != receiver.BreakerHalfOpen || changes[2].To != receiver.BreakerClosed {
			t.Fatalf("changes %+v", changes)
		}
		if d := at[1].Sub(at[0]); d != 61*time.Second {
			t.Errorf("half-open %v after opening, want when the second Run started (61s)", d)
		}
	})
}

// TestBreakerReceiveAndDelete: in ReceiveAndDelete mode the messages held when the
// breaker opens cannot be given back, so they wait even with AbandonHeld: no handler
// runs while it is open, and every message is handled once it closes.
func TestBreakerReceiveAndDelete(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, nil)
		e.r = e.receiver(t, &sbtest.ReceiverOptions{ReceiveMode: azservicebus.ReceiveModeReceiveAndDelete})
		e.send(t, 10)
		begin := time.Now()
		down := &outage{end: begin.Add(5 * time.Second)}
		var handled []string
		var mu sync.Mutex
		h := func(ctx context.Context, m *azservicebus.ReceivedMessage) error {
			err := down.call(ctx, m)
			if err == nil {
				mu.Lock()
				handled = append(handled, m.MessageID)
				mu.Unlock()
			}
			return err
		}
		p := newProcessor(t, e.r, h, &receiver.Options{ReceiveMode: azservicebus.ReceiveModeReceiveAndDelete, PrefetchCount: 10,
			Breaker: &receiver.BreakerOptions{IsDependencyDown: isDown, MinimumCalls: 2, OpenDuration: 10 * time.Second, AbandonHeld: true}})
		wait := start(t, p, context.Background())
		time.Sleep(time.Minute)
		synctest.Wait()
		if err := p.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		if err := wait(); err != nil {
			t.Fatal(err)
		}
		if n := down.callsBetween(begin.Add(time.Nanosecond), begin.Add(10*time.Second)); n != 0 {
			t.Errorf("%d handler calls while open", n)
		}
		if s := p.Stats(); len(handled) != 8 || s.Dropped != 0 || s.Received != 10 {
			t.Errorf("handled %d (want the 8 not failed), stats %+v", len(handled), s)
		}
	})
}
