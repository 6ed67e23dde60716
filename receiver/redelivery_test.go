package receiver_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/sbkit/sbkit"
	"github.com/sbkit/sbkit/dedupe"
	"github.com/sbkit/sbkit/receiver"
	"github.com/sbkit/sbkit/sbtest"
)

var errDown = errors.New("dependency down")

// redeliveries is a RedeliveryHook that collects the decisions.
type redeliveries struct {
	mu  sync.Mutex
	evs []receiver.Redelivery
}

func (h *redeliveries) OnRedelivery(_ context.Context, e receiver.Redelivery) {
	h.mu.Lock()
	h.evs = append(h.evs, e)
	h.mu.Unlock()
}

func (h *redeliveries) all() []receiver.Redelivery {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]receiver.Redelivery(nil), h.evs...)
}

// calls records each handler call: the time, the message's MessageID, delivery count
// and attempt, and a copy of the message.
type calls struct {
	mu   sync.Mutex
	list []call
}

type call struct {
	at      time.Time
	msg     *azservicebus.ReceivedMessage
	attempt int
}

func (c *calls) add(m *azservicebus.ReceivedMessage) int {
	a, _ := sbkit.RedeliveryOf(m)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.list = append(c.list, call{at: time.Now(), msg: m, attempt: a})
	return len(c.list)
}

func (c *calls) all() []call {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]call(nil), c.list...)
}

// runUntil runs p until cond holds on q's counts, then closes it and waits for Run.
func runUntil(t *testing.T, p *receiver.Processor, q *sbtest.Entity, cond func(sbtest.Counts) bool) {
	t.Helper()
	wait := start(t, p, context.Background())
	if _, err := q.WaitUntil(t.Context(), cond); err != nil {
		t.Fatal(err)
	}
	synctest.Wait()
	if err := p.Close(context.Background()); err != nil {
		t.Fatalf("Close = %v", err)
	}
	if err := wait(); err != nil {
		t.Fatalf("Run = %v", err)
	}
}

func drained(c sbtest.Counts) bool { return c.Active == 0 && c.Locked == 0 && c.Scheduled == 0 }

