package sbtest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	goamqp "github.com/Azure/go-amqp"
)

// sdkSessionReceiver is every method of *azservicebus.SessionReceiver: sbtest's session
// receiver must offer them all, with the same signatures.
type sdkSessionReceiver interface {
	AbandonMessage(ctx context.Context, message *azservicebus.ReceivedMessage, options *azservicebus.AbandonMessageOptions) error
	Close(ctx context.Context) error
	CompleteMessage(ctx context.Context, message *azservicebus.ReceivedMessage, options *azservicebus.CompleteMessageOptions) error
	DeadLetterMessage(ctx context.Context, message *azservicebus.ReceivedMessage, options *azservicebus.DeadLetterOptions) error
	DeferMessage(ctx context.Context, message *azservicebus.ReceivedMessage, options *azservicebus.DeferMessageOptions) error
	GetSessionState(ctx context.Context, options *azservicebus.GetSessionStateOptions) ([]byte, error)
	LockedUntil() time.Time
	PeekMessages(ctx context.Context, maxMessageCount int, options *azservicebus.PeekMessagesOptions) ([]*azservicebus.ReceivedMessage, error)
	ReceiveDeferredMessages(ctx context.Context, sequenceNumbers []int64, options *azservicebus.ReceiveDeferredMessagesOptions) ([]*azservicebus.ReceivedMessage, error)
	ReceiveMessages(ctx context.Context, maxMessages int, options *azservicebus.ReceiveMessagesOptions) ([]*azservicebus.ReceivedMessage, error)
	RenewSessionLock(ctx context.Context, options *azservicebus.RenewSessionLockOptions) error
	SessionID() string
	SetSessionState(ctx context.Context, state []byte, options *azservicebus.SetSessionStateOptions) error
}

var (
	_ sdkSessionReceiver = (*azservicebus.SessionReceiver)(nil)
	_ sdkSessionReceiver = (*SessionReceiver)(nil)
)

type sessionFixture struct {
	ns *Namespace
	q  *Entity
	s  *Sender
}

func newSessionFixture(t *testing.T, opts *EntityOptions) *sessionFixture {
	t.Helper()
	var o EntityOptions
	if opts != nil {
		o = *opts
	}
	o.RequiresSession = true
	ns := NewTestNamespace(t, &NamespaceOptions{Queues: map[string]*EntityOptions{"q": &o}})
	q, _ := ns.Entity("q")
	s, err := ns.NewSender("q", nil)
	if err != nil {
		t.Fatal(err)
	}
	return &sessionFixture{ns: ns, q: q, s: s}
}

func (f *sessionFixture) send(t *testing.T, session string, bodies ...string) {
	t.Helper()
	for _, b := range bodies {
		m := &azservicebus.Message{Body: []byte(b), SessionID: &session}
		if err := f.s.SendMessage(context.Background(), m, nil); err != nil {
			t.Fatalf("send %q/%q: %v", session, b, err)
		}
	}
}

func (f *sessionFixture) accept(t *testing.T, id string) *SessionReceiver {
	t.Helper()
	sr, err := f.ns.AcceptSessionForQueue(context.Background(), "q", id, nil)
	if err != nil {
		t.Fatalf("accept %q: %v", id, err)
	}
	return sr
}

func requireCode(t *testing.T, err error, code azservicebus.Code) {
	t.Helper()
	var sbErr *azservicebus.Error
	if !errors.As(err, &sbErr) || sbErr.Code != code {
		t.Fatalf("err = %v, want code %s", err, code)
	}
}

func requireCondition(t *testing.T, err error, cond goamqp.ErrCond) *goamqp.Error {
	t.Helper()
	var ae *goamqp.Error
	if !errors.As(err, &ae) || ae.Condition != cond {
		t.Fatalf("err = %v, want *amqp.Error %s", err, cond)
	}
	return ae
}

