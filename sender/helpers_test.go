package sender_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/sbkit/sbkit"
	"github.com/sbkit/sbkit/sbtest"
	"github.com/sbkit/sbkit/sender"
)

// broker is one sbtest queue and a client sender for it.
type broker struct {
	ns *sbtest.Namespace
	q  *sbtest.Entity
	s  *sbtest.Sender
}

func newBroker(t *testing.T, lat sbtest.Latency, opts *sbtest.EntityOptions) *broker {
	t.Helper()
	ns := sbtest.NewTestNamespace(t, &sbtest.NamespaceOptions{Latency: lat, Queues: map[string]*sbtest.EntityOptions{"q": opts}})
	q, _ := ns.Entity("q")
	s, err := ns.NewSender("q", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close(context.Background()) })
	return &broker{ns: ns, q: q, s: s}
}

// newSender returns a Sender on dst and closes it at the end of the test, failing the
// test if Close fails.
func newSender(t *testing.T, dst any, opts *sender.Options) *sender.Sender {
	t.Helper()
	var s *sender.Sender
	var err error
	switch d := dst.(type) {
	case *sbtest.Sender:
		s, err = sender.New(d, opts)
	case *azservicebus.Sender:
		s, err = sender.New(d, opts)
	case onlySender:
		s, err = sender.New(d, opts)
	default:
		t.Fatalf("unknown destination %T", dst)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Close(context.Background()); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return s
}

// onlySender hides the batch methods of a BatchSender, so that a Sender cannot batch.
type onlySender struct{ sbkit.MessageSender }

// outcomes is a SendResultHook that counts the results per message ID.
type outcomes struct {
	mu   sync.Mutex
	n    map[string]int
	errs map[string]error
}

func newOutcomes() *outcomes { return &outcomes{n: map[string]int{}, errs: map[string]error{}} }

func (o *outcomes) OnSendResult(_ context.Context, e sender.SendResult) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.n[e.MessageID]++
	o.errs[e.MessageID] = e.Err
}

// checkOnce fails the test unless every id got exactly one outcome, and nothing else did.
func (o *outcomes) checkOnce(t *testing.T, ids []string) {
	t.Helper()
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, id := range ids {
		if o.n[id] != 1 {
			t.Errorf("message %s: %d outcomes, want 1", id, o.n[id])
		}
	}
	if len(o.n) != len(ids) {
		t.Errorf("%d messages got outcomes, want %d", len(o.n), len(ids))
	}
}

func msg(i int) *azservicebus.Message {
	id := fmt.Sprintf("m%04d", i)
	return &azservicebus.Message{MessageID: &id, Body: []byte(id)}
}

func sessionMsg(session string, i int) *azservicebus.Message {
	m := msg(i)
	m.SessionID = &session
	return m
}

func ptr[T any](v T) *T { return &v }
