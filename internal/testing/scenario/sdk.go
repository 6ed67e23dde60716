package scenario

import (
	"context"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/sbkit/sbkit"
)

// sdkQueue is a queue reached through the real [*azservicebus.Client]: on sbtest.NewServer
// or on a real namespace.
type sdkQueue struct {
	client *azservicebus.Client
	name   string
	props  Properties
}

func (q *sdkQueue) Name() string           { return q.name }
func (q *sdkQueue) Properties() Properties { return q.props }

func (q *sdkQueue) NewSender(t *testing.T) sbkit.BatchSender {
	t.Helper()
	s, err := q.client.NewSender(q.name, nil)
	if err != nil {
		t.Fatalf("new sender: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), closeTimeout)
		defer cancel()
		_ = s.Close(ctx)
	})
	return sbkit.NewBatchSender(s)
}

func (q *sdkQueue) NewReceiver(t *testing.T, mode azservicebus.ReceiveMode, deadLetter bool) Receiver {
	t.Helper()
	r, err := newSDKReceiver(q.client, q.name, mode, deadLetter)
	if err != nil {
		t.Fatalf("new receiver: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), closeTimeout)
		defer cancel()
		_ = r.Close(ctx)
	})
	return r
}

func (q *sdkQueue) Sessions() sbkit.SessionAcceptor {
	return sbkit.NewQueueSessionAcceptor(q.client, q.name, nil)
}

func newSDKReceiver(client *azservicebus.Client, queue string, mode azservicebus.ReceiveMode, deadLetter bool) (*azservicebus.Receiver, error) {
	opts := &azservicebus.ReceiverOptions{ReceiveMode: mode}
	if deadLetter {
		opts.SubQueue = azservicebus.SubQueueDeadLetter
	}
	return client.NewReceiverForQueue(queue, opts)
}