func TestSessionEntityRefusesMisuse(t *testing.T) {
	ctx := context.Background()
	f := newSessionFixture(t, nil)
	// Source: service error "The SessionId was not set on a message" (Azure/azure-sdk-for-python#738).
	err := f.s.SendMessage(ctx, msg("no session"), nil)
	requireCondition(t, err, goamqp.ErrCondNotAllowed)
	if f.q.Stats().Sent != 0 {
		t.Fatal("a refused message was stored")
	}
	// Source: SDK live test TestSessionReceiver_nonSessionReceiver.
	r, err := f.ns.NewReceiverForQueue("q", nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = r.ReceiveMessages(ctx, 1, nil)
	ae := requireCondition(t, err, goamqp.ErrCondNotAllowed)
	if ae.Description != "It is not possible for an entity that requires sessions to create a non-sessionful message receiver." {
		t.Fatalf("description %q", ae.Description)
	}
	_, err = r.PeekMessages(ctx, 1, nil)
	requireCondition(t, err, goamqp.ErrCondNotAllowed)

	plain, _ := f.ns.NewQueue("plain", nil)
	_ = plain
	_, err = f.ns.AcceptSessionForQueue(ctx, "plain", "s", nil)
	requireCondition(t, err, goamqp.ErrCondNotAllowed)
	_, err = f.ns.AcceptNextSessionForQueue(ctx, "plain", nil)
	requireCondition(t, err, goamqp.ErrCondNotAllowed)
	_, err = f.ns.AcceptSessionForQueue(ctx, "missing", "s", nil)
	requireCode(t, err, azservicebus.CodeNotFound)

	// The dead-letter queue of a session queue is read by plain receivers.
	f.send(t, "a", "x")
	sr := f.accept(t, "a")
	m := receiveOneFrom(t, sr, 1)[0]
	if err := sr.DeadLetterMessage(ctx, m, nil); err != nil {
		t.Fatal(err)
	}
	dlq, _ := f.ns.NewReceiverForQueue("q", &ReceiverOptions{SubQueue: azservicebus.SubQueueDeadLetter})
	if got := receiveOneFrom(t, dlq, 1)[0]; string(got.Body) != "x" || *got.SessionID != "a" {
		t.Fatalf("dead letter %q", got.Body)
	}
}

func TestAcceptSessionByIDLocksIt(t *testing.T) {
	ctx := context.Background()
	f := newSessionFixture(t, nil)
	// A session with no messages can be accepted (it is locked even so).
	sr := f.accept(t, "empty")
	if sr.SessionID() != "empty" || sr.LockedUntil().IsZero() {
		t.Fatalf("id %q lockedUntil %v", sr.SessionID(), sr.LockedUntil())
	}
	// Source: SDK live test TestSessionReceiver_acceptSessionButAlreadyLocked.
	_, err := f.ns.AcceptSessionForQueue(ctx, "q", "empty", nil)
	requireCondition(t, err, condSessionCannotBeLocked)
	// Messages sent afterwards reach the holder.
	f.send(t, "empty", "later")
	if got := receiveOneFrom(t, sr, 1)[0]; string(got.Body) != "later" {
		t.Fatalf("got %q", got.Body)
	}
	if err := sr.Close(ctx); err != nil {
		t.Fatal(err)
	}
	// Close releases the session without counting the delivery.
	sr2 := f.accept(t, "empty")
	if got := receiveOneFrom(t, sr2, 1)[0]; got.DeliveryCount != 1 {
		t.Fatalf("delivery count %d after close, want 1", got.DeliveryCount)
	}
	if _, err := sr.ReceiveMessages(ctx, 1, nil); err == nil {
		t.Fatal("closed receiver received")
	}
}

// receiveOneFrom receives once, from either receiver kind.
func receiveOneFrom(t *testing.T, r interface {
	ReceiveMessages(context.Context, int, *azservicebus.ReceiveMessagesOptions) ([]*azservicebus.ReceivedMessage, error)
}, max int) []*azservicebus.ReceivedMessage {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	msgs, err := r.ReceiveMessages(ctx, max, nil)
	if err != nil {
		t.Fatal(err)
	}
	return msgs
}

func TestSessionMessagesInOrderToOneReceiver(t *testing.T) {
	ctx := context.Background()
	f := newSessionFixture(t, nil)
	f.send(t, "a", "a1")
	f.send(t, "b", "b1")
	f.send(t, "a", "a2", "a3")
	f.send(t, "b", "b2")

	// The next session is the one whose oldest available message is oldest.
	ra, err := f.ns.AcceptNextSessionForQueue(ctx, "q", nil)
	if err != nil || ra.SessionID() != "a" {
		t.Fatalf("next = %v, %v; want a", ra, err)
	}
	rb, err := f.ns.AcceptNextSessionForQueue(ctx, "q", nil)
	if err != nil || rb.SessionID() != "b" {
		t.Fatalf("next = %v, %v; want b", rb, err)
	}
	got := receiveOneFrom(t, ra, 10)
	if !slices.Equal(bodies(got), []string{"a1", "a2", "a3"}) {
		t.Fatalf("session a got %v", bodies(got))
	}
	// Abandon puts a message back at the head of its session.
	if err := ra.AbandonMessage(ctx, got[1], nil); err != nil {
		t.Fatal(err)
	}
	if err := ra.AbandonMessage(ctx, got[0], nil); err != nil {
		t.Fatal(err)
	}
	again := receiveOneFrom(t, ra, 10)
	if !slices.Equal(bodies(again), []string{"a1", "a2"}) || again[0].DeliveryCount != 2 {
		t.Fatalf("after abandon: %v (count %d)", bodies(again), again[0].DeliveryCount)
	}
	if got := bodies(receiveOneFrom(t, rb, 10)); !slices.Equal(got, []string{"b1", "b2"}) {
		t.Fatalf("session b got %v", got)
	}
	for _, m := range append(again, got[2]) {
		if err := ra.CompleteMessage(ctx, m, nil); err != nil {
			t.Fatal(err)
		}
	}
	// Settling a message of another session's receiver is a lost lock.
	requireCode(t, rb.CompleteMessage(ctx, again[0], nil), azservicebus.CodeLockLost)
}

func TestAcceptNextSessionWaitsThenTimesOut(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newSessionFixture(t, nil)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		start := time.Now()
		// Source: SDK live test TestSessionReceiver_acceptNextSession_noSessionsExist.
		_, err := f.ns.AcceptNextSessionForQueue(ctx, "q", nil)
		requireCode(t, err, azservicebus.CodeTimeout)
		if time.Since(start) != 10*time.Second {
			t.Fatalf("waited %v", time.Since(start))
		}
		// Without a deadline it waits the service's minute.
		start = time.Now()
		_, err = f.ns.AcceptNextSessionForQueue(context.Background(), "q", nil)
		requireCode(t, err, azservicebus.CodeTimeout)
		if time.Since(start) != DefaultAcceptNextSessionTimeout {
			t.Fatalf("waited %v", time.Since(start))
		}
		// A message arriving wakes the waiter; a scheduled one wakes it at its time.
		go func() {
			time.Sleep(3 * time.Second)
			_, _ = f.s.ScheduleMessages(context.Background(), []*azservicebus.Message{{SessionID: ptr("late")}}, time.Now().Add(2*time.Second), nil)
		}()
		start = time.Now()
		sr, err := f.ns.AcceptNextSessionForQueue(context.Background(), "q", nil)
		if err != nil || sr.SessionID() != "late" || time.Since(start) != 5*time.Second {
			t.Fatalf("accepted %v after %v: %v", sr, time.Since(start), err)
		}
		// A cancelled ctx is not a timeout.
		cctx, ccancel := context.WithCancel(context.Background())
		ccancel()
		if _, err := f.ns.AcceptNextSessionForQueue(cctx, "q", nil); !errors.Is(err, context.Canceled) {
			t.Fatalf("err = %v", err)
		}
	})
}

