package receiver_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/sbkit/sbkit"
	"github.com/sbkit/sbkit/receiver"
	"github.com/sbkit/sbkit/sbtest"
)

// sessionQueue is a session-enabled queue with a sender.
type sessionQueue struct {
	ns *sbtest.Namespace
	q  *sbtest.Entity
	s  *sbtest.Sender
}

func newSessionQueue(t *testing.T, opts *sbtest.EntityOptions) *sessionQueue {
	t.Helper()
	var o sbtest.EntityOptions
	if opts != nil {
		o = *opts
	}
	o.RequiresSession = true
	sq := &sessionQueue{}
	sq.ns, sq.q, sq.s = newQueue(t, &o)
	return sq
}

func (sq *sessionQueue) send(t *testing.T, session string, ids ...string) {
	t.Helper()
	for _, id := range ids {
		if err := sq.s.SendMessage(context.Background(), &azservicebus.Message{MessageID: &id, SessionID: &session, Body: []byte(id)}, nil); err != nil {
			t.Fatal(err)
		}
	}
}

// startSessions runs a SessionProcessor until the test stops it.
func startSessions(t *testing.T, sq *sessionQueue, h sbkit.Handler, opts *receiver.SessionOptions) (*receiver.SessionProcessor, func() error) {
	t.Helper()
	p, err := receiver.NewSessionProcessor(sq.ns.QueueSessionAcceptor("q", nil), h, opts)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- p.Run(context.Background()) }()
	return p, func() error {
		if err := p.Close(context.Background()); err != nil {
			return err
		}
		return <-done
	}
}

// TestSessionProcessorFIFO: many sessions, fewer slots: every message is handled once,
// each session's in order and never two of a session at once, while sessions run in
// parallel; the stats reconcile.
func TestSessionProcessorFIFO(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sq := newSessionQueue(t, nil)
		const sessions, per = 12, 10
		for i := range per {
			for s := range sessions {
				sq.send(t, fmt.Sprintf("s%02d", s), fmt.Sprintf("s%02d-%02d", s, i))
			}
		}
		var mu sync.Mutex
		seen := map[string][]string{}
		running := map[string]int{}
		var maxSessions, now int
		h := func(ctx context.Context, m *azservicebus.ReceivedMessage) error {
			id := sessionID(ctx)
			mu.Lock()
			if running[id]++; running[id] > 1 {
				t.Errorf("two handlers at once in session %s", id)
			}
			if now++; now > maxSessions {
				maxSessions = now
			}
			mu.Unlock()
			time.Sleep(5 * time.Millisecond)
			mu.Lock()
			running[id]--
			now--
			seen[id] = append(seen[id], m.MessageID)
			mu.Unlock()
			return nil
		}
		p, stop := startSessions(t, sq, h, &receiver.SessionOptions{MaxConcurrentSessions: 4, SessionIdleTimeout: 100 * time.Millisecond})
		waitDrained(t, sq.q)
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		for s := range sessions {
			id := fmt.Sprintf("s%02d", s)
			var want []string
			for i := range per {
				want = append(want, fmt.Sprintf("%s-%02d", id, i))
			}
			if !slices.Equal(seen[id], want) {
				t.Errorf("session %s handled %v", id, seen[id])
			}
		}
		if maxSessions != 4 {
			t.Errorf("%d sessions at once, want 4", maxSessions)
		}
		st := p.Stats()
		if st.Received != sessions*per || st.Completed != sessions*per || st.Handled != sessions*per || st.Sessions != 0 || st.SessionsAccepted != st.SessionsReleased || st.SessionsAccepted < sessions {
			t.Errorf("stats %+v", st)
		}
		if len(sq.q.Sessions()) != 0 {
			t.Errorf("sessions left: %+v", sq.q.Sessions())
		}
	})
}

// TestSessionProcessorAbandonKeepsOrder: a failed message is abandoned and handled again
// before the next message of its session.
func TestSessionProcessorAbandonKeepsOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sq := newSessionQueue(t, nil)
		sq.send(t, "a", "1", "2", "3")
		var mu sync.Mutex
		var order []string
		h := func(ctx context.Context, m *azservicebus.ReceivedMessage) error {
			mu.Lock()
			order = append(order, fmt.Sprintf("%s#%d", m.MessageID, m.DeliveryCount))
			mu.Unlock()
			if m.MessageID == "1" && m.DeliveryCount == 1 {
				return errors.New("first attempt fails")
			}
			return nil
		}
		p, stop := startSessions(t, sq, h, nil)
		waitDrained(t, sq.q)
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		if want := []string{"1#1", "1#2", "2#1", "3#1"}; !slices.Equal(order, want) {
			t.Fatalf("order %v, want %v", order, want)
		}
		if st := p.Stats(); st.Abandoned != 1 || st.Completed != 3 || st.Received != 4 {
			t.Fatalf("stats %+v", st)
		}
	})
}

