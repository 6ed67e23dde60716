package sbtest

import (
	"context"
	"errors"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	goamqp "github.com/Azure/go-amqp"
)

// TestDeletedEntityRefusesOpenClients: Senders and Receivers opened before their entity
// was deleted fail with CodeNotFound, and a queue re-created with the same name is a new,
// empty queue that the old clients never reach.
func TestDeletedEntityRefusesOpenClients(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ns := NewNamespace(nil)
	if _, err := ns.NewQueue("q", nil); err != nil {
		t.Fatal(err)
	}
	topic, err := ns.NewTopic("t", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := topic.NewSubscription("s", nil); err != nil {
		t.Fatal(err)
	}
	qs, _ := ns.NewSender("q", nil)
	qr, _ := ns.NewReceiverForQueue("q", nil)
	ts, _ := ns.NewSender("t", nil)
	sr, _ := ns.NewReceiverForSubscription("t", "s", nil)
	for _, s := range []*Sender{qs, ts} {
		if err := s.SendMessage(ctx, &azservicebus.Message{Body: []byte("before")}, nil); err != nil {
			t.Fatal(err)
		}
	}
	held := receiveN(t, qr, 1)[0]

	if err := ns.DeleteQueue("q"); err != nil {
		t.Fatal(err)
	}
	if err := ns.DeleteTopic("t"); err != nil {
		t.Fatal(err)
	}
	q2, err := ns.NewQueue("q", nil)
	if err != nil {
		t.Fatal(err)
	}
	wantNotFound := func(what string, err error) {
		t.Helper()
		var sbErr *azservicebus.Error
		if !errors.As(err, &sbErr) || sbErr.Code != azservicebus.CodeNotFound {
			t.Fatalf("%s after the delete: %v, want CodeNotFound", what, err)
		}
	}
	for name, s := range map[string]*Sender{"queue sender": qs, "topic sender": ts} {
		wantNotFound(name, s.SendMessage(ctx, &azservicebus.Message{Body: []byte("after")}, nil))
	}
	for name, r := range map[string]*Receiver{"queue receiver": qr, "subscription receiver": sr} {
		_, err := r.ReceiveMessages(ctx, 1, nil)
		wantNotFound(name, err)
	}
	wantNotFound("complete", qr.CompleteMessage(ctx, held, nil))
	if n := q2.Counts().Active; n != 0 {
		t.Fatalf("the re-created queue has %d messages, want none", n)
	}
}

// TestServerDeleteDetachesLinks: deleting an entity detaches the links attached to it
// with amqp:not-found, the service's error for an entity that does not exist; the links
// opened before the delete reach neither the deleted queue nor a queue re-created with
// its name, while new links reach the new queue.
func TestServerDeleteDetachesLinks(t *testing.T) {
	t.Parallel()
	srv := newWire(t, &ServerOptions{Queues: map[string]*EntityOptions{"q": nil}}).srv
	ns := srv.Namespace()
	old, _ := ns.Entity("q")
	_, sess := amqpSession(t, srv)
	ctx := wireCtx(t)
	snd, err := sess.NewSender(ctx, "q", nil)
	if err != nil {
		t.Fatal(err)
	}
	rcv, err := sess.NewReceiver(ctx, "q", &goamqp.ReceiverOptions{Credit: 10})
	if err != nil {
		t.Fatal(err)
	}
	if err := snd.Send(ctx, goamqp.NewMessage([]byte("before")), nil); err != nil {
		t.Fatal(err)
	}
	if m, err := rcv.Receive(ctx, nil); err != nil || string(m.GetData()) != "before" {
		t.Fatalf("received %v, %v", m, err)
	}

	if err := ns.DeleteQueue("q"); err != nil {
		t.Fatal(err)
	}
	q2, err := ns.NewQueue("q", nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = rcv.Receive(ctx, nil)
	wantLinkNotFound(t, "receive", err)
	wantLinkNotFound(t, "send", snd.Send(ctx, goamqp.NewMessage([]byte("after")), nil))
	if n := old.Stats().Sent; n != 1 {
		t.Fatalf("the deleted queue stored %d messages, want only the one sent before the delete", n)
	}

	// New links reach the new queue.
	snd2, err := sess.NewSender(ctx, "q", nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := snd2.Send(ctx, goamqp.NewMessage([]byte("new")), nil); err != nil {
		t.Fatal(err)
	}
	rcv2, err := sess.NewReceiver(ctx, "q", &goamqp.ReceiverOptions{Credit: 10})
	if err != nil {
		t.Fatal(err)
	}
	if m, err := rcv2.Receive(ctx, nil); err != nil || string(m.GetData()) != "new" {
		t.Fatalf("received %v, %v from the new queue", m, err)
	}
	if st := q2.Stats(); st.Sent != 1 {
		t.Fatalf("the new queue stored %d messages, want 1", st.Sent)
	}
}

// TestServerDeleteSDKClient: the SDK's sender and receiver report the deletion of their
// queue without retrying (amqp:not-found is fatal to them: azservicebus
// internal/errors.go); the receiver reaches a queue re-created with the same name on its
// next call, as a new sender does.
func TestServerDeleteSDKClient(t *testing.T) {
	t.Parallel()
	w := newWire(t, &ServerOptions{Queues: map[string]*EntityOptions{"q": nil}})
	ns := w.srv.Namespace()
	ctx := wireCtx(t)
	s := w.sender(t, "q")
	r := w.receiver(t, "q", &azservicebus.ReceiverOptions{ReceiveMode: azservicebus.ReceiveModeReceiveAndDelete})
	if err := s.SendMessage(ctx, &azservicebus.Message{Body: []byte("before")}, nil); err != nil {
		t.Fatal(err)
	}
	receiveN(t, r, 1)
	if err := ns.DeleteQueue("q"); err != nil {
		t.Fatal(err)
	}
	wantLinkNotFound(t, "send", s.SendMessage(ctx, &azservicebus.Message{Body: []byte("lost")}, nil))
	_, err := r.ReceiveMessages(ctx, 1, nil)
	wantLinkNotFound(t, "receive", err)
	q2, err := ns.NewQueue("q", nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.sender(t, "q").SendMessage(ctx, &azservicebus.Message{Body: []byte("new")}, nil); err != nil {
		t.Fatal(err)
	}
	if got := string(receiveN(t, r, 1)[0].Body); got != "new" {
		t.Fatalf("received %q from the new queue", got)
	}
	if st := q2.Stats(); st.Sent != 1 {
		t.Fatalf("the new queue stored %d messages, want 1", st.Sent)
	}
}

// wantLinkNotFound fails the test unless err says the link was detached with
// amqp:not-found.
func wantLinkNotFound(t *testing.T, what string, err error) {
	t.Helper()
	var ae *goamqp.Error
	if !errors.As(err, &ae) || ae.Condition != goamqp.ErrCondNotFound {
		t.Fatalf("%s after the delete: %v, want the link detached with %s", what, err, goamqp.ErrCondNotFound)
	}
}
