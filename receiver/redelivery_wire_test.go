package receiver_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/sbkit/sbkit"
	"github.com/sbkit/sbkit/dedupe"
	"github.com/sbkit/sbkit/receiver"
	"github.com/sbkit/sbkit/sbtest"
)

// wireQueue serves a namespace with the queue "q" (made with opts) over AMQP on loopback
// and returns the real SDK's sender and receiver of it, and the queue.
func wireQueue(t *testing.T, opts *sbtest.EntityOptions) (*azservicebus.Sender, *azservicebus.Receiver, *sbtest.Entity) {
	t.Helper()
	ns := sbtest.NewTestNamespace(t, &sbtest.NamespaceOptions{Queues: map[string]*sbtest.EntityOptions{"q": opts}})
	srv := sbtest.NewTestServer(t, &sbtest.ServerOptions{Namespace: ns})
	client, err := azservicebus.NewClientFromConnectionString(srv.ConnectionString(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Close(context.Background()) })
	s, err := client.NewSender("q", nil)
	if err != nil {
		t.Fatal(err)
	}
	r, err := client.NewReceiverForQueue("q", nil)
	if err != nil {
		t.Fatal(err)
	}
	q, _ := ns.Entity("q")
	return s, r, q
}

// runWire runs p until cond holds on q, then closes it.
func runWire(t *testing.T, p *receiver.Processor, q *sbtest.Entity, cond func(sbtest.Counts) bool) {
	t.Helper()
	wait := start(t, p, context.Background())
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if _, err := q.WaitUntil(ctx, cond); err != nil {
		t.Fatalf("waiting for the queue: %v (counts %+v, stats %+v)", err, q.Counts(), p.Stats())
	}
	closeCtx, cancelClose := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancelClose()
	if err := p.Close(closeCtx); err != nil {
		t.Errorf("Close = %v", err)
	}
	if err := wait(); err != nil {
		t.Errorf("Run = %v", err)
	}
}

// TestWireRedelivery: over AMQP with the real SDK, a failed message is redelivered by a
// scheduled copy whose properties (an int64, a timestamp, a string) and fields survive the
// wire, and a message that keeps failing is dead-lettered when its redeliveries are
// spent.
func TestWireRedelivery(t *testing.T) {
	s, r, q := wireQueue(t, &sbtest.EntityOptions{MaxDeliveryCount: 10})
	ctx := t.Context()
	for _, id := range []string{"ok-later", "never"} {
		if err := s.SendMessage(ctx, &azservicebus.Message{MessageID: new(id), Body: []byte(id), ContentType: new("text/plain"),
			Subject: new("subj"), ApplicationProperties: map[string]any{"k": "v"}}, nil); err != nil {
			t.Fatal(err)
		}
	}
	var copies atomic.Pointer[azservicebus.ReceivedMessage]
	h := func(ctx context.Context, m *azservicebus.ReceivedMessage) error {
		a, _ := sbkit.RedeliveryOf(m)
		if m.MessageID == sbkit.RedeliveryMessageID("ok-later", 1) {
			copies.Store(m)
			return nil
		}
		if a == 0 || sbkit.OriginalMessageID(m) == "never" {
			return errDown
		}
		return nil
	}
	p := newProcessor(t, r, h, &receiver.Options{Redelivery: &receiver.RedeliveryOptions{Scheduler: s, MaxRedeliveries: 1,
		Delay: func(int) time.Duration { return 200 * time.Millisecond }}})
	runWire(t, p, q, func(c sbtest.Counts) bool { return drained(c) && c.DeadLetter == 1 })
	m := copies.Load()
	if m == nil {
		t.Fatal("the copy of ok-later was not handled")
	}
	a, first := sbkit.RedeliveryOf(m)
	if a != 1 || first.IsZero() || sbkit.OriginalMessageID(m) != "ok-later" || string(m.Body) != "ok-later" ||
		*m.ContentType != "text/plain" || *m.Subject != "subj" || m.ApplicationProperties["k"] != "v" {
		t.Errorf("copy %+v (attempt %d, first failure %v)", m, a, first)
	}
	if m.EnqueuedTime == nil || m.ScheduledEnqueueTime == nil {
		t.Errorf("copy not scheduled: %+v", m)
	}
	dl := q.DeadLetters()
	if len(dl) != 1 || *dl[0].DeadLetterReason != receiver.ExhaustedReason || sbkit.OriginalMessageID(dl[0]) != "never" {
		t.Errorf("dead letters %+v", dl)
	}
	st := p.Stats()
	if st.Redelivered != 2 || st.Exhausted != 1 {
		t.Errorf("stats %+v", st)
	}
	checkReconciled(t, st)
}

