package sbkit

import (
	"context"
	"errors"
	"fmt"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
)

// ErrForeignBatch is returned by a BatchSender's SendBatch when the batch was not made by
// that sender's NewBatch.
var ErrForeignBatch = errors.New("sbkit: batch was not created by this sender")

// NewBatchSender adapts an SDK sender to BatchSender. The adapter adds nothing but the
// type conversion between Batch and [*azservicebus.MessageBatch]; it is as safe for
// concurrent use as the SDK sender is.
func NewBatchSender(s *azservicebus.Sender) BatchSender {
	return &sdkBatchSender{Sender: s}
}

type sdkBatchSender struct {
	*azservicebus.Sender
}

func (s *sdkBatchSender) NewBatch(ctx context.Context, options *azservicebus.MessageBatchOptions) (Batch, error) {
	return s.NewMessageBatch(ctx, options)
}

func (s *sdkBatchSender) SendBatch(ctx context.Context, batch Batch, options *azservicebus.SendMessageBatchOptions) error {
	mb, ok := batch.(*azservicebus.MessageBatch)
	if !ok {
		return fmt.Errorf("%w: got %T", ErrForeignBatch, batch)
	}
	return s.SendMessageBatch(ctx, mb, options)
}
