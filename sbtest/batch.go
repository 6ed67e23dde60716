package sbtest

import (
	"context"
	"fmt"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/sbkit/sbkit"
)

// Batch is a batch made by Sender.NewBatch; it satisfies [sbkit.Batch]. Messages are copied
// when added, so later changes to them do not affect the batch. Not safe for concurrent
// use.
type Batch struct {
	sender   *Sender
	maxBytes uint64
	bytes    uint64
	out      []outgoing
}

var _ sbkit.Batch = (*Batch)(nil)

// NewBatch returns an empty batch. options.MaxBytes (0 = default) is the batch's size
// limit; it defaults to, and is capped at, the namespace's MaxMessageSize. After Close it
// returns CodeClosed.
func (s *Sender) NewBatch(ctx context.Context, options *azservicebus.MessageBatchOptions) (sbkit.Batch, error) {
	if s.closed.Load() {
		return nil, errClosed()
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	max := uint64(s.ns.maxSize)
	if options != nil && options.MaxBytes > 0 && options.MaxBytes < max {
		max = options.MaxBytes
	}
	return &Batch{sender: s, maxBytes: max}, nil
}

// AddMessage adds a copy of message. It returns [sbkit.ErrNilMessage] for nil and
// [azservicebus.ErrMessageTooLarge] (unwrapped, as the SDK does) when the message does not
// fit in what is left of the batch. options may be nil.
func (b *Batch) AddMessage(message *azservicebus.Message, options *azservicebus.AddMessageOptions) error {
	if message == nil {
		return sbkit.ErrNilMessage
	}
	o := outgoing{p: newPayload(message)}
	if message.ScheduledEnqueueTime != nil {
		o.sched = *message.ScheduledEnqueueTime
	}
	if b.bytes+uint64(o.p.size) > b.maxBytes {
		return azservicebus.ErrMessageTooLarge
	}
	b.bytes += uint64(o.p.size)
	b.out = append(b.out, o)
	return nil
}

// NumMessages returns how many messages the batch holds.
func (b *Batch) NumMessages() int32 { return int32(len(b.out)) }

// NumBytes returns the batch's size: the sum of its messages' [sbkit.MessageSize].
func (b *Batch) NumBytes() uint64 { return b.bytes }

// SendBatch sends a batch made by this sender's NewBatch as one request: all its messages
// are stored, or none. It returns [sbkit.ErrForeignBatch] (wrapped) for any other batch. An
// empty batch is sent as a request that stores nothing.
func (s *Sender) SendBatch(ctx context.Context, batch sbkit.Batch, options *azservicebus.SendMessageBatchOptions) error {
	b, ok := batch.(*Batch)
	if !ok || b == nil || b.sender != s {
		return fmt.Errorf("sbtest: %w: got %T", sbkit.ErrForeignBatch, batch)
	}
	_, err := s.do(ctx, b.out, true)
	return err
}
