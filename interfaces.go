package sbkit

import (
	"context"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
)

// MessageSender sends single messages: what package sender needs of its destination
// when it does not batch. [*azservicebus.Sender] satisfies it, and so does the sender of
// package sbtest.
type MessageSender interface {
	SendMessage(ctx context.Context, message *azservicebus.Message, options *azservicebus.SendMessageOptions) error
}

// Batch is a set of messages that travels to the broker in one request.
// [*azservicebus.MessageBatch] satisfies it. AddMessage returns
// [azservicebus.ErrMessageTooLarge] when the message does not fit in what is left of the
// batch. A Batch is not safe for concurrent use.
type Batch interface {
	AddMessage(message *azservicebus.Message, options *azservicebus.AddMessageOptions) error
	NumMessages() int32
	NumBytes() uint64
}

// BatchSender is a MessageSender that can also send batches. sbtest's sender satisfies it.
// The SDK's [*azservicebus.Sender] does not (its batch methods take the concrete
// [*azservicebus.MessageBatch]), and needs no wrapping to be batched: sender.New
// recognises it and batches through it. [NewBatchSender] adapts one for code of your own
// that needs a BatchSender value. SendBatch accepts only batches made by the same
// BatchSender's NewBatch.
type BatchSender interface {
	MessageSender
	NewBatch(ctx context.Context, options *azservicebus.MessageBatchOptions) (Batch, error)
	SendBatch(ctx context.Context, batch Batch, options *azservicebus.SendMessageBatchOptions) error
}

// Settler settles received messages. [*azservicebus.Receiver] and
// [*azservicebus.SessionReceiver] satisfy it. The SDK documents these calls as safe to make
// from many goroutines at once.
type Settler interface {
	CompleteMessage(ctx context.Context, message *azservicebus.ReceivedMessage, options *azservicebus.CompleteMessageOptions) error
	AbandonMessage(ctx context.Context, message *azservicebus.ReceivedMessage, options *azservicebus.AbandonMessageOptions) error
	DeadLetterMessage(ctx context.Context, message *azservicebus.ReceivedMessage, options *azservicebus.DeadLetterOptions) error
	DeferMessage(ctx context.Context, message *azservicebus.ReceivedMessage, options *azservicebus.DeferMessageOptions) error
}

// MessageReceiver receives and settles messages. [*azservicebus.Receiver] and
// [*azservicebus.SessionReceiver] satisfy it. ReceiveMessages must not be called from two
// goroutines at once (the SDK forbids it).
type MessageReceiver interface {
	Settler
	ReceiveMessages(ctx context.Context, maxMessages int, options *azservicebus.ReceiveMessagesOptions) ([]*azservicebus.ReceivedMessage, error)
}

// LockRenewer renews the peek-lock of one message and writes the new expiry to
// message.LockedUntil, as [*azservicebus.Receiver] does. Callers that read LockedUntil
// while a renewal may run must synchronise with it.
type LockRenewer interface {
	RenewMessageLock(ctx context.Context, message *azservicebus.ReceivedMessage, options *azservicebus.RenewMessageLockOptions) error
}

// LockingReceiver is a MessageReceiver that can renew message locks: a peek-lock,
// non-session receiver such as [*azservicebus.Receiver].
type LockingReceiver interface {
	MessageReceiver
	LockRenewer
}

// MessageScheduler schedules messages to be enqueued at a later time: what a processor's
// delayed redelivery needs of the message's entity. [*azservicebus.Sender] satisfies it, and
// so does the sender of package sbtest. ScheduleMessages returns the sequence numbers of
// the scheduled messages, in order.
type MessageScheduler interface {
	ScheduleMessages(ctx context.Context, messages []*azservicebus.Message, scheduledEnqueueTime time.Time, options *azservicebus.ScheduleMessagesOptions) ([]int64, error)
}

// Compile-time proof that the SDK's types satisfy the interfaces the toolkit consumes.
var (
	_ MessageSender    = (*azservicebus.Sender)(nil)
	_ MessageScheduler = (*azservicebus.Sender)(nil)
	_ Batch            = (*azservicebus.MessageBatch)(nil)
	_ LockingReceiver  = (*azservicebus.Receiver)(nil)
	_ MessageReceiver  = (*azservicebus.SessionReceiver)(nil)
	_ BatchSender      = (*sdkBatchSender)(nil)
)
