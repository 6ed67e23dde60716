package deadletter

import (
	"context"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/sbkit/sbkit"
)

// Peeker reads messages without locking them. [*azservicebus.Receiver] and
// [*azservicebus.SessionReceiver] satisfy it, and so does the receiver of package sbtest.
type Peeker interface {
	PeekMessages(ctx context.Context, maxMessageCount int, options *azservicebus.PeekMessagesOptions) ([]*azservicebus.ReceivedMessage, error)
}

// Receiver receives and settles dead-lettered messages: a receiver of an entity's
// dead-letter queue ([azservicebus.ReceiverOptions.SubQueue] set to
// [azservicebus.SubQueueDeadLetter]). [*azservicebus.Receiver] satisfies it.
type Receiver = sbkit.MessageReceiver

// DeferredReceiver receives deferred messages by sequence number.
// [*azservicebus.Receiver] satisfies it.
type DeferredReceiver interface {
	ReceiveDeferredMessages(ctx context.Context, sequenceNumbers []int64, options *azservicebus.ReceiveDeferredMessagesOptions) ([]*azservicebus.ReceivedMessage, error)
}

// AMQPSender sends a message with an AMQP body of any kind. [*azservicebus.Sender]
// satisfies it. [Redrive] and [Import] send through it, one message at a time, the
// messages whose body is not a single data section; a destination without it fails
// those messages with [ErrUnsupportedBody].
type AMQPSender interface {
	SendAMQPAnnotatedMessage(ctx context.Context, message *azservicebus.AMQPAnnotatedMessage, options *azservicebus.SendAMQPAnnotatedMessageOptions) error
}

var (
	_ Peeker           = (*azservicebus.Receiver)(nil)
	_ Peeker           = (*azservicebus.SessionReceiver)(nil)
	_ Receiver         = (*azservicebus.Receiver)(nil)
	_ DeferredReceiver = (*azservicebus.Receiver)(nil)
	_ AMQPSender       = (*azservicebus.Sender)(nil)
)
