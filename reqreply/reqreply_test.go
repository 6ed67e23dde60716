package reqreply_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/sbkit/sbkit"
	"github.com/sbkit/sbkit/reqreply"
	"github.com/sbkit/sbkit/sbtest"
)

// broker is a namespace with a plain request queue and a session-enabled reply queue.
type broker struct {
	ns       *sbtest.Namespace
	requests *sbtest.Entity
	replies  *sbtest.Entity
}

func newBroker(t *testing.T) *broker {
	t.Helper()
	ns := sbtest.NewTestNamespace(t, &sbtest.NamespaceOptions{Queues: map[string]*sbtest.EntityOptions{
		"requests": nil,
		"replies":  {RequiresSession: true},
	}})
	req, _ := ns.Entity("requests")
	rep, _ := ns.Entity("replies")
	return &broker{ns: ns, requests: req, replies: rep}
}

func (b *broker) requester(t *testing.T) *reqreply.Requester {
	t.Helper()
	s, err := b.ns.NewSender("requests", nil)
	if err != nil {
		t.Fatal(err)
	}
	r, err := reqreply.NewRequester(s, b.ns.QueueSessionAcceptor("replies", nil), "replies", nil)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func (b *broker) responder(t *testing.T) *reqreply.Responder {
	t.Helper()
	r, err := reqreply.NewResponder(func(replyTo string) (sbkit.MessageSender, error) { return b.ns.NewSender(replyTo, nil) })
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// serve answers n requests with h, completing each after h succeeds.
func (b *broker) serve(t *testing.T, ctx context.Context, n int, h sbkit.Handler) {
	t.Helper()
	rcv, err := b.ns.NewReceiverForQueue("requests", nil)
	if err != nil {
		t.Error(err)
		return
	}
	defer rcv.Close(context.Background())
	for n > 0 {
		msgs, err := rcv.ReceiveMessages(ctx, n, nil)
		if err != nil {
			return
		}
		for _, m := range msgs {
			if err := h(ctx, m); err != nil {
				t.Errorf("handler: %v", err)
				return
			}
			if err := rcv.CompleteMessage(ctx, m, nil); err != nil {
				t.Errorf("complete: %v", err)
			}
			n--
		}
	}
}

func echo(t *testing.T, resp *reqreply.Responder) sbkit.Handler {
	h, err := resp.Handler(func(ctx context.Context, req *azservicebus.ReceivedMessage) (*azservicebus.Message, error) {
		return &azservicebus.Message{Body: append([]byte("re: "), req.Body...)}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func TestRequestReply(t *testing.T) {
	b := newBroker(t)
	req := b.requester(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	const n = 20
	var wg sync.WaitGroup
	wg.Go(func() { b.serve(t, ctx, n, echo(t, b.responder(t))) })
	var rwg sync.WaitGroup
	for i := range n {
		rwg.Go(func() {
			body := fmt.Sprintf("q%d", i)
			m := &azservicebus.Message{Body: []byte(body)}
			reply, err := req.Request(ctx, m)
			if err != nil {
				t.Errorf("request %d: %v", i, err)
				return
			}
			if string(reply.Body) != "re: "+body || *reply.CorrelationID != *m.MessageID || *reply.SessionID != *m.ReplyToSessionID {
				t.Errorf("request %d got %q corr %v session %v", i, reply.Body, *reply.CorrelationID, *reply.SessionID)
			}
			if *m.ReplyTo != "replies" {
				t.Errorf("ReplyTo %q", *m.ReplyTo)
			}
		})
	}
	rwg.Wait()
	wg.Wait()
	// Nothing lingers: every reply completed, every reply session released and forgotten.
	if s := b.replies.Sessions(); len(s) != 0 || b.replies.Counts().Active != 0 {
		t.Fatalf("reply queue still has sessions %+v, %d active", s, b.replies.Counts().Active)
	}
	if st := b.replies.Stats(); st.Completed != n || st.SessionsAccepted != n {
		t.Fatalf("reply stats %+v", st)
	}
}

func TestRequestDeadlineReleasesSession(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newBroker(t)
		req := b.requester(t)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		start := time.Now()
		_, err := req.Request(ctx, &azservicebus.Message{Body: []byte("nobody answers")})
		if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) != 30*time.Second {
			t.Fatalf("err %v after %v", err, time.Since(start))
		}
		if s := b.replies.Sessions(); len(s) != 0 {
			t.Fatalf("a reply session lingers: %+v", s)
		}
		if b.requests.Counts().Active != 1 {
			t.Fatalf("the request was not sent")
		}
	})
}

func TestUnexpectedMessageInReplySessionIsDeadLettered(t *testing.T) {
	b := newBroker(t)
	req := b.requester(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp := b.responder(t)
	var wg sync.WaitGroup
	wg.Go(func() {
		b.serve(t, ctx, 1, func(ctx context.Context, m *azservicebus.ReceivedMessage) error {
			stray := &azservicebus.ReceivedMessage{ReplyTo: m.ReplyTo, ReplyToSessionID: m.ReplyToSessionID, MessageID: "someone-else"}
			if err := resp.Reply(ctx, stray, &azservicebus.Message{Body: []byte("stray")}); err != nil {
				return err
			}
			return resp.Reply(ctx, m, &azservicebus.Message{Body: []byte("mine")})
		})
	})
	reply, err := req.Request(ctx, &azservicebus.Message{Body: []byte("q")})
	wg.Wait()
	if err != nil || string(reply.Body) != "mine" {
		t.Fatalf("reply %v, %v", reply, err)
	}
	dl := b.replies.DeadLetters()
	if len(dl) != 1 || string(dl[0].Body) != "stray" || *dl[0].DeadLetterReason != reqreply.UnexpectedReplyReason {
		t.Fatalf("dead letters %v", dl)
	}
}

func TestRequestErrors(t *testing.T) {
	b := newBroker(t)
	s, _ := b.ns.NewSender("requests", nil)
	acc := b.ns.QueueSessionAcceptor("replies", nil)
	if _, err := reqreply.NewRequester(nil, acc, "replies", nil); !errors.Is(err, reqreply.ErrNilSender) {
		t.Errorf("nil sender: %v", err)
	}
	if _, err := reqreply.NewRequester(s, nil, "replies", nil); !errors.Is(err, reqreply.ErrNilAcceptor) {
		t.Errorf("nil acceptor: %v", err)
	}
	for name, f := range map[string]func() (*reqreply.Requester, error){
		"empty replyTo": func() (*reqreply.Requester, error) { return reqreply.NewRequester(s, acc, "", nil) },
		"negative timeout": func() (*reqreply.Requester, error) {
			return reqreply.NewRequester(s, acc, "replies", &reqreply.RequesterOptions{CloseTimeout: -1})
		},
		"hook of no interface": func() (*reqreply.Requester, error) {
			return reqreply.NewRequester(s, acc, "replies", &reqreply.RequesterOptions{Hooks: []reqreply.Hook{struct{}{}}})
		},
	} {
		if _, err := f(); !errors.Is(err, reqreply.ErrInvalidOptions) {
			t.Errorf("%s: %v", name, err)
		}
	}
	if _, err := reqreply.NewResponder(nil); !errors.Is(err, reqreply.ErrNilSender) {
		t.Errorf("nil SenderFor: %v", err)
	}
	if _, err := b.responder(t).Handler(nil); !errors.Is(err, sbkit.ErrNilHandler) {
		t.Errorf("nil ReplyFunc: %v", err)
	}
	ctx := context.Background()
	if _, err := b.requester(t).Request(ctx, nil); !errors.Is(err, sbkit.ErrNilMessage) {
		t.Errorf("nil request: %v", err)
	}
	// A reply queue that does not require sessions: the acceptor's error, nothing sent.
	plain, _ := reqreply.NewRequester(s, b.ns.QueueSessionAcceptor("requests", nil), "requests", nil)
	if _, err := plain.Request(ctx, &azservicebus.Message{}); err == nil || b.requests.Counts().Active != 0 {
		t.Errorf("request with a plain reply queue: %v (requests %d)", err, b.requests.Counts().Active)
	}
	resp := b.responder(t)
	if err := resp.Reply(ctx, &azservicebus.ReceivedMessage{}, &azservicebus.Message{}); !errors.Is(err, reqreply.ErrNotARequest) {
		t.Errorf("reply to a non-request: %v", err)
	}
	h, _ := resp.Handler(func(context.Context, *azservicebus.ReceivedMessage) (*azservicebus.Message, error) {
		t.Error("handler ran for a non-request")
		return nil, nil
	})
	if a, _ := sbkit.SettlementOf(h(ctx, &azservicebus.ReceivedMessage{})); a != sbkit.ActionDeadLetter {
		t.Errorf("non-request settles as %v", a)
	}
}