// TestSessionProcessorRenewsSessionLock: a handler that outlives the lock duration many
// times keeps its session: the session lock is renewed by the engine.
func TestSessionProcessorRenewsSessionLock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sq := newSessionQueue(t, &sbtest.EntityOptions{LockDuration: 30 * time.Second})
		sq.send(t, "slow", "m")
		h := func(ctx context.Context, m *azservicebus.ReceivedMessage) error {
			select {
			case <-time.After(3 * time.Minute):
				return nil
			case <-ctx.Done():
				return context.Cause(ctx)
			}
		}
		p, stop := startSessions(t, sq, h, nil)
		waitDrained(t, sq.q)
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		st := p.Stats()
		if st.Completed != 1 || st.SessionLocksLost != 0 || st.SessionLocksRenewed < 6 {
			t.Fatalf("stats %+v", st)
		}
		if qs := sq.q.Stats(); qs.SessionLocksRenewed < 6 || qs.SessionLocksExpired != 0 {
			t.Fatalf("broker stats %+v", qs)
		}
	})
}

// TestSessionProcessorSessionLockLoss: when the broker loses the session lock, every
// running handler of the session is cancelled with a lock-lost cause, the session is
// given up, and its messages come back (delivery counted) to be handled again.
func TestSessionProcessorSessionLockLoss(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sq := newSessionQueue(t, &sbtest.EntityOptions{LockDuration: 30 * time.Second})
		sq.send(t, "a", "1", "2")
		causes := make(chan error, 2)
		var calls atomic.Int32
		h := func(ctx context.Context, m *azservicebus.ReceivedMessage) error {
			if calls.Add(1) <= 2 { // both messages handled at once, then lost
				<-ctx.Done()
				causes <- context.Cause(ctx)
				return context.Cause(ctx)
			}
			return nil
		}
		p, stop := startSessions(t, sq, h, &receiver.SessionOptions{MaxConcurrentCallsPerSession: 2})
		for calls.Load() < 2 {
			time.Sleep(time.Second)
		}
		if !sq.q.ExpireSessionLock("a") {
			t.Fatal("session a was not locked")
		}
		for range 2 {
			if cause := <-causes; !sbkit.IsLockLost(cause) {
				t.Fatalf("handler cancelled with %v, want a lock-lost cause", cause)
			}
		}
		waitDrained(t, sq.q)
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		st := p.Stats()
		if st.SessionLocksLost != 1 || st.Completed != 2 || st.LocksLost != 2 || st.Received != 4 {
			t.Fatalf("stats %+v", st)
		}
	})
}

// TestSessionProcessorStateAndIDs: handlers read and write the session state through
// their context; with SessionIDs only those sessions are processed.
func TestSessionProcessorStateAndIDs(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sq := newSessionQueue(t, nil)
		sq.send(t, "mine", "1", "2", "3")
		sq.send(t, "other", "x")
		h := func(ctx context.Context, m *azservicebus.ReceivedMessage) error {
			s, ok := receiver.SessionFrom(ctx)
			if !ok || s.SessionID() != "mine" {
				return fmt.Errorf("session %v, %v", s, ok)
			}
			st, err := s.GetSessionState(ctx, nil)
			if err != nil {
				return err
			}
			return s.SetSessionState(ctx, append(st, m.Body...), nil)
		}
		p, stop := startSessions(t, sq, h, &receiver.SessionOptions{SessionIDs: []string{"mine"}})
		for sq.q.Stats().Completed < 3 {
			time.Sleep(10 * time.Millisecond)
		}
		time.Sleep(5 * time.Second) // the idle session is released and accepted again meanwhile
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		if got := string(sq.q.SessionState("mine")); got != "123" {
			t.Fatalf("state %q", got)
		}
		if n := sq.q.Counts().Active; n != 1 {
			t.Fatalf("the other session was touched: %d active", n)
		}
		if st := p.Stats(); st.SessionsAccepted < 2 || st.HandlerErrors != 0 {
			t.Fatalf("stats %+v", st)
		}
	})
}

