package explorer

import (
	"context"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/sbkit/sbkit/sbtest/internal/admin"
)

// Model is the namespace the explorer shows and acts on. sbtest's Namespace is one,
// through the adapter in sbtest/seam_explorer.go, which calls only its exported
// methods. The structure (queues, topics, subscriptions, their options, counts, statuses
// and rules) is the administration API's [admin.Model]; the messages are reached as an
// SDK client reaches them. The methods are safe for concurrent use.
type Model interface {
	admin.Model
	// Browse returns up to max messages of the queue or subscription at path (its
	// dead-letter queue when dlq) from sequence number from on, by sequence number,
	// without locking them or counting a delivery, as the SDK's PeekMessages does.
	Browse(ctx context.Context, path string, dlq bool, from int64, max int) ([]*azservicebus.ReceivedMessage, error)
	// NewSender returns a sender to the queue or topic called name.
	NewSender(name string) (Sender, error)
	// NewReceiver returns a receiver of the queue or subscription at path (its
	// dead-letter queue when dlq) in mode.
	NewReceiver(path string, dlq bool, mode azservicebus.ReceiveMode) (Receiver, error)
	// AcceptSession returns a receiver holding the session sessionID of the queue or
	// subscription at path, which requires sessions, in mode; Close releases the
	// session.
	AcceptSession(ctx context.Context, path, sessionID string, mode azservicebus.ReceiveMode) (Receiver, error)
	// Sessions returns the ids of the sessions of the entity at path that hold messages.
	Sessions(path string) []string
}

// Sender sends to a queue or topic, with the SDK sender's signatures.
type Sender interface {
	SendMessage(ctx context.Context, m *azservicebus.Message, o *azservicebus.SendMessageOptions) error
	ScheduleMessages(ctx context.Context, ms []*azservicebus.Message, at time.Time, o *azservicebus.ScheduleMessagesOptions) ([]int64, error)
	CancelScheduledMessages(ctx context.Context, seqs []int64, o *azservicebus.CancelScheduledMessagesOptions) error
	Close(ctx context.Context) error
}

// Receiver receives from a queue, a subscription or a dead-letter queue, with the SDK
// receiver's signatures. ReceiveMessages waits until a message is available or ctx ends.
type Receiver interface {
	ReceiveMessages(ctx context.Context, max int, o *azservicebus.ReceiveMessagesOptions) ([]*azservicebus.ReceivedMessage, error)
	ReceiveDeferredMessages(ctx context.Context, seqs []int64, o *azservicebus.ReceiveDeferredMessagesOptions) ([]*azservicebus.ReceivedMessage, error)
	CompleteMessage(ctx context.Context, m *azservicebus.ReceivedMessage, o *azservicebus.CompleteMessageOptions) error
	AbandonMessage(ctx context.Context, m *azservicebus.ReceivedMessage, o *azservicebus.AbandonMessageOptions) error
	Close(ctx context.Context) error
}