// TestRedeliveryKeepsTheMessage: a message that fails its immediate attempts is
// redelivered by a copy scheduled at now + the policy's delay, which carries every field
// of the original, the attempt, the first failure and the original MessageID, a derived
// MessageID and what is left of the original's TimeToLive; the original is completed.
func TestRedeliveryKeepsTheMessage(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, &sbtest.EntityOptions{MaxDeliveryCount: 10})
		ttl := time.Hour
		m := &azservicebus.Message{
			MessageID: new("order-1"), Body: []byte("body"), ContentType: new("application/json"),
			CorrelationID: new("corr"), PartitionKey: new("pk"), Subject: new("subj"), To: new("to"),
			ReplyTo: new("reply"), ReplyToSessionID: new("rsid"), TimeToLive: &ttl,
			ApplicationProperties: map[string]any{"tenant": "t1"},
		}
		if err := e.s.SendMessage(context.Background(), m, nil); err != nil {
			t.Fatal(err)
		}
		sent := time.Now()
		var got calls
		hook := &redeliveries{}
		h := func(ctx context.Context, m *azservicebus.ReceivedMessage) error {
			if got.add(m) <= 4 { // 2 immediate attempts, a copy's 2 attempts
				return errDown
			}
			return nil
		}
		p := newProcessor(t, e.r, h, &receiver.Options{Hooks: []receiver.Hook{hook}, Redelivery: &receiver.RedeliveryOptions{
			Scheduler: e.s, ImmediateAttempts: 2, MaxRedeliveries: 3,
			Delay: func(attempt int) time.Duration { return time.Duration(attempt) * time.Minute },
		}})
		runUntil(t, p, e.q, func(c sbtest.Counts) bool { return drained(c) && len(got.all()) == 5 })

		cs := got.all()
		for i, want := range []struct {
			attempt  int
			delivery uint32
			after    time.Duration
		}{{0, 1, 0}, {0, 2, 0}, {1, 1, time.Minute}, {1, 2, time.Minute}, {2, 1, 3 * time.Minute}} {
			c := cs[i]
			if c.attempt != want.attempt || c.msg.DeliveryCount != want.delivery || c.at.Sub(sent) != want.after {
				t.Errorf("call %d: attempt %d, delivery %d, at +%v; want %d, %d, +%v", i, c.attempt, c.msg.DeliveryCount, c.at.Sub(sent), want.attempt, want.delivery, want.after)
			}
		}
		last := cs[4].msg
		if last.MessageID != sbkit.RedeliveryMessageID("order-1", 2) || sbkit.OriginalMessageID(last) != "order-1" {
			t.Errorf("copy MessageID %q, original %q", last.MessageID, sbkit.OriginalMessageID(last))
		}
		if string(last.Body) != "body" || *last.ContentType != "application/json" || *last.CorrelationID != "corr" ||
			*last.PartitionKey != "pk" || *last.Subject != "subj" || *last.To != "to" || *last.ReplyTo != "reply" ||
			*last.ReplyToSessionID != "rsid" || last.ApplicationProperties["tenant"] != "t1" {
			t.Errorf("copy lost a field: %+v", last)
		}
		if _, first := sbkit.RedeliveryOf(last); !first.Equal(cs[1].at.UTC()) {
			t.Errorf("first failure %v, want the first failure at %v", first, cs[1].at)
		}
		if exp, ok := sbkit.MessageExpiresAt(last); !ok || !exp.Equal(sent.Add(ttl)) {
			t.Errorf("copy expires at %v, want the original's %v", exp, sent.Add(ttl))
		}
		s := p.Stats()
		if s.Redelivered != 2 || s.Scheduled != 2 || s.Completed != 1 || s.Abandoned != 2 || s.DeadLettered != 0 {
			t.Errorf("stats %+v", s)
		}
		checkReconciled(t, s)
		if evs := hook.all(); len(evs) != 2 || evs[1].Attempt != 2 || evs[1].SequenceNumber == 0 || evs[1].OriginalMessageID != "order-1" ||
			!evs[1].Due.Equal(cs[4].at) || !errors.Is(evs[1].Cause, errDown) {
			t.Errorf("hook events %+v", evs)
		}
	})
}

// TestRedeliveryExhausted: a message that keeps failing is dead-lettered once its
// redeliveries are spent, with a reason and a description that names them and the last
// error; the broker's delivery counts are never spent.
func TestRedeliveryExhausted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, &sbtest.EntityOptions{MaxDeliveryCount: 10})
		e.send(t, 1)
		var got calls
		h := func(ctx context.Context, m *azservicebus.ReceivedMessage) error {
			got.add(m)
			return errDown
		}
		p := newProcessor(t, e.r, h, &receiver.Options{Redelivery: &receiver.RedeliveryOptions{
			Scheduler: e.s, MaxRedeliveries: 2, Delay: func(int) time.Duration { return time.Second }}})
		runUntil(t, p, e.q, func(c sbtest.Counts) bool { return c.DeadLetter == 1 })
		dl := e.q.DeadLetters()
		if len(dl) != 1 || *dl[0].DeadLetterReason != receiver.ExhaustedReason {
			t.Fatalf("dead letters %+v", dl)
		}
		if d := *dl[0].DeadLetterErrorDescription; !strings.Contains(d, "2 redeliveries") || !strings.Contains(d, errDown.Error()) {
			t.Errorf("description %q names neither the attempts nor the error", d)
		}
		if n := len(got.all()); n != 3 {
			t.Errorf("%d handler calls, want 3 (the original and 2 copies)", n)
		}
		s := p.Stats()
		if s.Exhausted != 1 || s.DeadLettered != 1 || s.Redelivered != 2 {
			t.Errorf("stats %+v", s)
		}
		checkReconciled(t, s)
	})
}