// TestSessionProcessorBoundSharesSlots: with one slot and MaxMessagesPerSession, sessions
// take turns instead of the first one keeping the slot.
func TestSessionProcessorBoundSharesSlots(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sq := newSessionQueue(t, nil)
		for i := range 4 {
			for _, s := range []string{"a", "b", "c"} {
				sq.send(t, s, fmt.Sprintf("%s%d", s, i))
			}
		}
		var mu sync.Mutex
		var order []string
		h := func(ctx context.Context, m *azservicebus.ReceivedMessage) error {
			mu.Lock()
			order = append(order, sessionID(ctx))
			mu.Unlock()
			return nil
		}
		_, stop := startSessions(t, sq, h, &receiver.SessionOptions{MaxConcurrentSessions: 1, MaxMessagesPerSession: 2})
		waitDrained(t, sq.q)
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		if want := []string{"a", "a", "b", "b", "c", "c", "a", "a", "b", "b", "c", "c"}; !slices.Equal(order, want) {
			t.Fatalf("sessions in turn %v, want %v", order, want)
		}
	})
}

// TestSessionProcessorCloseIsGraceful: Close lets running handlers finish and releases
// every session at once; nothing is left locked and no goroutine remains.
func TestSessionProcessorCloseIsGraceful(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sq := newSessionQueue(t, nil)
		sq.send(t, "a", "1", "2")
		sq.send(t, "b", "1")
		started := make(chan struct{}, 2)
		h := func(ctx context.Context, m *azservicebus.ReceivedMessage) error {
			started <- struct{}{}
			time.Sleep(2 * time.Second)
			return nil
		}
		p, err := receiver.NewSessionProcessor(sq.ns.QueueSessionAcceptor("q", nil), h, nil)
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- p.Run(context.Background()) }()
		<-started
		<-started
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := p.Close(ctx); err != nil {
			t.Fatalf("Close: %v", err)
		}
		if err := <-done; err != nil {
			t.Fatalf("Run: %v", err)
		}
		if got := sq.q.Stats().Completed; got != 2 {
			t.Fatalf("completed %d, want the 2 running", got)
		}
		if c := sq.q.Counts(); c.Locked != 0 || c.Active != 1 {
			t.Fatalf("locked %d active %d", c.Locked, c.Active)
		}
		for _, s := range sq.q.Sessions() {
			if s.Locked {
				t.Fatalf("session %s still locked", s.ID)
			}
		}
		if err := p.Run(context.Background()); !errors.Is(err, receiver.ErrClosed) {
			t.Fatalf("Run after Close: %v", err)
		}
		synctest.Wait() // every goroutine of the processor has ended: the bubble would not exit otherwise
	})
}

func TestNewSessionProcessorErrors(t *testing.T) {
	sq := newSessionQueue(t, nil)
	acc := sq.ns.QueueSessionAcceptor("q", nil)
	h := func(context.Context, *azservicebus.ReceivedMessage) error { return nil }
	if _, err := receiver.NewSessionProcessor(nil, h, nil); !errors.Is(err, receiver.ErrNilReceiver) {
		t.Errorf("nil acceptor: %v", err)
	}
	if _, err := receiver.NewSessionProcessor(acc, nil, nil); !errors.Is(err, sbkit.ErrNilHandler) {
		t.Errorf("nil handler: %v", err)
	}
	for _, o := range []receiver.SessionOptions{
		{MaxConcurrentSessions: -1}, {MaxConcurrentCallsPerSession: -1}, {Options: receiver.Options{SettleTimeout: -1}},
		// What a SessionProcessor would ignore is refused.
		{Options: receiver.Options{MaxConcurrency: 4}},
		{Options: receiver.Options{PrefetchCount: 3}},
		{Options: receiver.Options{PrefetchCount: 3}, MaxConcurrentCallsPerSession: 1},
		{Options: receiver.Options{Hooks: []receiver.Hook{misspeltHook{}}}},
	} {
		if _, err := receiver.NewSessionProcessor(acc, h, &o); !errors.Is(err, receiver.ErrInvalidOptions) {
			t.Errorf("%+v: %v", o, err)
		}
	}
	for _, o := range []receiver.SessionOptions{
		{SessionIdleTimeout: -1}, {MaxMessagesPerSession: -1}, // no limit
		{Options: receiver.Options{DisablePrefetch: true}},
		{Options: receiver.Options{PrefetchCount: 3}, MaxConcurrentCallsPerSession: 2},
	} {
		if _, err := receiver.NewSessionProcessor(acc, h, &o); err != nil {
			t.Errorf("%+v: %v", o, err)
		}
	}
}

