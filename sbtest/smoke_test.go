package sbtest

import (
	"context"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
)

func TestSmoke(t *testing.T) {
	ctx := context.Background()
	ns := NewNamespace(nil)
	q, err := ns.NewQueue("q", nil)
	if err != nil {
		t.Fatal(err)
	}
	s, _ := ns.NewSender("q")
	r, _ := ns.NewReceiverForQueue("q", nil)
	for range 3 {
		if err := s.SendMessage(ctx, &azservicebus.Message{Body: []byte("x")}, nil); err != nil {
			t.Fatal(err)
		}
	}
	ms, err := r.ReceiveMessages(ctx, 10, nil)
	if err != nil || len(ms) != 3 {
		t.Fatal(len(ms), err)
	}
	for i, m := range ms {
		if *m.SequenceNumber != int64(i+1) || m.DeliveryCount != 1 {
			t.Fatalf("seq %d dc %d", *m.SequenceNumber, m.DeliveryCount)
		}
		if err := r.CompleteMessage(ctx, m, nil); err != nil {
			t.Fatal(err)
		}
	}
	if q.ActiveCount() != 0 || q.LockedCount() != 0 || q.Stats().Completed != 3 {
		t.Fatalf("%+v", q.Stats())
	}
}