// TestRedeliveryAfterExpiry: a message whose TimeToLive ends before its redelivery would
// be enqueued is dead-lettered at once with TTLExpiredException, not scheduled to expire.
func TestRedeliveryAfterExpiry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, nil)
		ttl := 30 * time.Second
		if err := e.s.SendMessage(context.Background(), &azservicebus.Message{MessageID: new("x"), TimeToLive: &ttl}, nil); err != nil {
			t.Fatal(err)
		}
		p := newProcessor(t, e.r, func(context.Context, *azservicebus.ReceivedMessage) error { return errDown },
			&receiver.Options{Redelivery: &receiver.RedeliveryOptions{Scheduler: e.s, Delay: func(int) time.Duration { return time.Minute }}})
		runUntil(t, p, e.q, func(c sbtest.Counts) bool { return c.DeadLetter == 1 })
		dl := e.q.DeadLetters()
		if *dl[0].DeadLetterReason != sbkit.TTLExpiredReason || e.q.Stats().Scheduled != 0 {
			t.Fatalf("reason %q, %d scheduled", *dl[0].DeadLetterReason, e.q.Stats().Scheduled)
		}
		if s := p.Stats(); s.Exhausted != 1 || s.Scheduled != 0 {
			t.Errorf("stats %+v", s)
		}
	})
}

// TestRetryAfter: a handler's sbkit.RetryAfter skips the immediate attempts and sets the
// delay; without a policy it abandons and reports ErrNoRedelivery.
func TestRetryAfter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, nil)
		e.send(t, 1)
		var got calls
		h := func(ctx context.Context, m *azservicebus.ReceivedMessage) error {
			if got.add(m) == 1 {
				return sbkit.RetryAfter(42*time.Second, errDown)
			}
			return nil
		}
		p := newProcessor(t, e.r, h, &receiver.Options{Redelivery: &receiver.RedeliveryOptions{Scheduler: e.s, ImmediateAttempts: 5}})
		runUntil(t, p, e.q, func(c sbtest.Counts) bool { return drained(c) && len(got.all()) == 2 })
		cs := got.all()
		if d := cs[1].at.Sub(cs[0].at); d != 42*time.Second || cs[1].attempt != 1 {
			t.Errorf("copy after %v, attempt %d; want 42s, 1", d, cs[1].attempt)
		}
	})
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, nil)
		e.send(t, 1)
		var log errorLog
		var n atomic.Int64
		h := func(context.Context, *azservicebus.ReceivedMessage) error {
			if n.Add(1) == 1 {
				return sbkit.RetryAfter(time.Minute, errDown)
			}
			return nil
		}
		p := newProcessor(t, e.r, h, &receiver.Options{Hooks: []receiver.Hook{&log}})
		runUntil(t, p, e.q, func(c sbtest.Counts) bool { return drained(c) && n.Load() == 2 })
		if log.countIs(receiver.ErrNoRedelivery) != 1 || p.Stats().Abandoned != 1 {
			t.Errorf("ErrNoRedelivery reported %d times, %d abandoned", log.countIs(receiver.ErrNoRedelivery), p.Stats().Abandoned)
		}
	})
}

// TestRedeliveryScheduleFails: a schedule that fails transiently is retried; one that
// fails for good abandons the original, which is not lost.
func TestRedeliveryScheduleFails(t *testing.T) {
	for _, c := range []struct {
		name  string
		fault sbtest.Fault
	}{
		{"transient", sbtest.Fault{Op: sbtest.OpSend, Count: 2}},
		{"for good", sbtest.Fault{Op: sbtest.OpSend, Count: 1, Err: &azservicebus.Error{Code: azservicebus.CodeUnauthorizedAccess}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e := newEnv(t, nil)
				e.send(t, 1)
				e.q.InjectFault(c.fault)
				var log errorLog
				var got calls
				h := func(ctx context.Context, m *azservicebus.ReceivedMessage) error {
					if got.add(m) == 1 {
						return errDown
					}
					return nil
				}
				p := newProcessor(t, e.r, h, &receiver.Options{Hooks: []receiver.Hook{&log},
					Redelivery: &receiver.RedeliveryOptions{Scheduler: e.s, Delay: func(int) time.Duration { return time.Minute }}})
				runUntil(t, p, e.q, func(sbtest.Counts) bool { return len(got.all()) == 2 })
				waitDrained(t, e.q)
				s := p.Stats()
				switch c.name {
				case "transient":
					if s.ScheduleErrors != 2 || s.Redelivered != 1 || got.all()[1].attempt != 1 {
						t.Errorf("stats %+v, second call attempt %d", s, got.all()[1].attempt)
					}
				default:
					if s.ScheduleErrors != 1 || s.Abandoned != 1 || s.Redelivered != 0 || log.countIs(receiver.ErrScheduleFailed) != 1 ||
						got.all()[1].attempt != 0 || got.all()[1].msg.DeliveryCount != 2 {
						t.Errorf("stats %+v; the original must come back abandoned", s)
					}
				}
				checkReconciled(t, s)
			})
		})
	}
}