// TestSessionIdleTimeoutNegativeKeepsSession: a negative SessionIdleTimeout never releases
// a session for being idle: its later message is handled in the same session, accepted
// once (with the default, the session is released after a second without a message).
func TestSessionIdleTimeoutNegativeKeepsSession(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sq := newSessionQueue(t, nil)
		sq.send(t, "a", "1")
		h := func(context.Context, *azservicebus.ReceivedMessage) error { return nil }
		p, stop := startSessions(t, sq, h, &receiver.SessionOptions{MaxConcurrentSessions: 1, SessionIdleTimeout: -1})
		time.Sleep(time.Minute)
		sq.send(t, "a", "2")
		waitDrained(t, sq.q)
		st := p.Stats()
		if st.SessionsAccepted != 1 || st.SessionsReleased != 0 || st.Sessions != 1 {
			t.Errorf("stats %+v, want the one session held throughout", st)
		}
		if err := stop(); err != nil {
			t.Fatal(err)
		}
	})
}

// TestSessionProcessorRenewalLimitPerMessage: MaxAutoLockRenewalDuration bounds the time
// spent on one message, not the life of a busy session: a session whose messages each
// take less than the limit keeps its lock however long it is held.
func TestSessionProcessorRenewalLimitPerMessage(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sq := newSessionQueue(t, &sbtest.EntityOptions{LockDuration: 30 * time.Second})
		sq.send(t, "busy", "1", "2", "3", "4", "5")
		h := func(ctx context.Context, m *azservicebus.ReceivedMessage) error {
			select {
			case <-time.After(50 * time.Second):
				return nil
			case <-ctx.Done():
				return context.Cause(ctx)
			}
		}
		p, stop := startSessions(t, sq, h, &receiver.SessionOptions{Options: receiver.Options{MaxAutoLockRenewalDuration: time.Minute}})
		waitDrained(t, sq.q)
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		if st := p.Stats(); st.SessionLocksLost != 0 || st.Completed != 5 || st.SessionsAccepted != 1 {
			t.Fatalf("stats %+v", st)
		}
	})
}

// TestSessionProcessorAcceptErrors: a failed accept is reported with SourceAccept and
// retried; a permanent one (no such queue) ends Run with it.
func TestSessionProcessorAcceptErrors(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sq := newSessionQueue(t, nil)
		sq.send(t, "a", "1")
		sq.q.InjectFault(sbtest.Fault{Op: sbtest.OpAcceptSession, Count: 1})
		var mu sync.Mutex
		var sources []receiver.ErrorSource
		hook := receiver.ErrorHookFunc(func(_ context.Context, e *receiver.Error) {
			mu.Lock()
			sources = append(sources, e.Source)
			mu.Unlock()
		})
		h := func(context.Context, *azservicebus.ReceivedMessage) error { return nil }
		p, stop := startSessions(t, sq, h, &receiver.SessionOptions{MaxConcurrentSessions: 1, Options: receiver.Options{Hooks: []receiver.Hook{hook}}})
		waitDrained(t, sq.q)
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		if st := p.Stats(); st.AcceptErrors != 1 || !slices.Equal(sources, []receiver.ErrorSource{receiver.SourceAccept}) {
			t.Fatalf("accept errors %d, sources %v", st.AcceptErrors, sources)
		}

		missing, err := receiver.NewSessionProcessor(sq.ns.QueueSessionAcceptor("missing", nil), h, nil)
		if err != nil {
			t.Fatal(err)
		}
		var sbErr *azservicebus.Error
		if err := missing.Run(context.Background()); !errors.As(err, &sbErr) || sbErr.Code != azservicebus.CodeNotFound {
			t.Fatalf("Run on a missing queue: %v", err)
		}
	})
}

// TestSessionProcessorCloseByDeadline: handlers still running near Close's deadline are
// cancelled (cause ErrClosed) and their messages abandoned; Close returns by the deadline
// with its error, and the sessions are released.
func TestSessionProcessorCloseByDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sq := newSessionQueue(t, nil)
		sq.send(t, "a", "1")
		sq.send(t, "b", "1")
		causes := make(chan error, 2)
		h := func(ctx context.Context, m *azservicebus.ReceivedMessage) error {
			<-ctx.Done()
			causes <- context.Cause(ctx)
			return context.Cause(ctx)
		}
		p, err := receiver.NewSessionProcessor(sq.ns.QueueSessionAcceptor("q", nil), h, nil)
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- p.Run(context.Background()) }()
		for p.Stats().InFlight < 2 {
			time.Sleep(time.Millisecond)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 4*time.Second)
		defer cancel()
		start := time.Now()
		if err := p.Close(ctx); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Close: %v", err)
		}
		if took := time.Since(start); took > 4*time.Second {
			t.Fatalf("Close took %v", took)
		}
		<-done
		for range 2 {
			if cause := <-causes; !errors.Is(cause, receiver.ErrClosed) {
				t.Fatalf("cause %v", cause)
			}
		}
		if st := p.Stats(); st.Abandoned != 2 || st.Sessions != 0 || st.SessionsReleased != 2 {
			t.Fatalf("stats %+v", st)
		}
		if n := sq.q.Counts().Active; n != 2 {
			t.Fatalf("active %d, want both messages back", n)
		}
	})
}

