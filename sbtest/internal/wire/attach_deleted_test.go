package wire

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	goamqp "github.com/Azure/go-amqp"
	adminapi "github.com/sbkit/sbkit/sbtest/internal/admin"
	"github.com/sbkit/sbkit/sbtest/internal/modelerr"
)

// An entity deleted while a client attaches to it: the server asks the Broker for a
// receiver and then for the entity (receiverLink.setup), or for the entity and then for
// a session (setupSession), and a delete can fall between the two. The fake broker
// below holds that moment still: "gone" has a receiver whose entity is already deleted,
// and no entity any more; "sessions" exists until a session is asked for. The delete
// must cost the client the link, with amqp:not-found as for any deleted entity
// (Service Bus docs, "Service Bus messaging exceptions": MessagingEntityNotFound), and
// not the connection.
const (
	goneQueue     = "gone"
	liveQueue     = "live"
	sessionsQueue = "sessions"
)

// vanishingBroker is the Broker of the three queues. Embedding the nil interface
// leaves out the methods the server does not call here (calling one panics).
type vanishingBroker struct {
	Broker
	live *fakeReceiver
}

func (b *vanishingBroker) MaxMessageSize() int            { return 256 << 10 }
func (b *vanishingBroker) ResolvePath(path string) string { return path }

func (b *vanishingBroker) Entity(path string) (EntityInfo, bool) {
	switch path {
	case liveQueue:
		return EntityInfo{Name: path}, true
	case sessionsQueue:
		return EntityInfo{Name: path, RequiresSession: true}, true
	}
	return EntityInfo{}, false // goneQueue: deleted since ReceiverAt
}

func (b *vanishingBroker) ReceiverAt(path string, _ azservicebus.ReceiveMode, _ azservicebus.SubQueue) (Receiver, error) {
	switch path {
	case liveQueue:
		return b.live, nil
	case goneQueue:
		deleted, del := context.WithCancel(context.Background())
		del()
		return &fakeReceiver{deleted: deleted}, nil
	}
	return nil, modelerr.NotFound()
}

// AcceptSession finds the queue deleted (sbtest's adapter looks the path up again).
func (b *vanishingBroker) AcceptSession(context.Context, string, *string, azservicebus.ReceiveMode) (SessionReceiver, error) {
	return nil, modelerr.NotFound()
}

// fakeReceiver hands out the messages sent on msgs (none when nil) and is deleted when
// deleted ends.
type fakeReceiver struct {
	Receiver
	deleted context.Context
	msgs    chan *azservicebus.ReceivedMessage
}

func (r *fakeReceiver) Deleted() context.Context     { return r.deleted }
func (r *fakeReceiver) HalfRoundTrip() time.Duration { return 0 }
func (r *fakeReceiver) Close(context.Context) error  { return nil }
func (r *fakeReceiver) ReleaseLock([16]byte) bool    { return true }

func (r *fakeReceiver) TryReceive(max int) []*azservicebus.ReceivedMessage {
	select {
	case m := <-r.msgs:
		return []*azservicebus.ReceivedMessage{m}
	default:
		return nil
	}
}

func (r *fakeReceiver) ReceiveNow(ctx context.Context, max int) ([]*azservicebus.ReceivedMessage, error) {
	select {
	case m := <-r.msgs:
		return []*azservicebus.ReceivedMessage{m}, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// vanishingServer serves a vanishingBroker and returns a session of a client
// connected to it, the broker's live receiver, and a context that bounds the test.
func vanishingServer(t *testing.T) (*goamqp.Session, *fakeReceiver, context.Context) {
	t.Helper()
	live := &fakeReceiver{deleted: context.Background(), msgs: make(chan *azservicebus.ReceivedMessage, 1)}
	srv, err := New(Options{
		Broker:                   &vanishingBroker{live: live},
		Admin:                    struct{ adminapi.Model }{},
		AcceptNextSessionTimeout: time.Minute,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close(context.Background()) })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	conn, err := goamqp.Dial(ctx, "amqp://"+srv.Addr().String(), &goamqp.ConnOptions{SASLType: goamqp.SASLTypeAnonymous()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	sess, err := conn.NewSession(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	return sess, live, ctx
}

// wantNotFound fails unless err is the link's amqp:not-found, at attach or after.
func wantNotFound(t *testing.T, err error) {
	t.Helper()
	var ae *goamqp.Error
	var ce *goamqp.ConnError
	switch {
	case errors.As(err, &ce):
		t.Fatalf("the connection closed: %v; want only the link detached with %s", err, goamqp.ErrCondNotFound)
	case !errors.As(err, &ae) || ae.Condition != goamqp.ErrCondNotFound:
		t.Fatalf("got %v, want the link detached with %s", err, goamqp.ErrCondNotFound)
	}
}

// wantConnUsable fails unless a new link on sess receives a message from the live
// queue.
func wantConnUsable(t *testing.T, ctx context.Context, sess *goamqp.Session, live *fakeReceiver) {
	t.Helper()
	rcv, err := sess.NewReceiver(ctx, liveQueue, &goamqp.ReceiverOptions{
		RequestedSenderSettleMode: goamqp.SenderSettleModeSettled.Ptr(),
	})
	if err != nil {
		t.Fatalf("attaching to another queue on the same connection: %v", err)
	}
	live.msgs <- &azservicebus.ReceivedMessage{Body: []byte("still here"), SequenceNumber: new(int64(1))}
	m, err := rcv.Receive(ctx, nil)
	if err != nil || string(m.GetData()) != "still here" {
		t.Fatalf("received %v, %v on the same connection", m, err)
	}
}

// TestAttachToEntityDeletedAfterReceiverAt: the queue is deleted after the server made
// the link's receiver and before it looked up whether the queue requires sessions. The
// link attaches and its deletion watch detaches it at once.
func TestAttachToEntityDeletedAfterReceiverAt(t *testing.T) {
	t.Parallel()
	sess, live, ctx := vanishingServer(t)
	rcv, err := sess.NewReceiver(ctx, goneQueue, nil)
	if err == nil {
		_, err = rcv.Receive(ctx, nil)
	}
	wantNotFound(t, err)
	wantConnUsable(t, ctx, sess, live)
}

// TestAcceptSessionOfEntityDeletedAfterLookup: the queue is deleted after the server
// looked it up and before it accepted a session: the attach is refused.
func TestAcceptSessionOfEntityDeletedAfterLookup(t *testing.T) {
	t.Parallel()
	sess, live, ctx := vanishingServer(t)
	for name, id := range map[string]any{"named session": "s1", "next available session": nil} {
		t.Run(name, func(t *testing.T) {
			// The SDK's session filter (azservicebus session_receiver.go newLink).
			filter := goamqp.NewLinkFilter(string(sessionFilterName), 0x00000137000000C, id)
			rcv, err := sess.NewReceiver(ctx, sessionsQueue, &goamqp.ReceiverOptions{Filters: []goamqp.LinkFilter{filter}})
			if err == nil {
				_, err = rcv.Receive(ctx, nil)
			}
			wantNotFound(t, err)
		})
	}
	wantConnUsable(t, ctx, sess, live)
}
