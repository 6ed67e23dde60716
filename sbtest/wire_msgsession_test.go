package sbtest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	goamqp "github.com/Azure/go-amqp"
	"github.com/sbkit/sbkit/sbtest/internal/amqp"
)

func sessionWire(t *testing.T) (*wired, *Entity) {
	t.Helper()
	w := newWire(t, &ServerOptions{Queues: map[string]*EntityOptions{
		"sq":    {RequiresSession: true},
		"plain": nil,
	}})
	q, _ := w.srv.Namespace().Entity("sq")
	return w, q
}

func sendSession(t *testing.T, s *azservicebus.Sender, session string, bodies ...string) {
	t.Helper()
	for _, b := range bodies {
		if err := s.SendMessage(wireCtx(t), &azservicebus.Message{Body: []byte(b), SessionID: &session}, nil); err != nil {
			t.Fatalf("send %s/%s: %v", session, b, err)
		}
	}
}

// TestServerSessionMisuse: the errors the SDK reports against the service come out the
// same (and none of them as a retryable CodeConnectionLost that hangs a test).
func TestServerSessionMisuse(t *testing.T) {
	t.Parallel()
	w, _ := sessionWire(t)
	ctx := wireCtx(t)
	var ae *goamqp.Error
	err := w.sender(t, "sq").SendMessage(ctx, &azservicebus.Message{Body: []byte("x")}, nil)
	if !errors.As(err, &ae) || ae.Condition != goamqp.ErrCondNotAllowed {
		t.Fatalf("send without session: %v", err)
	}
	// Source: SDK live test TestSessionReceiver_nonSessionReceiver.
	r := w.receiver(t, "sq", nil)
	_, err = r.ReceiveMessages(ctx, 1, nil)
	if !errors.As(err, &ae) || ae.Condition != goamqp.ErrCondNotAllowed || ae.Description != errNonSessionReceiver().(*goamqp.Error).Description {
		t.Fatalf("plain receiver: %v", err)
	}
	_, err = w.client.AcceptSessionForQueue(ctx, "plain", "s", nil)
	if !errors.As(err, &ae) || ae.Condition != goamqp.ErrCondNotAllowed {
		t.Fatalf("session receiver on a plain queue: %v", err)
	}
	_, err = w.client.AcceptSessionForQueue(ctx, "missing", "s", nil)
	var sbErr *azservicebus.Error
	if !errors.As(err, &sbErr) || sbErr.Code != azservicebus.CodeNotFound {
		t.Fatalf("missing queue: %v", err)
	}
	// Source: SDK live test TestSessionReceiver_acceptSessionButAlreadyLocked.
	first, err := w.client.AcceptSessionForQueue(ctx, "sq", "s1", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close(ctx)
	_, err = w.client.AcceptSessionForQueue(ctx, "sq", "s1", nil)
	if !errors.As(err, &ae) || ae.Condition != condSessionCannotBeLocked {
		t.Fatalf("second accept: %v", err)
	}
	// Source: SDK live test TestSessionReceiver_acceptNextSession_noSessionsExist.
	short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	_, err = w.client.AcceptNextSessionForQueue(short, "sq", nil)
	if !(errors.As(err, &sbErr) && sbErr.Code == azservicebus.CodeTimeout) && !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("accept next with none: %v", err)
	}
}

