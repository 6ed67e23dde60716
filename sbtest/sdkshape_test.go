package sbtest

import (
	"context"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/sbkit/sbkit"
)

// sdkReceiver is the part of *azservicebus.Receiver that sbtest's Receiver models, with
// the SDK's signatures. Both types satisfying it proves that code written against any
// subset of these methods compiles against either.
type sdkReceiver interface {
	sbkit.LockingReceiver
	ReceiveDeferredMessages(ctx context.Context, sequenceNumbers []int64, options *azservicebus.ReceiveDeferredMessagesOptions) ([]*azservicebus.ReceivedMessage, error)
	PeekMessages(ctx context.Context, maxMessageCount int, options *azservicebus.PeekMessagesOptions) ([]*azservicebus.ReceivedMessage, error)
}

// sdkSender is the same for *azservicebus.Sender and sbtest's Sender.
type sdkSender interface {
	sbkit.MessageSender
	ScheduleMessages(ctx context.Context, messages []*azservicebus.Message, scheduledEnqueueTime time.Time, options *azservicebus.ScheduleMessagesOptions) ([]int64, error)
	CancelScheduledMessages(ctx context.Context, sequenceNumbers []int64, options *azservicebus.CancelScheduledMessagesOptions) error
}

var (
	_ sdkReceiver = (*azservicebus.Receiver)(nil)
	_ sdkReceiver = (*Receiver)(nil)
	_ sdkSender   = (*azservicebus.Sender)(nil)
	_ sdkSender   = (*Sender)(nil)
)
