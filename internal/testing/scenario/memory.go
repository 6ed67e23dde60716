package scenario

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/sbkit/sbkit"
	"github.com/sbkit/sbkit/sbtest"
)

// Memory is the backend of sbtest's in-memory broker, reached through sbtest's own
// Sender and Receiver (no AMQP). Every scenario gets a new queue in one Namespace.
type Memory struct {
	ns *sbtest.Namespace
	n  atomic.Int64
}

// NewMemory returns a Memory backend over a new Namespace with defaults.
func NewMemory() *Memory { return &Memory{ns: sbtest.NewNamespace(nil)} }

// Name returns "memory".
func (m *Memory) Name() string { return "memory" }

// Parallel returns true: every scenario has its own queue.
func (m *Memory) Parallel() bool { return true }

// Queue creates a new queue with opts.
func (m *Memory) Queue(t *testing.T, opts QueueOptions) Queue {
	t.Helper()
	name, props := createQueue(t, m.ns, &m.n, opts)
	return &memQueue{ns: m.ns, name: name, props: props}
}

// createQueue creates a uniquely named queue in ns and returns its name and properties.
func createQueue(t *testing.T, ns *sbtest.Namespace, n *atomic.Int64, opts QueueOptions) (string, Properties) {
	t.Helper()
	name := fmt.Sprintf("scenario-%d", n.Add(1))
	e, err := ns.NewQueue(name, &sbtest.EntityOptions{LockDuration: opts.LockDuration, MaxDeliveryCount: opts.MaxDeliveryCount, RequiresSession: opts.RequiresSession})
	if err != nil {
		t.Fatalf("create queue %s: %v", name, err)
	}
	eo := e.Options()
	return name, Properties{
		Known:            true,
		Created:          true,
		LockDuration:     eo.LockDuration,
		MaxDeliveryCount: eo.MaxDeliveryCount,
		MaxMessageSize:   ns.MaxMessageSize(),
		QuietWait:        quietWait,
	}
}

type memQueue struct {
	ns    *sbtest.Namespace
	name  string
	props Properties
}

func (q *memQueue) Name() string           { return q.name }
func (q *memQueue) Properties() Properties { return q.props }

func (q *memQueue) NewSender(t *testing.T) sbkit.BatchSender {
	t.Helper()
	s, err := q.ns.NewSender(q.name, nil)
	if err != nil {
		t.Fatalf("new sender: %v", err)
	}
	t.Cleanup(func() { _ = s.Close(context.Background()) })
	return s
}

func (q *memQueue) NewReceiver(t *testing.T, mode azservicebus.ReceiveMode, deadLetter bool) Receiver {
	t.Helper()
	opts := &sbtest.ReceiverOptions{ReceiveMode: mode}
	if deadLetter {
		opts.SubQueue = azservicebus.SubQueueDeadLetter
	}
	r, err := q.ns.NewReceiverForQueue(q.name, opts)
	if err != nil {
		t.Fatalf("new receiver: %v", err)
	}
	t.Cleanup(func() { _ = r.Close(context.Background()) })
	return r
}

func (q *memQueue) Sessions() sbkit.SessionAcceptor { return q.ns.QueueSessionAcceptor(q.name, nil) }

// closeTimeout bounds the closing of senders, receivers and clients at cleanup.
const closeTimeout = 10 * time.Second

// MissingQueue returns a name no queue of the namespace has.
func (m *Memory) MissingQueue(t *testing.T) MissingQueue {
	name := fmt.Sprintf("missing-%d", m.n.Add(1))
	return MissingQueue{
		openSender: func() (missingSender, error) {
			s, err := m.ns.NewSender(name, nil)
			if err != nil {
				return nil, err
			}
			return s, nil
		},
		openReceiver: func() (missingReceiver, error) {
			r, err := m.ns.NewReceiverForQueue(name, nil)
			if err != nil {
				return nil, err
			}
			return r, nil
		},
	}
}
