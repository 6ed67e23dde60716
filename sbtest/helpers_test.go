package sbtest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
)

// fixture is a namespace with one queue, a sender and a peek-lock receiver for it.
type fixture struct {
	ns *Namespace
	q  *Entity
	s  *Sender
	r  *Receiver

	other *Receiver                     // a second receiver, when a test needs one
	held  *azservicebus.ReceivedMessage // a message a test holds a lock on
}

func newFixture(t *testing.T, opts *EntityOptions) *fixture {
	t.Helper()
	ns := NewTestNamespace(t, &NamespaceOptions{Queues: map[string]*EntityOptions{"q": opts}})
	q, _ := ns.Entity("q")
	s, err := ns.NewSender("q", nil)
	if err != nil {
		t.Fatal(err)
	}
	r, err := ns.NewReceiverForQueue("q", nil)
	if err != nil {
		t.Fatal(err)
	}
	return &fixture{ns: ns, q: q, s: s, r: r}
}

func (f *fixture) receiver(t *testing.T, opts *ReceiverOptions) *Receiver {
	t.Helper()
	r, err := f.ns.NewReceiverForQueue("q", opts)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func msg(body string) *azservicebus.Message { return &azservicebus.Message{Body: []byte(body)} }

func sendAll(t *testing.T, s *Sender, bodies ...string) {
	t.Helper()
	for _, b := range bodies {
		if err := s.SendMessage(context.Background(), msg(b), nil); err != nil {
			t.Fatalf("send %q: %v", b, err)
		}
	}
}

// receive receives up to max messages, failing the test if none arrive within wait.
func receive(t *testing.T, r *Receiver, max int, wait time.Duration) []*azservicebus.ReceivedMessage {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	ms, err := r.ReceiveMessages(ctx, max, nil)
	if err != nil {
		t.Fatalf("receive: %v", err)
	}
	return ms
}

// receiveOne receives exactly one message (within a minute).
func receiveOne(t *testing.T, r *Receiver) *azservicebus.ReceivedMessage {
	t.Helper()
	ms := receive(t, r, 1, time.Minute)
	if len(ms) != 1 {
		t.Fatalf("got %d messages, want 1", len(ms))
	}
	return ms[0]
}

// expectNone asserts that nothing is delivered within wait.
func expectNone(t *testing.T, r *Receiver, wait time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	ms, err := r.ReceiveMessages(ctx, 10, nil)
	if !errors.Is(err, context.DeadlineExceeded) || len(ms) != 0 {
		t.Fatalf("got %d messages (%v), want none", len(ms), err)
	}
}

func bodies(ms []*azservicebus.ReceivedMessage) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = string(m.Body)
	}
	return out
}

func code(err error) azservicebus.Code {
	var e *azservicebus.Error
	if errors.As(err, &e) {
		return e.Code
	}
	return ""
}

func wantCode(t *testing.T, err error, c azservicebus.Code) {
	t.Helper()
	if code(err) != c {
		t.Fatalf("err = %v, want code %q", err, c)
	}
}

func sp(s string) *string { return &s }