// TestRedeliveryCompleteFails: the completion of the original fails for good after its
// copy was scheduled, so the original comes back and fails again, and a second copy of
// the same attempt is scheduled. With duplicate detection on the entity, the broker drops
// it; without, both copies arrive and dedupe's filter (which keys on the original
// MessageID) handles one and skips the other. Either way the work is done once.
func TestRedeliveryCompleteFails(t *testing.T) {
	for _, dupDetection := range []bool{true, false} {
		name := map[bool]string{true: "duplicate detection", false: "dedupe"}[dupDetection]
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				opts := &sbtest.EntityOptions{MaxDeliveryCount: 10}
				if dupDetection {
					opts.DuplicateDetectionWindow = 10 * time.Minute
				}
				e := newEnv(t, opts)
				e.send(t, 1)
				// The first completion loses the lock (a reply the client never saw): the
				// original is delivered again.
				e.q.InjectFault(sbtest.Fault{Op: sbtest.OpComplete, Count: 1, Err: &azservicebus.Error{Code: azservicebus.CodeLockLost}})
				var done, failures atomic.Int64
				h := func(ctx context.Context, m *azservicebus.ReceivedMessage) error {
					if a, _ := sbkit.RedeliveryOf(m); a == 0 {
						failures.Add(1)
						return errDown
					}
					done.Add(1)
					return nil
				}
				store, _ := dedupe.NewMemoryStore(nil)
				f, err := dedupe.New(store, &dedupe.Options{Entity: "q"})
				if err != nil {
					t.Fatal(err)
				}
				hook := &redeliveries{}
				p := newProcessor(t, e.r, sbkit.Chain(h, f.Middleware()), &receiver.Options{Hooks: []receiver.Hook{hook},
					Redelivery: &receiver.RedeliveryOptions{Scheduler: e.s, Delay: func(int) time.Duration { return time.Minute }}})
				runUntil(t, p, e.q, func(c sbtest.Counts) bool { return drained(c) && failures.Load() == 2 })
				if done.Load() != 1 {
					t.Fatalf("the work was done %d times, want once", done.Load())
				}
				s := p.Stats()
				evs := hook.all()
				if len(evs) != 2 || evs[0].Attempt != 1 || evs[1].Attempt != 1 {
					t.Fatalf("redeliveries %+v, want attempt 1 twice", evs)
				}
				if dupDetection {
					if e.q.Stats().DuplicatesDropped != 1 || evs[1].SequenceNumber != 0 || s.Skipped != 0 {
						t.Errorf("duplicates dropped %d, second copy's sequence number %d, skipped %d; want the broker to drop it",
							e.q.Stats().DuplicatesDropped, evs[1].SequenceNumber, s.Skipped)
					}
				} else if s.Skipped != 1 {
					t.Errorf("skipped %d, want dedupe to skip the second copy", s.Skipped)
				}
				if s.Scheduled != 2 || s.Redelivered != 1 || s.LocksLost != 1 || len(e.q.DeadLetters()) != 0 {
					t.Errorf("stats %+v", s)
				}
				checkReconciled(t, s)
			})
		})
	}
}