func TestServerSessionReceive(t *testing.T) {
	t.Parallel()
	w, q := sessionWire(t)
	ctx := wireCtx(t)
	s := w.sender(t, "sq")
	sendSession(t, s, "a", "a1", "a2", "a3")
	sendSession(t, s, "b", "b1")

	r, err := w.client.AcceptNextSessionForQueue(ctx, "sq", nil)
	if err != nil {
		t.Fatal(err)
	}
	if r.SessionID() != "a" {
		t.Fatalf("next session %q, want a", r.SessionID())
	}
	infos := q.Sessions()
	if d := r.LockedUntil().Sub(infos[0].LockedUntil); d < -time.Millisecond || d > time.Millisecond {
		t.Fatalf("LockedUntil %v, broker's %v", r.LockedUntil(), infos[0].LockedUntil)
	}
	msgs := receiveN(t, r, 3)
	if got := bodies(msgs); !slices.Equal(got, []string{"a1", "a2", "a3"}) {
		t.Fatalf("got %v", got)
	}
	if err := r.AbandonMessage(ctx, msgs[0], nil); err != nil {
		t.Fatal(err)
	}
	if err := r.DeferMessage(ctx, msgs[1], nil); err != nil {
		t.Fatal(err)
	}
	if err := r.CompleteMessage(ctx, msgs[2], nil); err != nil {
		t.Fatal(err)
	}
	again := receiveN(t, r, 1)[0]
	if string(again.Body) != "a1" || again.DeliveryCount != 2 {
		t.Fatalf("redelivered %q count %d", again.Body, again.DeliveryCount)
	}
	if err := r.CompleteMessage(ctx, again, nil); err != nil {
		t.Fatal(err)
	}
	// Peek and receive-deferred go through $management with the session's link.
	peeked, err := r.PeekMessages(ctx, 10, &azservicebus.PeekMessagesOptions{FromSequenceNumber: new(int64)})
	if err != nil || !slices.Equal(bodies(peeked), []string{"a2"}) {
		t.Fatalf("peek %v, %v", bodies(peeked), err)
	}
	d, err := r.ReceiveDeferredMessages(ctx, []int64{*msgs[1].SequenceNumber}, nil)
	if err != nil || len(d) != 1 {
		t.Fatalf("deferred %v, %v", d, err)
	}
	if err := r.CompleteMessage(ctx, d[0], nil); err != nil {
		t.Fatal(err)
	}
	// State and lock renewal.
	if st, err := r.GetSessionState(ctx, nil); err != nil || st != nil {
		t.Fatalf("state %q, %v", st, err)
	}
	if err := r.SetSessionState(ctx, []byte("v1"), nil); err != nil {
		t.Fatal(err)
	}
	if st, err := r.GetSessionState(ctx, nil); err != nil || string(st) != "v1" {
		t.Fatalf("state %q, %v", st, err)
	}
	before := r.LockedUntil()
	time.Sleep(5 * time.Millisecond)
	if err := r.RenewSessionLock(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if !r.LockedUntil().After(before) {
		t.Fatalf("renewed LockedUntil %v, before %v", r.LockedUntil(), before)
	}
	if err := r.SetSessionState(ctx, nil, nil); err != nil {
		t.Fatal(err)
	}
	if err := r.Close(ctx); err != nil {
		t.Fatal(err)
	}
	// Close released the session: b is next, and a can be accepted by id again.
	eventually(t, "session a to be released", func() bool {
		for _, s := range q.Sessions() {
			if s.Locked {
				return false
			}
		}
		return true
	})
	rb, err := w.client.AcceptSessionForQueue(ctx, "sq", "b", &azservicebus.SessionReceiverOptions{ReceiveMode: azservicebus.ReceiveModeReceiveAndDelete})
	if err != nil {
		t.Fatal(err)
	}
	if got := bodies(receiveN(t, rb, 1)); !slices.Equal(got, []string{"b1"}) {
		t.Fatalf("b got %v", got)
	}
	if q.Counts().Active != 0 || len(q.Sessions()) != 1 {
		t.Fatalf("active %d sessions %+v", q.Counts().Active, q.Sessions())
	}
	w.oneConnection(t)
}

// TestServerSessionLockLost: after the broker loses the session lock and another receiver
// takes the session, the first receiver's calls fail. The broker answers them with a lost
// lock; the SDK treats a lost session lock as a link to recover, re-accepts the session by
// id, and reports the refusal of that: com.microsoft:session-cannot-be-locked.
func TestServerSessionLockLost(t *testing.T) {
	t.Parallel()
	w, q := sessionWire(t)
	ctx := wireCtx(t)
	sendSession(t, w.sender(t, "sq"), "a", "a1")
	r, err := w.client.AcceptSessionForQueue(ctx, "sq", "a", nil)
	if err != nil {
		t.Fatal(err)
	}
	m := receiveN(t, r, 1)[0]
	if !q.ExpireSessionLock("a") {
		t.Fatal("session was not locked")
	}
	other, err := w.srv.Namespace().AcceptSessionForQueue(ctx, "sq", "a", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close(ctx)
	var ae *goamqp.Error
	if err := r.RenewSessionLock(ctx, nil); !errors.As(err, &ae) || ae.Condition != condSessionCannotBeLocked {
		t.Fatalf("renew after loss: %v", err)
	}
	if err := r.CompleteMessage(ctx, m, nil); !errors.As(err, &ae) || ae.Condition != condSessionCannotBeLocked {
		t.Fatalf("complete after loss: %v", err)
	}
	if got := receiveOneFrom(t, other, 1); string(got[0].Body) != "a1" || got[0].DeliveryCount != 2 {
		t.Fatalf("the new holder got %q (count %d)", got[0].Body, got[0].DeliveryCount)
	}
}

// TestServerSessionDetachWhileAccepting: a client may detach (or end its session) while
// the server waits for the next available session; the link goes away and the
// connection keeps working.
func TestServerSessionDetachWhileAccepting(t *testing.T) {
	t.Parallel()
	w, _ := sessionWire(t)
	c := dialRaw(t, w.srv)
	c.open()
	c.beginSession(100)
	attach := func(handle uint32) {
		c.writeFrame(amqp.FrameTypeAMQP, 0, &amqp.Attach{Name: fmt.Sprint("waiting", handle), Handle: handle, Role: amqp.RoleReceiver,
			Source: &amqp.Source{Address: "sq", Filter: amqp.Map{{Key: sessionFilterName,
				Value: &amqp.Described{Descriptor: sessionFilterName, Value: nil}}}},
			Target:     &amqp.Target{Address: "raw"},
			Properties: amqp.Map{{Key: propAcceptTimeout, Value: int64(time.Minute / time.Millisecond)}}}, nil)
	}
	attach(1)
	c.writeFrame(amqp.FrameTypeAMQP, 0, &amqp.Detach{Handle: 1, Closed: true}, nil)
	if d, ok := c.readFrame().Body.(*amqp.Detach); !ok || d.Handle != 1 || d.Error != nil {
		t.Fatalf("answer to the detach of a waiting session link: want a detach of handle 1 without error, got %+v", d)
	}
	attach(2)
	c.writeFrame(amqp.FrameTypeAMQP, 0, &amqp.End{}, nil)
	if _, ok := c.readFrame().Body.(*amqp.End); !ok {
		t.Fatal("no end after ending a session with a waiting session link")
	}
	c.beginSession(100) // the connection still works
}
