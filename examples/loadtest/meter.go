package main

import (
	"context"
	"sync/atomic"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/sbkit/sbkit"
)

// meter wraps a BatchSender and records the peak number of bytes inside send requests at
// the same instant: message bodies for SendMessage, NumBytes for SendBatch. It measures
// on the client side, so it works the same against the in-memory broker and a real
// namespace. It is safe for concurrent use.
type meter struct {
	sbkit.BatchSender
	inFlight atomic.Int64
	peak     atomic.Int64
}

func (m *meter) SendMessage(ctx context.Context, msg *azservicebus.Message, opts *azservicebus.SendMessageOptions) error {
	var n int64
	if msg != nil {
		n = int64(len(msg.Body))
	}
	m.enter(n)
	defer m.inFlight.Add(-n)
	return m.BatchSender.SendMessage(ctx, msg, opts)
}

func (m *meter) SendBatch(ctx context.Context, b sbkit.Batch, opts *azservicebus.SendMessageBatchOptions) error {
	var n int64
	if b != nil {
		n = int64(b.NumBytes())
	}
	m.enter(n)
	defer m.inFlight.Add(-n)
	return m.BatchSender.SendBatch(ctx, b, opts)
}

func (m *meter) enter(n int64) {
	cur := m.inFlight.Add(n)
	for {
		p := m.peak.Load()
		if cur <= p || m.peak.CompareAndSwap(p, cur) {
			return
		}
	}
}