func TestSessionLockExpiryAndRenewal(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		f := newSessionFixture(t, &EntityOptions{LockDuration: 30 * time.Second})
		f.send(t, "a", "a1", "a2")
		sr := f.accept(t, "a")
		msgs := receiveOneFrom(t, sr, 1)
		if !msgs[0].LockedUntil.Equal(sr.LockedUntil()) {
			t.Fatalf("message lock %v, session lock %v", msgs[0].LockedUntil, sr.LockedUntil())
		}
		// Renewal past the lock duration keeps the session and its message locks.
		for range 4 {
			time.Sleep(20 * time.Second)
			if err := sr.RenewSessionLock(ctx, nil); err != nil {
				t.Fatal(err)
			}
		}
		if want := time.Now().Add(30 * time.Second); !sr.LockedUntil().Equal(want) {
			t.Fatalf("lockedUntil %v, want %v", sr.LockedUntil(), want)
		}
		if err := sr.CompleteMessage(ctx, msgs[0], nil); err != nil {
			t.Fatalf("complete after 80s of renewals: %v", err)
		}
		held := receiveOneFrom(t, sr, 1)[0]
		// Without renewal the session lock expires: everything is lock-lost and the
		// session, with its message counted, goes to the next receiver.
		time.Sleep(30 * time.Second)
		requireCode(t, sr.CompleteMessage(ctx, held, nil), azservicebus.CodeLockLost)
		requireCode(t, sr.RenewSessionLock(ctx, nil), azservicebus.CodeLockLost)
		_, err := sr.ReceiveMessages(ctx, 1, nil)
		requireCode(t, err, azservicebus.CodeLockLost)
		_, err = sr.GetSessionState(ctx, nil)
		requireCode(t, err, azservicebus.CodeLockLost)
		if st := f.q.Stats(); st.SessionLocksExpired != 1 || st.SessionLocksRenewed != 4 || st.SessionsAccepted != 1 {
			t.Fatalf("stats %+v", st)
		}
		next, err := f.ns.AcceptNextSessionForQueue(ctx, "q", nil)
		if err != nil {
			t.Fatal(err)
		}
		if m := receiveOneFrom(t, next, 5)[0]; string(m.Body) != "a2" || m.DeliveryCount != 2 {
			t.Fatalf("redelivered %q count %d", m.Body, m.DeliveryCount)
		}
		// A blocked receive wakes at the lock's expiry with CodeLockLost.
		start := time.Now()
		_, err = next.ReceiveMessages(ctx, 1, nil)
		requireCode(t, err, azservicebus.CodeLockLost)
		if time.Since(start) != 30*time.Second {
			t.Fatalf("woke after %v", time.Since(start))
		}
		if f.q.ExpireSessionLock("a") {
			t.Fatal("ExpireSessionLock on an unlocked session reported a lock")
		}
	})
}