// TestWireRedeliveryCompleteFails: over AMQP, the completion of an original whose copy
// was scheduled fails with the lock lost; the original comes back, fails again, and its
// second copy of the same attempt is dropped by the entity's duplicate detection.
func TestWireRedeliveryCompleteFails(t *testing.T) {
	s, r, q := wireQueue(t, &sbtest.EntityOptions{MaxDeliveryCount: 10, DuplicateDetectionWindow: time.Minute})
	if err := s.SendMessage(t.Context(), &azservicebus.Message{MessageID: new("x")}, nil); err != nil {
		t.Fatal(err)
	}
	q.InjectFault(sbtest.Fault{Op: sbtest.OpComplete, Count: 1, Err: &azservicebus.Error{Code: azservicebus.CodeLockLost}})
	var done, failed atomic.Int64
	h := func(ctx context.Context, m *azservicebus.ReceivedMessage) error {
		if a, _ := sbkit.RedeliveryOf(m); a == 0 {
			failed.Add(1)
			return errDown
		}
		done.Add(1)
		return nil
	}
	p := newProcessor(t, r, h, &receiver.Options{Redelivery: &receiver.RedeliveryOptions{Scheduler: s,
		Delay: func(int) time.Duration { return 300 * time.Millisecond }}})
	runWire(t, p, q, func(c sbtest.Counts) bool { return drained(c) && failed.Load() == 2 && done.Load() == 1 })
	if q.Stats().DuplicatesDropped != 1 || done.Load() != 1 {
		t.Errorf("duplicates dropped %d, done %d", q.Stats().DuplicatesDropped, done.Load())
	}
	if st := p.Stats(); st.Scheduled != 2 || st.Redelivered != 1 || st.LocksLost != 1 {
		t.Errorf("stats %+v", st)
	}
}

// TestWireBreaker: over AMQP, the breaker opens on failures, a failed probe reopens it,
// and a successful one closes it; every message is completed.
func TestWireBreaker(t *testing.T) {
	s, r, q := wireQueue(t, &sbtest.EntityOptions{MaxDeliveryCount: 10})
	for range 10 {
		if err := s.SendMessage(t.Context(), &azservicebus.Message{Body: []byte("x")}, nil); err != nil {
			t.Fatal(err)
		}
	}
	down := &outage{end: time.Now().Add(1500 * time.Millisecond)}
	log := &breakerLog{}
	p := newProcessor(t, r, down.call, &receiver.Options{DisablePrefetch: true, Hooks: []receiver.Hook{log},
		Breaker: &receiver.BreakerOptions{IsDependencyDown: isDown, MinimumCalls: 3, OpenDuration: time.Second}})
	runWire(t, p, q, func(c sbtest.Counts) bool { return drained(c) })
	changes, _ := log.all()
	var states []receiver.BreakerState
	for _, c := range changes {
		states = append(states, c.To)
	}
	// Opened at about 0, half-open at 1 s (down until 1.5 s): the probe fails and
	// reopens for 2 s; half-open at 3 s: the probe succeeds.
	want := []receiver.BreakerState{receiver.BreakerOpen, receiver.BreakerHalfOpen, receiver.BreakerOpen, receiver.BreakerHalfOpen, receiver.BreakerClosed}
	if len(states) != len(want) {
		t.Fatalf("states %v, want %v", states, want)
	}
	for i := range want {
		if states[i] != want[i] {
			t.Fatalf("states %v, want %v", states, want)
		}
	}
	if st := p.Stats(); st.Completed != 10 || st.DeadLettered != 0 {
		t.Errorf("stats %+v", st)
	}
	if !errors.Is(changes[0].Err, errDown) {
		t.Errorf("opened by %v", changes[0].Err)
	}
}

