package sbtest

import (
	"context"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/sbkit/sbkit"
)

func TestStatsCountEveryOperation(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, nil)
	sendAll(t, f.s, "a", "b", "c", "d")
	b, _ := f.s.NewBatch(ctx, nil)
	_ = b.AddMessage(msg("e"), nil)
	_ = b.AddMessage(msg("f"), nil)
	if err := f.s.SendBatch(ctx, b, nil); err != nil {
		t.Fatal(err)
	}
	seqs, _ := f.s.ScheduleMessages(ctx, []*azservicebus.Message{msg("s1"), msg("s2")}, time.Now().Add(time.Hour), nil)
	_ = f.s.CancelScheduledMessages(ctx, seqs[:1], nil)

	ms := receive(t, f.r, 6, time.Second)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(f.r.CompleteMessage(ctx, ms[0], nil))
	must(f.r.AbandonMessage(ctx, ms[1], nil))
	must(f.r.DeadLetterMessage(ctx, ms[2], nil))
	must(f.r.DeferMessage(ctx, ms[3], nil))
	must(f.r.RenewMessageLock(ctx, ms[4], nil))
	f.q.ExpireLock(ms[5].LockToken)
	d, _ := f.r.ReceiveDeferredMessages(ctx, []int64{*ms[3].SequenceNumber}, nil)
	must(f.r.CompleteMessage(ctx, d[0], nil))

	want := EntityStats{
		Sent: 8, Batches: 1, Scheduled: 2, Cancelled: 1, Received: 7, Completed: 2, Abandoned: 1,
		DeadLettered: 1, Deferred: 1, Renewed: 1, LockExpired: 1, PeakInFlightSends: 1,
		PeakInFlightBytes: 2 * sbkit.MessageSize(msg("s1")), // the schedule request
	}
	if got := f.q.Stats(); got != want {
		t.Fatalf("stats\n got %+v\nwant %+v", got, want)
	}
}

func TestInspectionReturnsCopies(t *testing.T) {
	f := newFixture(t, nil)
	sendAll(t, f.s, "a")
	a := f.q.Active()
	a[0].Body[0] = 'X'
	a[0].ApplicationProperties = map[string]any{"x": 1}
	if got := receiveOne(t, f.r); string(got.Body) != "a" || got.ApplicationProperties != nil {
		t.Fatalf("inspection leaked: %q %v", got.Body, got.ApplicationProperties)
	}
	if l := f.q.Locked(); len(l) != 1 || l[0].LockToken == [16]byte{} {
		t.Fatalf("Locked() = %+v", l)
	}
}

func TestReceiveDeferredInReceiveAndDeleteMode(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, nil)
	sendAll(t, f.s, "a")
	m := receiveOne(t, f.r)
	if err := f.r.DeferMessage(ctx, m, nil); err != nil {
		t.Fatal(err)
	}
	rd := f.receiver(t, &ReceiverOptions{ReceiveMode: azservicebus.ReceiveModeReceiveAndDelete})
	got, err := rd.ReceiveDeferredMessages(ctx, []int64{*m.SequenceNumber}, nil)
	if err != nil || len(got) != 1 || got[0].State != azservicebus.MessageStateDeferred || got[0].LockToken != [16]byte{} {
		t.Fatalf("got %+v, %v", got, err)
	}
	if f.q.Counts().Deferred != 0 || f.q.Counts().Locked != 0 {
		t.Fatal("receive-and-delete left the deferred message")
	}
}