// TestRedeliveryCloseMidSchedule: Close while a schedule hangs returns by its deadline,
// and the message is not lost: its lock is left to expire and it comes back.
func TestRedeliveryCloseMidSchedule(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, &sbtest.EntityOptions{LockDuration: 30 * time.Second})
		e.send(t, 1)
		e.q.InjectFault(sbtest.Fault{Op: sbtest.OpSend, Hang: true})
		var n atomic.Int64
		h := func(context.Context, *azservicebus.ReceivedMessage) error { n.Add(1); return errDown }
		p := newProcessor(t, e.r, h, &receiver.Options{Redelivery: &receiver.RedeliveryOptions{Scheduler: e.s}})
		wait := start(t, p, context.Background())
		synctest.Wait()
		if n.Load() != 1 || e.q.Stats().InFlightSends != 1 {
			t.Fatalf("%d calls, %d schedules in flight", n.Load(), e.q.Stats().InFlightSends)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		begin := time.Now()
		_ = p.Close(ctx)
		if took := time.Since(begin); took > 2*time.Second {
			t.Errorf("Close took %v, past its 2s deadline", took)
		}
		if err := wait(); err != nil {
			t.Fatal(err)
		}
		s := p.Stats()
		if s.LeftLocked+s.Abandoned != 1 || s.Redelivered != 0 {
			t.Errorf("stats %+v", s)
		}
		checkReconciled(t, s)
		e.q.ClearFaults()
		time.Sleep(31 * time.Second)
		if c := e.q.Counts(); c.Active != 1 || c.Scheduled != 0 {
			t.Errorf("counts %+v, want the message back", c)
		}
	})
}

// TestRedeliveryOptions: bad options fail at construction; a SessionProcessor refuses
// redelivery (a copy would break its session's order).
func TestRedeliveryOptions(t *testing.T) {
	e := newEnv(t, nil)
	h := func(context.Context, *azservicebus.ReceivedMessage) error { return nil }
	for name, o := range map[string]*receiver.Options{
		"no scheduler":       {Redelivery: &receiver.RedeliveryOptions{}},
		"negative immediate": {Redelivery: &receiver.RedeliveryOptions{Scheduler: e.s, ImmediateAttempts: -1}},
		"receive and delete": {ReceiveMode: azservicebus.ReceiveModeReceiveAndDelete, Redelivery: &receiver.RedeliveryOptions{Scheduler: e.s}},
	} {
		if _, err := receiver.New(e.r, h, o); !errors.Is(err, receiver.ErrInvalidOptions) {
			t.Errorf("%s: New = %v, want ErrInvalidOptions", name, err)
		}
	}
	_, err := receiver.NewSessionProcessor(sessionAcceptor{}, h, &receiver.SessionOptions{Options: receiver.Options{
		Redelivery: &receiver.RedeliveryOptions{Scheduler: e.s}}})
	if !errors.Is(err, receiver.ErrInvalidOptions) || !errors.Is(err, receiver.ErrSessionRedelivery) {
		t.Errorf("NewSessionProcessor = %v, want ErrSessionRedelivery", err)
	}
}

// sessionAcceptor is a SessionAcceptor for constructors that must fail before using it.
type sessionAcceptor struct{ sbkit.SessionAcceptor }

// TestSessionRetryAfterAbandons: a SessionProcessor's handler that returns
// sbkit.RetryAfter gets its message abandoned (it comes back first, in order) and
// ErrNoRedelivery reported: nothing is scheduled behind the session's later messages.
func TestSessionRetryAfterAbandons(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sq := newSessionQueue(t, &sbtest.EntityOptions{MaxDeliveryCount: 10})
		sq.send(t, "s", "a", "b", "c")
		var log errorLog
		var mu sync.Mutex
		var order []string
		h := func(ctx context.Context, m *azservicebus.ReceivedMessage) error {
			mu.Lock()
			defer mu.Unlock()
			order = append(order, m.MessageID)
			if m.MessageID == "a" && m.DeliveryCount == 1 {
				return sbkit.RetryAfter(time.Minute, errDown)
			}
			return nil
		}
		p, stop := startSessions(t, sq, h, &receiver.SessionOptions{Options: receiver.Options{Hooks: []receiver.Hook{&log}}})
		if _, err := sq.q.WaitUntil(t.Context(), func(c sbtest.Counts) bool { return c.Active == 0 && c.Locked == 0 }); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		if got := fmt.Sprint(order); got != "[a a b c]" {
			t.Errorf("order %s, want [a a b c]", got)
		}
		if log.countIs(receiver.ErrNoRedelivery) != 1 || sq.q.Stats().Scheduled != 0 || p.Stats().Abandoned != 1 {
			t.Errorf("ErrNoRedelivery %d, scheduled %d, stats %+v", log.countIs(receiver.ErrNoRedelivery), sq.q.Stats().Scheduled, p.Stats())
		}
	})
}
