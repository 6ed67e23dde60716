package sbtest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus/admin"
	goamqp "github.com/Azure/go-amqp"
)

func wantDisabled(t *testing.T, what string, err error) {
	t.Helper()
	var ae *goamqp.Error
	if !errors.As(err, &ae) || ae.Condition != condEntityDisabled {
		t.Fatalf("%s: %v, want %s", what, err, condEntityDisabled)
	}
}

// "Service Bus entity status": SendDisabled refuses sends, ReceiveDisabled receives,
// Disabled both, each with com.microsoft:entity-disabled (the condition the SDK knows,
// azservicebus internal/errors.go); Active restores both.
func TestEntityStatus(t *testing.T) {
	ctx := context.Background()
	ns := NewNamespace(nil)
	q, _ := ns.NewQueue("q", nil)
	s, _ := ns.NewSender("q", nil)
	r, _ := ns.NewReceiverForQueue("q", nil)
	sendAll(t, s, "before")
	if err := q.SetStatus(StatusSendDisabled); err != nil {
		t.Fatal(err)
	}
	wantDisabled(t, "send to SendDisabled", s.SendMessage(ctx, msg("x"), nil))
	if got := receive(t, r, 1, time.Second); len(got) != 1 {
		t.Fatal("a SendDisabled queue refused a receive")
	}
	if err := q.SetStatus(StatusReceiveDisabled); err != nil {
		t.Fatal(err)
	}
	_, err := r.ReceiveMessages(ctx, 1, nil)
	wantDisabled(t, "receive from ReceiveDisabled", err)
	sendAll(t, s, "ok")
	if err := q.SetStatus(StatusDisabled); err != nil {
		t.Fatal(err)
	}
	wantDisabled(t, "send to Disabled", s.SendMessage(ctx, msg("x"), nil))
	_, err = r.ReceiveMessages(ctx, 1, nil)
	wantDisabled(t, "receive from Disabled", err)
	if err := q.SetStatus(StatusActive); err != nil || q.Status() != StatusActive {
		t.Fatal(err)
	}
	sendAll(t, s, "after")
	if err := q.SetStatus("Sleeping"); !errors.Is(err, ErrInvalidOptions) {
		t.Fatalf("bad status: %v", err)
	}

	top, _ := ns.NewTopic("t", nil)
	ts, _ := ns.NewSender("t", nil)
	if err := top.SetStatus(StatusSendDisabled); err != nil {
		t.Fatal(err)
	}
	wantDisabled(t, "send to a SendDisabled topic", ts.SendMessage(ctx, msg("x"), nil))
}

// The same through the admin API and the real SDK: a queue created SendDisabled refuses
// the SDK's send, and an update to Active lets it through.
func TestAdminStatusOverTheWire(t *testing.T) {
	w, ac := adminWire(t)
	ctx := wireCtx(t)
	st := admin.EntityStatusSendDisabled
	if _, err := ac.CreateQueue(ctx, "q", &admin.CreateQueueOptions{Properties: &admin.QueueProperties{Status: &st}}); err != nil {
		t.Fatal(err)
	}
	snd, err := w.client.NewSender("q", nil)
	if err != nil {
		t.Fatal(err)
	}
	err = snd.SendMessage(ctx, &azservicebus.Message{Body: []byte("x")}, nil)
	var ae *goamqp.Error
	if !errors.As(err, &ae) || string(ae.Condition) != condEntityDisabled {
		t.Fatalf("send to SendDisabled over the wire: %v", err)
	}
	got, err := ac.GetQueue(ctx, "q", nil)
	if err != nil || *got.Status != admin.EntityStatusSendDisabled {
		t.Fatalf("GetQueue: %v", err)
	}
	got.Status = to.Ptr(admin.EntityStatusActive)
	if _, err := ac.UpdateQueue(ctx, "q", got.QueueProperties, nil); err != nil {
		t.Fatal(err)
	}
	snd2, err := w.client.NewSender("q", nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := snd2.SendMessage(ctx, &azservicebus.Message{Body: []byte("x")}, nil); err != nil {
		t.Fatalf("send after re-enabling: %v", err)
	}
}