// TestSessionProcessorReceiveAndDelete: in ReceiveAndDelete mode nothing is settled, so
// the end of a handler frees the session's window: every message of every session is
// handled, in order (the processor once stalled after each session's first message).
func TestSessionProcessorReceiveAndDelete(t *testing.T) {
	for _, calls := range []int{1, 3} {
		t.Run(fmt.Sprintf("calls-%d", calls), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				sq := newSessionQueue(t, nil)
				const sessions, per = 3, 5
				for i := range per {
					for s := range sessions {
						sq.send(t, fmt.Sprintf("s%d", s), fmt.Sprintf("s%d-%d", s, i))
					}
				}
				var mu sync.Mutex
				seen := map[string][]string{}
				var handled atomic.Int64
				h := func(ctx context.Context, m *azservicebus.ReceivedMessage) error {
					mu.Lock()
					id := sessionID(ctx)
					seen[id] = append(seen[id], m.MessageID)
					mu.Unlock()
					handled.Add(1)
					return nil
				}
				rad := azservicebus.ReceiveModeReceiveAndDelete
				p, err := receiver.NewSessionProcessor(sq.ns.QueueSessionAcceptor("q", &sbtest.SessionReceiverOptions{ReceiveMode: rad}), h,
					&receiver.SessionOptions{Options: receiver.Options{ReceiveMode: rad}, MaxConcurrentCallsPerSession: calls, SessionIdleTimeout: 100 * time.Millisecond})
				if err != nil {
					t.Fatal(err)
				}
				done := make(chan error, 1)
				go func() { done <- p.Run(context.Background()) }()
				deadline := time.Now().Add(time.Minute)
				for handled.Load() < sessions*per && time.Now().Before(deadline) {
					time.Sleep(10 * time.Millisecond)
				}
				time.Sleep(time.Second) // ten idle timeouts: every session is given up
				if n := p.Stats().Sessions; n != 0 {
					t.Errorf("%d sessions still held after they went idle", n)
				}
				if err := p.Close(context.Background()); err != nil {
					t.Fatal(err)
				}
				if err := <-done; err != nil {
					t.Fatal(err)
				}
				if n := handled.Load(); n != sessions*per {
					t.Fatalf("handled %d messages in a minute, want %d", n, sessions*per)
				}
				if calls == 1 {
					for s := range sessions {
						id := fmt.Sprintf("s%d", s)
						for i, got := range seen[id] {
							if want := fmt.Sprintf("%s-%d", id, i); got != want {
								t.Fatalf("session %s handled %v out of order", id, seen[id])
							}
						}
					}
				}
				if st := p.Stats(); st.Received != sessions*per || st.Handled != sessions*per || st.Completed != 0 {
					t.Errorf("stats %+v", st)
				}
			})
		})
	}
}

// TestSessionProcessorAcceptRetryLimit: a positive ReceiveRetry.MaxRetries ends Run with
// the last accept error after that many consecutive failed retries, as it ends a
// Processor's Run (not nil, which would say it was closed).
func TestSessionProcessorAcceptRetryLimit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sq := newSessionQueue(t, nil)
		sq.q.InjectFault(sbtest.Fault{Op: sbtest.OpAcceptSession}) // every accept, transient
		h := func(context.Context, *azservicebus.ReceivedMessage) error { return nil }
		p, err := receiver.NewSessionProcessor(sq.ns.QueueSessionAcceptor("q", nil), h, &receiver.SessionOptions{
			MaxConcurrentSessions: 1,
			Options:               receiver.Options{ReceiveRetry: sbkit.RetryOptions{MaxRetries: 2, RetryDelay: time.Second}},
		})
		if err != nil {
			t.Fatal(err)
		}
		if err := p.Run(context.Background()); !errors.Is(err, sbtest.TransientError) {
			t.Fatalf("Run = %v, want the transient accept error", err)
		}
		if n := p.Stats().AcceptErrors; n != 3 {
			t.Fatalf("%d accept errors, want 3 (the first attempt and 2 retries)", n)
		}
	})
}

// sessionID is the id of the session whose handler ctx belongs to.
func sessionID(ctx context.Context) string {
	s, ok := receiver.SessionFrom(ctx)
	if !ok {
		panic("not a session handler's context")
	}
	return s.SessionID()
}