func TestSessionLockExpiryDeadLettersAfterMaxDeliveries(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newSessionFixture(t, &EntityOptions{LockDuration: time.Second, MaxDeliveryCount: 2})
		f.send(t, "a", "poison")
		for range 2 {
			sr := f.accept(t, "a")
			receiveOneFrom(t, sr, 1)
			if !f.q.ExpireSessionLock("a") {
				t.Fatal("session was not locked")
			}
		}
		if f.q.Counts().DeadLetter != 1 {
			t.Fatalf("dead letters %d", f.q.Counts().DeadLetter)
		}
	})
}

func TestSessionStateRoundTrip(t *testing.T) {
	ctx := context.Background()
	f := newSessionFixture(t, nil)
	sr := f.accept(t, "a")
	if st, err := sr.GetSessionState(ctx, nil); err != nil || st != nil {
		t.Fatalf("initial state %q, %v", st, err)
	}
	state := []byte("step-1")
	if err := sr.SetSessionState(ctx, state, nil); err != nil {
		t.Fatal(err)
	}
	state[0] = 'X' // the stored state is a copy
	if st, _ := sr.GetSessionState(ctx, nil); string(st) != "step-1" {
		t.Fatalf("state %q", st)
	}
	_ = sr.Close(ctx)
	// The state outlives the lock and the session's messages, and shows in inspection.
	if got := f.q.Sessions(); len(got) != 1 || got[0].ID != "a" || string(got[0].State) != "step-1" || got[0].Locked {
		t.Fatalf("sessions %+v", got)
	}
	sr = f.accept(t, "a")
	if st, _ := sr.GetSessionState(ctx, nil); string(st) != "step-1" {
		t.Fatalf("state after re-accept %q", st)
	}
	if err := sr.SetSessionState(ctx, nil, nil); err != nil {
		t.Fatal(err)
	}
	_ = sr.Close(ctx)
	// A session with no messages, no state and no lock is forgotten.
	if got := f.q.Sessions(); len(got) != 0 {
		t.Fatalf("sessions %+v", got)
	}
}

