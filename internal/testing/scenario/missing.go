package scenario

import (
	"context"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
)

// MissingQueue is a queue name no entity has, and the operations a scenario tries on it.
// Each opens what it needs (a sender or a receiver), tries one operation, closes what it
// opened and returns the first error: sbtest refuses to open, the SDK fails the first
// operation.
type MissingQueue struct {
	openSender   func() (missingSender, error)
	openReceiver func() (missingReceiver, error)
}

// missingSender and missingReceiver are the parts of the SDK's and sbtest's senders and
// receivers the missing-entity scenario uses.
type missingSender interface {
	SendMessage(ctx context.Context, message *azservicebus.Message, options *azservicebus.SendMessageOptions) error
	ScheduleMessages(ctx context.Context, messages []*azservicebus.Message, at time.Time, options *azservicebus.ScheduleMessagesOptions) ([]int64, error)
	Close(ctx context.Context) error
}

type missingReceiver interface {
	ReceiveMessages(ctx context.Context, maxMessages int, options *azservicebus.ReceiveMessagesOptions) ([]*azservicebus.ReceivedMessage, error)
	PeekMessages(ctx context.Context, maxMessageCount int, options *azservicebus.PeekMessagesOptions) ([]*azservicebus.ReceivedMessage, error)
	Close(ctx context.Context) error
}

func (q MissingQueue) send(ctx context.Context, f func(missingSender) error) error {
	s, err := q.openSender()
	if err != nil {
		return err
	}
	defer func() { _ = s.Close(context.Background()) }()
	return f(s)
}

func (q MissingQueue) receive(ctx context.Context, f func(missingReceiver) error) error {
	r, err := q.openReceiver()
	if err != nil {
		return err
	}
	defer func() { _ = r.Close(context.Background()) }()
	return f(r)
}

// Send sends one message.
func (q MissingQueue) Send(ctx context.Context) error {
	return q.send(ctx, func(s missingSender) error { return s.SendMessage(ctx, message("m", "x"), nil) })
}

// Schedule schedules one message a minute ahead.
func (q MissingQueue) Schedule(ctx context.Context) error {
	return q.send(ctx, func(s missingSender) error {
		_, err := s.ScheduleMessages(ctx, []*azservicebus.Message{message("m", "x")}, time.Now().Add(time.Minute), nil)
		return err
	})
}

// Receive receives in peek-lock mode.
func (q MissingQueue) Receive(ctx context.Context) error {
	return q.receive(ctx, func(r missingReceiver) error { _, err := r.ReceiveMessages(ctx, 1, nil); return err })
}

// Peek peeks one message.
func (q MissingQueue) Peek(ctx context.Context) error {
	return q.receive(ctx, func(r missingReceiver) error { _, err := r.PeekMessages(ctx, 1, nil); return err })
}

// sdkMissingQueue is a MissingQueue reached through an SDK client.
func sdkMissingQueue(client *azservicebus.Client, name string) MissingQueue {
	return MissingQueue{
		openSender: func() (missingSender, error) {
			s, err := client.NewSender(name, nil)
			if err != nil {
				return nil, err
			}
			return s, nil
		},
		openReceiver: func() (missingReceiver, error) {
			r, err := client.NewReceiverForQueue(name, nil)
			if err != nil {
				return nil, err
			}
			return r, nil
		},
	}
}
