package receiver_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/sbkit/sbkit"
	"github.com/sbkit/sbkit/receiver"
	"github.com/sbkit/sbkit/sbtest"
)

// env is an in-memory namespace with one queue, its sender and a peek-lock receiver.
type env struct {
	ns *sbtest.Namespace
	q  *sbtest.Entity
	s  *sbtest.Sender
	r  *sbtest.Receiver
}

func newEnv(t *testing.T, opts *sbtest.EntityOptions) *env {
	t.Helper()
	e := &env{}
	e.ns, e.q, e.s = newQueue(t, opts)
	e.r = e.receiver(t, nil)
	return e
}

// newQueue returns a namespace with the queue "q" made with opts, and a sender for it:
// the broker as a user's test builds it.
func newQueue(t *testing.T, opts *sbtest.EntityOptions) (*sbtest.Namespace, *sbtest.Entity, *sbtest.Sender) {
	t.Helper()
	ns := sbtest.NewTestNamespace(t, &sbtest.NamespaceOptions{Queues: map[string]*sbtest.EntityOptions{"q": opts}})
	q, _ := ns.Entity("q")
	s, err := ns.NewSender("q", nil)
	if err != nil {
		t.Fatal(err)
	}
	return ns, q, s
}

// receiver returns a receiver of the queue with opts.
func (e *env) receiver(t *testing.T, opts *sbtest.ReceiverOptions) *sbtest.Receiver {
	t.Helper()
	r, err := e.ns.NewReceiverForQueue("q", opts)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// waitDrained waits until q has no message left to deliver or settle, which takes no
// time in a synctest bubble.
func waitDrained(t *testing.T, q *sbtest.Entity) {
	t.Helper()
	if err := q.WaitDrained(t.Context()); err != nil {
		t.Fatal(err)
	}
}

// send sends n messages with MessageIDs m0, m1, ...
func (e *env) send(t *testing.T, n int) {
	t.Helper()
	for i := range n {
		id := fmt.Sprintf("m%d", i)
		if err := e.s.SendMessage(context.Background(), &azservicebus.Message{MessageID: &id, Body: []byte(id)}, nil); err != nil {
			t.Fatal(err)
		}
	}
}

// start runs p in a goroutine; the returned function waits for Run's result.
func start(t *testing.T, p *receiver.Processor, ctx context.Context) func() error {
	t.Helper()
	res := make(chan error, 1)
	go func() { res <- p.Run(ctx) }()
	return func() error { return <-res }
}

// newProcessor makes a processor over e.r, failing the test on error.
func newProcessor(t *testing.T, src sbkit.MessageReceiver, h sbkit.Handler, o *receiver.Options) *receiver.Processor {
	t.Helper()
	p, err := receiver.New(src, h, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		_ = p.Close(ctx)
	})
	return p
}

// errorLog is an ErrorHook that collects what it receives.
type errorLog struct {
	mu   sync.Mutex
	errs []*receiver.Error
}

func (l *errorLog) OnError(_ context.Context, e *receiver.Error) {
	l.mu.Lock()
	l.errs = append(l.errs, e)
	l.mu.Unlock()
}

func (l *errorLog) count(src receiver.ErrorSource) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, e := range l.errs {
		if e.Source == src {
			n++
		}
	}
	return n
}

// countIs counts the reported errors that wrap target.
func (l *errorLog) countIs(target error) int {
	n := 0
	for _, e := range l.all() {
		if errors.Is(e, target) {
			n++
		}
	}
	return n
}

func (l *errorLog) all() []*receiver.Error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]*receiver.Error(nil), l.errs...)
}

// checkReconciled asserts that every received message ended in exactly one outcome.
func checkReconciled(t *testing.T, s receiver.Stats) {
	t.Helper()
	if sum := s.Completed + s.Redelivered + s.Abandoned + s.DeadLettered + s.Deferred + s.LocksLost + s.LeftLocked; sum != s.Received {
		t.Errorf("received %d != completed %d + redelivered %d + abandoned %d + dead-lettered %d + deferred %d + lock-lost %d + left locked %d = %d",
			s.Received, s.Completed, s.Redelivered, s.Abandoned, s.DeadLettered, s.Deferred, s.LocksLost, s.LeftLocked, sum)
	}
}

// noRenew hides the receiver's RenewMessageLock.
type noRenew struct{ sbkit.MessageReceiver }