func TestSessionDeferPeekAndInspection(t *testing.T) {
	ctx := context.Background()
	f := newSessionFixture(t, nil)
	f.send(t, "a", "a1", "a2")
	f.send(t, "b", "b1")
	sr := f.accept(t, "a")
	m := receiveOneFrom(t, sr, 1)[0]
	if err := sr.DeferMessage(ctx, m, nil); err != nil {
		t.Fatal(err)
	}
	// Peek sees the session's messages only, deferred ones included.
	peeked, err := sr.PeekMessages(ctx, 10, &azservicebus.PeekMessagesOptions{FromSequenceNumber: ptr(int64(0))})
	if err != nil || !slices.Equal(bodies(peeked), []string{"a1", "a2"}) {
		t.Fatalf("peek %v, %v", bodies(peeked), err)
	}
	// Another session's receiver cannot receive a's deferred message.
	rb := f.accept(t, "b")
	if got, err := rb.ReceiveDeferredMessages(ctx, []int64{*m.SequenceNumber}, nil); code(err) != azservicebus.CodeNotFound || len(got) != 0 {
		t.Fatalf("other session got %v, %v; want CodeNotFound", bodies(got), err)
	}
	d, err := sr.ReceiveDeferredMessages(ctx, []int64{*m.SequenceNumber}, nil)
	if err != nil || len(d) != 1 || d[0].State != azservicebus.MessageStateDeferred {
		t.Fatalf("deferred %v, %v", d, err)
	}
	if err := sr.CompleteMessage(ctx, d[0], nil); err != nil {
		t.Fatal(err)
	}
	want := []SessionInfo{
		{ID: "a", Messages: 1, Active: 1, Locked: true, LockedUntil: sr.LockedUntil()},
		{ID: "b", Messages: 1, Active: 1, Locked: true, LockedUntil: rb.LockedUntil()},
	}
	if got := f.q.Sessions(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("sessions\n got %+v\nwant %+v", got, want)
	}
	// The counts see the sessions' available messages too.
	if c := f.q.Counts(); c != (Counts{Active: 2, Size: c.Size}) || c.Size == 0 {
		t.Fatalf("counts %+v, want 2 active", c)
	}
}

func TestSessionTTLAndReceiveAndDelete(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		f := newSessionFixture(t, &EntityOptions{DefaultTTL: time.Minute})
		f.send(t, "a", "old")
		time.Sleep(2 * time.Minute)
		f.send(t, "a", "new")
		sr, err := f.ns.AcceptSessionForQueue(ctx, "q", "a", &SessionReceiverOptions{ReceiveMode: azservicebus.ReceiveModeReceiveAndDelete})
		if err != nil {
			t.Fatal(err)
		}
		if got := bodies(receiveOneFrom(t, sr, 5)); !slices.Equal(got, []string{"new"}) {
			t.Fatalf("got %v", got)
		}
		_ = sr.Close(ctx)
		if got := f.q.Sessions(); len(got) != 0 {
			t.Fatalf("sessions %+v", got)
		}
	})
}

