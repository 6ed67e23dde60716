package sbkit

import (
	"context"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
)

// MessageSender sends and schedules single messages. *azservicebus.Sender satisfies it,
// and so does the sender of package sbtest.
type MessageSender interface {
	SendMessage(ctx context.Context, message *azservicebus.Message, options *azservicebus.SendMessageOptions) error
	ScheduleMessages(ctx context.Context, messages []*azservicebus.Message, scheduledEnqueueTime time.Time, options *azservicebus.ScheduleMessagesOptions) ([]int64, error)
	CancelScheduledMessages(ctx context.Context, sequenceNumbers []int64, options *azservicebus.CancelScheduledMessagesOptions) error
}

// Batch is a set of messages that travels to the broker in one request.
// *azservicebus.MessageBatch satisfies it. AddMessage returns
// azservicebus.ErrMessageTooLarge when the message does not fit in what is left of the
// batch. A Batch is not safe for concurrent use.
type Batch interface {
	AddMessage(message *azservicebus.Message, options *azservicebus.AddMessageOptions) error
	NumMessages() int32
	NumBytes() uint64
}

// BatchSender is a MessageSender that can also send batches. The SDK's
// *azservicebus.Sender cannot satisfy it directly (its batch methods take the concrete
// *azservicebus.MessageBatch), so wrap it with NewBatchSender; sbtest's sender satisfies
// it as it is. SendBatch accepts only batches made by the same BatchSender's NewBatch.
type BatchSender interface {
	MessageSender
	NewBatch(ctx context.Context, options *azservicebus.MessageBatchOptions) (Batch, error)
	SendBatch(ctx context.Context, batch Batch, options *azservicebus.SendMessageBatchOptions) error
}

// Settler settles received messages. *azservicebus.Receiver and
// *azservicebus.SessionReceiver satisfy it. The SDK documents these calls as safe to make
// from many goroutines at once.
type Settler interface {
	CompleteMessage(ctx context.Context, message *azservicebus.ReceivedMessage, options *azservicebus.CompleteMessageOptions) error
	AbandonMessage(ctx context.Context, message *azservicebus.ReceivedMessage, options *azservicebus.AbandonMessageOptions) error
	DeadLetterMessage(ctx context.Context, message *azservicebus.ReceivedMessage, options *azservicebus.DeadLetterOptions) error
	DeferMessage(ctx context.Context, message *azservicebus.ReceivedMessage, options *azservicebus.DeferMessageOptions) error
}

// MessageReceiver receives and settles messages. *azservicebus.Receiver and
// *azservicebus.SessionReceiver satisfy it. ReceiveMessages must not be called from two
// goroutines at once (the SDK forbids it).
type MessageReceiver interface {
	Settler
	ReceiveMessages(ctx context.Context, maxMessages int, options *azservicebus.ReceiveMessagesOptions) ([]*azservicebus.ReceivedMessage, error)
}

// LockRenewer renews the peek-lock of one message and writes the new expiry to
// message.LockedUntil, as *azservicebus.Receiver does. Callers that read LockedUntil
// while a renewal may run must synchronise with it.
type LockRenewer interface {
	RenewMessageLock(ctx context.Context, message *azservicebus.ReceivedMessage, options *azservicebus.RenewMessageLockOptions) error
}

// LockingReceiver is a MessageReceiver that can renew message locks: a peek-lock,
// non-session receiver such as *azservicebus.Receiver.
type LockingReceiver interface {
	MessageReceiver
	LockRenewer
}

// DeferredReceiver receives deferred messages by sequence number.
type DeferredReceiver interface {
	ReceiveDeferredMessages(ctx context.Context, sequenceNumbers []int64, options *azservicebus.ReceiveDeferredMessagesOptions) ([]*azservicebus.ReceivedMessage, error)
}

// MessagePeeker browses messages without locking them.
type MessagePeeker interface {
	PeekMessages(ctx context.Context, maxMessageCount int, options *azservicebus.PeekMessagesOptions) ([]*azservicebus.ReceivedMessage, error)
}

// SessionLockRenewer renews the lock on a whole session, as *azservicebus.SessionReceiver
// does.
type SessionLockRenewer interface {
	SessionID() string
	LockedUntil() time.Time
	RenewSessionLock(ctx context.Context, options *azservicebus.RenewSessionLockOptions) error
}

// Compile-time proof that the SDK's types satisfy the interfaces the toolkit consumes.
var (
	_ MessageSender      = (*azservicebus.Sender)(nil)
	_ Batch              = (*azservicebus.MessageBatch)(nil)
	_ LockingReceiver    = (*azservicebus.Receiver)(nil)
	_ DeferredReceiver   = (*azservicebus.Receiver)(nil)
	_ MessagePeeker      = (*azservicebus.Receiver)(nil)
	_ MessageReceiver    = (*azservicebus.SessionReceiver)(nil)
	_ DeferredReceiver   = (*azservicebus.SessionReceiver)(nil)
	_ MessagePeeker      = (*azservicebus.SessionReceiver)(nil)
	_ SessionLockRenewer = (*azservicebus.SessionReceiver)(nil)
	_ BatchSender        = (*sdkBatchSender)(nil)
)
