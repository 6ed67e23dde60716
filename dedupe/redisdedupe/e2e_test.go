package redisdedupe_test

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/sbkit/sbkit"
	"github.com/sbkit/sbkit/dedupe"
	"github.com/sbkit/sbkit/dedupe/redisdedupe"
	"github.com/sbkit/sbkit/sbtest"
)

// TestCompleteFailsRedeliverySkippedAcrossWorkers: worker A processes a message but its
// Complete fails and its lock is lost; the broker redelivers to worker B (another Redis
// client, as on another machine), which skips it as a duplicate and completes it.
func TestCompleteFailsRedeliverySkippedAcrossWorkers(t *testing.T) {
	testRedis.Require(t)
	ctx := context.Background()
	ns := sbtest.NewTestNamespace(t, &sbtest.NamespaceOptions{Queues: map[string]*sbtest.EntityOptions{"orders": nil}})
	q, _ := ns.Entity("orders")
	snd, _ := ns.NewSender("orders", nil)
	id := "job-42"
	if err := snd.SendMessage(ctx, &azservicebus.Message{MessageID: &id}, nil); err != nil {
		t.Fatal(err)
	}
	prefix := prefixFor(t)
	var runs atomic.Int64
	worker := func() (sbkit.Handler, *sbtest.Receiver, *dedupe.Filter) {
		s, _ := redisdedupe.New(newClient(t), &redisdedupe.Options{Prefix: prefix})
		f, err := dedupe.New(s, &dedupe.Options{Entity: "orders"})
		if err != nil {
			t.Fatal(err)
		}
		r, _ := ns.NewReceiverForQueue("orders", nil)
		t.Cleanup(func() { _ = r.Close(ctx) })
		h, err := f.Wrap(func(context.Context, *azservicebus.ReceivedMessage) error { runs.Add(1); return nil })
		if err != nil {
			t.Fatal(err)
		}
		return h, r, f
	}
	ha, ra, _ := worker()
	hb, rb, fb := worker()

	q.InjectFault(sbtest.Fault{Op: sbtest.OpComplete, Count: 1})
	msgs, _ := ra.ReceiveMessages(ctx, 1, nil)
	if err := ha(ctx, msgs[0]); err != nil {
		t.Fatalf("worker A: %v", err)
	}
	if err := ra.CompleteMessage(ctx, msgs[0], nil); err == nil {
		t.Fatal("injected Complete failure did not happen")
	}
	q.ExpireLock(msgs[0].LockToken) // the lock runs out: the broker delivers again

	msgs, _ = rb.ReceiveMessages(ctx, 1, nil)
	res := hb(ctx, msgs[0])
	action, se := sbkit.SettlementOf(res)
	if action != sbkit.ActionComplete || se == nil || se.Reason != dedupe.DuplicateReason {
		t.Fatalf("worker B: %v, want skipped as duplicate", res)
	}
	if err := rb.CompleteMessage(ctx, msgs[0], nil); err != nil {
		t.Fatal(err)
	}
	if runs.Load() != 1 || fb.Stats().DuplicatesSkipped != 1 || q.Counts().Active+q.Counts().Locked != 0 {
		t.Fatalf("runs %d, B stats %+v, left %d", runs.Load(), fb.Stats(), q.Counts().Active+q.Counts().Locked)
	}
}