func TestSessionSubscription(t *testing.T) {
	ctx := context.Background()
	ns := NewNamespace(nil)
	topic, _ := ns.NewTopic("t", nil)
	if _, err := topic.NewSubscription("s", &EntityOptions{RequiresSession: true}); err != nil {
		t.Fatal(err)
	}
	snd, _ := ns.NewSender("t", nil)
	requireCondition(t, snd.SendMessage(ctx, msg("x"), nil), goamqp.ErrCondNotAllowed)
	if err := snd.SendMessage(ctx, &azservicebus.Message{Body: []byte("y"), SessionID: ptr("k")}, nil); err != nil {
		t.Fatal(err)
	}
	sr, err := ns.AcceptNextSessionForSubscription(ctx, "t", "s", nil)
	if err != nil || sr.SessionID() != "k" {
		t.Fatalf("%v %v", sr, err)
	}
	if got := bodies(receiveOneFrom(t, sr, 1)); !slices.Equal(got, []string{"y"}) {
		t.Fatalf("got %v", got)
	}
}

func TestSessionFaults(t *testing.T) {
	ctx := context.Background()
	f := newSessionFixture(t, nil)
	f.q.InjectFault(Fault{Op: OpAcceptSession, Count: 1})
	_, err := f.ns.AcceptSessionForQueue(ctx, "q", "a", nil)
	requireCode(t, err, azservicebus.CodeConnectionLost)
	sr := f.accept(t, "a") // the failed accept locked nothing
	f.q.InjectFault(Fault{Op: OpSessionState, Count: 1})
	requireCode(t, sr.SetSessionState(ctx, []byte("x"), nil), azservicebus.CodeConnectionLost)
	if st, err := sr.GetSessionState(ctx, nil); err != nil || st != nil {
		t.Fatalf("state %q %v", st, err)
	}
	// An injected lock loss is real: the broker lets the session go too.
	f.q.InjectFault(Fault{Op: OpRenewSessionLock, Count: 1, Err: errLockLost()})
	requireCode(t, sr.RenewSessionLock(ctx, nil), azservicebus.CodeLockLost)
	_, err = sr.GetSessionState(ctx, nil)
	requireCode(t, err, azservicebus.CodeLockLost)
	f.accept(t, "a")
}

// The session indexes (available sessions by their oldest message, locked sessions by
// lock expiry) hand sessions out as a walk over every session did: oldest first, never a
// locked one, each back when its own lock expires (a renewed one later), with the
// available count kept over every session.
func TestSessionIndexOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		f := newSessionFixture(t, &EntityOptions{LockDuration: 30 * time.Second})
		for i := range 10 {
			f.send(t, fmt.Sprint("s", i), fmt.Sprint("m", i))
		}
		next := func(want string) *SessionReceiver {
			t.Helper()
			sr, err := f.ns.AcceptNextSessionForQueue(ctx, "q", nil)
			if err != nil {
				t.Fatal(err)
			}
			if sr.SessionID() != want {
				t.Fatalf("next session %q, want %q", sr.SessionID(), want)
			}
			return sr
		}
		s0, _, _ := next("s0"), next("s1"), next("s2")
		f.send(t, "s0", "late") // a locked session with a new message stays locked
		receiveOneFrom(t, s0, 1)
		if n := f.q.Counts().Active; n != 10 { // messages of locked sessions wait available
			t.Fatalf("%d active, want 10", n)
		}
		time.Sleep(20 * time.Second)
		if err := s0.RenewSessionLock(ctx, nil); err != nil {
			t.Fatal(err)
		}
		time.Sleep(10 * time.Second) // s1 and s2 expire, s0 does not
		next("s1")
		next("s2")
		next("s3")
		_, err := f.ns.AcceptSessionForQueue(ctx, "q", "s0", nil)
		requireCondition(t, err, condSessionCannotBeLocked)
		time.Sleep(20 * time.Second) // s0's renewed lock expires; s1-s3's, taken at 30 s, not yet
		next("s0")
		if st := f.q.Stats(); st.SessionLocksExpired != 3 {
			t.Fatalf("%d session locks expired, want 3", st.SessionLocksExpired)
		}
		if n := f.q.Counts().Active; n != 11 {
			t.Fatalf("%d active, want 11", n)
		}
	})
}
