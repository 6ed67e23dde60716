package scenario

import (
	"context"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/sbkit/sbkit"
)

// Backend is a Service Bus the suite runs against. Implementations must be safe for
// concurrent use when Parallel reports true.
type Backend interface {
	// Name names the backend in test output ("memory", "server", "live").
	Name() string
	// Parallel reports whether scenarios may run at once, each on its own queue. A
	// backend that hands every scenario the same queue reports false.
	Parallel() bool
	// Queue returns an empty queue for one scenario: created with opts where the backend
	// can create queues, otherwise an existing queue drained of every message (main and
	// dead-letter sub-queue), whose real properties Properties reports. It fails t when
	// it cannot, and registers with t.Cleanup the closing of everything it opened.
	Queue(t *testing.T, opts QueueOptions) Queue
	// MissingQueue returns a queue name that no entity has.
	MissingQueue(t *testing.T) MissingQueue
}

// QueueOptions are the properties a scenario asks for. The zero value of a field means
// the service's default.
type QueueOptions struct {
	// LockDuration is the peek-lock duration. Default 60 s.
	LockDuration time.Duration
	// MaxDeliveryCount is how many deliveries a message gets before the broker
	// dead-letters it. Default 10.
	MaxDeliveryCount int
	// RequiresSession asks for a session-enabled queue; a backend that has none skips
	// the scenario.
	RequiresSession bool
}

// Properties are what a scenario may rely on about its queue.
type Properties struct {
	// Known is false when the backend could not learn the queue's lock duration and max
	// delivery count (a real namespace without Manage rights); they are zero then.
	Known bool
	// Created is true when the queue was created for the scenario with the asked-for
	// options and the service's defaults otherwise (no duplicate detection, no sessions).
	Created bool
	// LockDuration and MaxDeliveryCount are the queue's, when Known.
	LockDuration     time.Duration
	MaxDeliveryCount int
	// DuplicateDetection is true when the broker drops messages whose MessageId it has
	// seen within its window; false when it does not or when not Known.
	DuplicateDetection bool
	// MaxMessageSize is the largest message, in bytes, the sender's link accepts; a
	// message larger than it must fail with [azservicebus.ErrMessageTooLarge].
	MaxMessageSize int
	// QuietWait is how long the queue must stay silent, once a scenario expects no more
	// messages, for it to be called empty: a bound on the broker's delivery latency.
	QuietWait time.Duration
}

// Queue is one queue handed to one scenario.
type Queue interface {
	// Name is the queue's name.
	Name() string
	// Properties describes the queue.
	Properties() Properties
	// NewSender returns a sender for the queue, closed when t ends.
	NewSender(t *testing.T) sbkit.BatchSender
	// NewReceiver returns a receiver of the queue, or of its dead-letter sub-queue when
	// deadLetter is set, in the given mode (the zero value is peek-lock); it is closed
	// when t ends.
	NewReceiver(t *testing.T, mode azservicebus.ReceiveMode, deadLetter bool) Receiver
	// Sessions accepts sessions of the queue (one that RequiresSession); the scenario
	// closes the session receivers it accepts.
	Sessions() sbkit.SessionAcceptor
}

// Receiver is a queue receiver that can renew locks, receive deferred messages and must
// be closed, as [*azservicebus.Receiver] and *sbtest.Receiver are.
type Receiver interface {
	sbkit.LockingReceiver
	ReceiveDeferredMessages(ctx context.Context, sequenceNumbers []int64, options *azservicebus.ReceiveDeferredMessagesOptions) ([]*azservicebus.ReceivedMessage, error)
	Close(ctx context.Context) error
}
