// Package sbenv connects the example programs either to an in-memory Service Bus
// (package sbtest) or, when SBKIT_CONNECTION_STRING is set, to a real namespace, so that
// the same code runs in both places.
package sbenv

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/sbkit/sbkit"
	"github.com/sbkit/sbkit/sbtest"
)

// Environment variables read by Open.
const (
	// ConnectionStringEnv holds a Service Bus connection string. When it is empty the
	// examples use an in-memory broker.
	ConnectionStringEnv = "SBKIT_CONNECTION_STRING"
	// QueueEnv names the queue to use; DefaultQueue when empty.
	QueueEnv = "SBKIT_QUEUE"
	// DefaultQueue is the queue name used when QueueEnv is empty.
	DefaultQueue = "orders"
)

// EnvHelp describes the environment variables Open reads, for the programs' -h output.
const EnvHelp = `Environment:
  SBKIT_CONNECTION_STRING  a Service Bus connection string; when empty, an in-memory
                           broker (package sbtest) is used instead
  SBKIT_QUEUE              the queue to use (default "orders"); on a real namespace it
                           must exist
`

// RealisticLatency is the in-memory broker's default latency model in the examples: a
// round trip of 7ms (a client and a namespace in the same Azure region) and 1ms for the
// broker to store each send request.
var RealisticLatency = sbtest.Latency{RoundTrip: 7 * time.Millisecond, StoreTime: time.Millisecond}

// Sender is a sbkit.BatchSender that must be closed.
type Sender interface {
	sbkit.BatchSender
	Close(ctx context.Context) error
}

// Receiver is a peek-lock (or receive-and-delete) queue receiver that must be closed.
type Receiver interface {
	sbkit.LockingReceiver
	Close(ctx context.Context) error
}

// Options configure Open. The zero value is usable.
type Options struct {
	// Getenv reads the environment; os.Getenv when nil.
	Getenv func(string) string
	// Latency is the in-memory broker's latency model; zero means none. Ignored for a
	// real namespace.
	Latency sbtest.Latency
	// Queue configures the queue created on the in-memory broker; nil means sbtest's
	// defaults. Ignored for a real namespace, where the queue must already exist.
	Queue *sbtest.EntityOptions
	// Wire serves the in-memory broker with sbtest.NewServer (AMQP on loopback) and
	// connects the real azservicebus client to it, so that the SDK's own receive and
	// settlement paths are measured. Ignored for a real namespace.
	Wire bool
}

// Conn is a connection to one queue. It is safe for concurrent use. Close it when done.
type Conn struct {
	// QueueName is the queue's name.
	QueueName string
	// Broker is the in-memory namespace, nil on a real namespace.
	Broker *sbtest.Namespace
	// Queue is the in-memory queue, for inspection; nil on a real namespace.
	Queue *sbtest.Entity

	client *azservicebus.Client // nil in memory, unless served on the wire
	server *sbtest.Server       // the in-memory broker on the wire (Options.Wire)
}

// Open connects as the environment says: to the namespace in SBKIT_CONNECTION_STRING and
// the queue in SBKIT_QUEUE, or to a new in-memory broker with that queue created. It
// returns an error when the connection string is malformed or the queue cannot be made.
func Open(opts *Options) (*Conn, error) {
	if opts == nil {
		opts = &Options{}
	}
	getenv := opts.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	queue := getenv(QueueEnv)
	if queue == "" {
		queue = DefaultQueue
	}
	if cs := getenv(ConnectionStringEnv); cs != "" {
		client, err := azservicebus.NewClientFromConnectionString(cs, nil)
		if err != nil {
			return nil, fmt.Errorf("sbenv: %s: %w", ConnectionStringEnv, err)
		}
		return &Conn{QueueName: queue, client: client}, nil
	}
	ns := sbtest.NewNamespace(&sbtest.NamespaceOptions{Latency: opts.Latency})
	q, err := ns.NewQueue(queue, opts.Queue)
	if err != nil {
		return nil, fmt.Errorf("sbenv: in-memory queue: %w", err)
	}
	c := &Conn{QueueName: queue, Broker: ns, Queue: q}
	if opts.Wire {
		if c.server, err = sbtest.NewServer(&sbtest.ServerOptions{Namespace: ns}); err != nil {
			return nil, fmt.Errorf("sbenv: emulator: %w", err)
		}
		if c.client, err = azservicebus.NewClientFromConnectionString(c.server.ConnectionString(), nil); err != nil {
			_ = c.server.Close(context.Background())
			return nil, fmt.Errorf("sbenv: emulator: %w", err)
		}
	}
	return c, nil
}

// InMemory reports whether c is connected to the in-memory broker (directly, or on the
// wire with Options.Wire).
func (c *Conn) InMemory() bool { return c.Broker != nil }

// String describes where c points, without secrets.
func (c *Conn) String() string {
	switch {
	case c.server != nil:
		return fmt.Sprintf("in-memory broker served by sbtest.NewServer to the azservicebus client, queue %q", c.QueueName)
	case c.InMemory():
		return fmt.Sprintf("in-memory broker, queue %q", c.QueueName)
	}
	return fmt.Sprintf("Service Bus namespace from $%s, queue %q", ConnectionStringEnv, c.QueueName)
}

// NewSender returns a sender for the queue.
func (c *Conn) NewSender() (Sender, error) { return c.NewSenderTo(c.QueueName) }

// NewSenderTo returns a sender for another queue or topic of the same namespace (in
// memory, it must have been created on Broker).
func (c *Conn) NewSenderTo(queueOrTopic string) (Sender, error) {
	if c.client == nil {
		return c.Broker.NewSender(queueOrTopic, nil)
	}
	s, err := c.client.NewSender(queueOrTopic, nil)
	if err != nil {
		return nil, err
	}
	return sdkSender{BatchSender: sbkit.NewBatchSender(s), close: s.Close}, nil
}

// NewReceiver returns a receiver for the queue in the given mode (the zero value is
// peek-lock).
func (c *Conn) NewReceiver(mode azservicebus.ReceiveMode) (Receiver, error) {
	if c.client == nil {
		return c.Broker.NewReceiverForQueue(c.QueueName, &sbtest.ReceiverOptions{ReceiveMode: mode})
	}
	return c.client.NewReceiverForQueue(c.QueueName, &azservicebus.ReceiverOptions{ReceiveMode: mode})
}

// Close closes the client (and the emulator with Options.Wire); it does nothing in
// memory. Safe twice.
func (c *Conn) Close(ctx context.Context) error {
	if c.client == nil {
		return nil
	}
	err := c.client.Close(ctx)
	var sbErr *azservicebus.Error
	if errors.As(err, &sbErr) && sbErr.Code == azservicebus.CodeClosed {
		err = nil
	}
	if c.server != nil {
		err = errors.Join(err, c.server.Close(ctx))
	}
	return err
}

type sdkSender struct {
	sbkit.BatchSender
	close func(context.Context) error
}

func (s sdkSender) Close(ctx context.Context) error { return s.close(ctx) }