// TestWireRedeliveryFaults: over AMQP, a schedule refused for good leaves the original
// abandoned (it comes back and is handled), and a completion that fails after the
// schedule on an entity without duplicate detection leaves two copies, of which dedupe's
// filter handles one and skips the other.
func TestWireRedeliveryFaults(t *testing.T) {
	t.Run("schedule fails for good", func(t *testing.T) {
		s, r, q := wireQueue(t, &sbtest.EntityOptions{MaxDeliveryCount: 10})
		if err := s.SendMessage(t.Context(), &azservicebus.Message{MessageID: new("x")}, nil); err != nil {
			t.Fatal(err)
		}
		var calls atomic.Int64
		h := func(ctx context.Context, m *azservicebus.ReceivedMessage) error {
			if calls.Add(1) == 1 {
				q.InjectFault(sbtest.Fault{Op: sbtest.OpSend, Count: 1, Err: sbtest.PermanentError})
				return errDown
			}
			return nil
		}
		var log errorLog
		p := newProcessor(t, r, h, &receiver.Options{Hooks: []receiver.Hook{&log},
			Redelivery: &receiver.RedeliveryOptions{Scheduler: s, Delay: func(int) time.Duration { return time.Second }}})
		runWire(t, p, q, func(c sbtest.Counts) bool { return drained(c) && calls.Load() == 2 })
		if st := p.Stats(); st.Abandoned != 1 || st.Completed != 1 || st.Redelivered != 0 || log.countIs(receiver.ErrScheduleFailed) != 1 {
			t.Errorf("stats %+v, ErrScheduleFailed %d", st, log.countIs(receiver.ErrScheduleFailed))
		}
	})
	t.Run("Close while the schedule hangs", func(t *testing.T) {
		s, r, q := wireQueue(t, &sbtest.EntityOptions{MaxDeliveryCount: 10, LockDuration: 5 * time.Second})
		if err := s.SendMessage(t.Context(), &azservicebus.Message{MessageID: new("x")}, nil); err != nil {
			t.Fatal(err)
		}
		q.InjectFault(sbtest.Fault{Op: sbtest.OpSend, Hang: true})
		var calls atomic.Int64
		h := func(context.Context, *azservicebus.ReceivedMessage) error { calls.Add(1); return errDown }
		p := newProcessor(t, r, h, &receiver.Options{Redelivery: &receiver.RedeliveryOptions{Scheduler: s}})
		wait := start(t, p, context.Background())
		for deadline := time.Now().Add(10 * time.Second); q.Stats().InFlightSends == 0; time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatal("the schedule never reached the broker")
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		begin := time.Now()
		_ = p.Close(ctx)
		if took := time.Since(begin); took > 1500*time.Millisecond {
			t.Errorf("Close took %v with a 1 s deadline", took)
		}
		if err := wait(); err != nil {
			t.Fatal(err)
		}
		q.ClearFaults()
		st := p.Stats()
		checkReconciled(t, st)
		if st.Redelivered != 0 || st.LeftLocked+st.Abandoned != 1 {
			t.Errorf("stats %+v", st)
		}
		waitCtx, cancelWait := context.WithTimeout(t.Context(), 20*time.Second)
		defer cancelWait()
		if _, err := q.WaitUntil(waitCtx, func(c sbtest.Counts) bool { return c.Active == 1 && c.Locked == 0 }); err != nil {
			t.Errorf("the message did not come back: %v (counts %+v)", err, q.Counts())
		}
	})
	t.Run("complete fails without duplicate detection", func(t *testing.T) {
		s, r, q := wireQueue(t, &sbtest.EntityOptions{MaxDeliveryCount: 10})
		if err := s.SendMessage(t.Context(), &azservicebus.Message{MessageID: new("x")}, nil); err != nil {
			t.Fatal(err)
		}
		q.InjectFault(sbtest.Fault{Op: sbtest.OpComplete, Count: 1, Err: &azservicebus.Error{Code: azservicebus.CodeLockLost}})
		var done, failed atomic.Int64
		h := func(ctx context.Context, m *azservicebus.ReceivedMessage) error {
			if a, _ := sbkit.RedeliveryOf(m); a == 0 {
				failed.Add(1)
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
		p := newProcessor(t, r, sbkit.Chain(h, f.Middleware()), &receiver.Options{
			Redelivery: &receiver.RedeliveryOptions{Scheduler: s, Delay: func(int) time.Duration { return 300 * time.Millisecond }}})
		runWire(t, p, q, func(c sbtest.Counts) bool { return drained(c) && failed.Load() == 2 && q.Stats().Completed == 3 })
		if done.Load() != 1 || p.Stats().Skipped != 1 || q.Stats().DuplicatesDropped != 0 {
			t.Errorf("done %d, skipped %d, duplicates dropped %d; want dedupe to skip the second copy", done.Load(), p.Stats().Skipped, q.Stats().DuplicatesDropped)
		}
	})
}
