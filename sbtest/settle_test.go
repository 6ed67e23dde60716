package sbtest

import (
	"context"
	"errors"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
)

func TestSettlements(t *testing.T) {
	type counts struct{ active, locked, deferred, dead int }
	tests := []struct {
		name   string
		settle func(r *Receiver, m *azservicebus.ReceivedMessage) error
		want   counts
	}{
		{"complete removes", func(r *Receiver, m *azservicebus.ReceivedMessage) error {
			return r.CompleteMessage(context.Background(), m, nil)
		}, counts{}},
		{"abandon returns", func(r *Receiver, m *azservicebus.ReceivedMessage) error {
			return r.AbandonMessage(context.Background(), m, nil)
		}, counts{active: 1}},
		{"dead-letter moves to DLQ", func(r *Receiver, m *azservicebus.ReceivedMessage) error {
			return r.DeadLetterMessage(context.Background(), m, &azservicebus.DeadLetterOptions{Reason: sp("r")})
		}, counts{dead: 1}},
		{"defer sets aside", func(r *Receiver, m *azservicebus.ReceivedMessage) error {
			return r.DeferMessage(context.Background(), m, nil)
		}, counts{deferred: 1}},
		{"no settlement keeps the lock", func(*Receiver, *azservicebus.ReceivedMessage) error { return nil }, counts{locked: 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, nil)
			sendAll(t, f.s, "a")
			m := receiveOne(t, f.r)
			if err := tt.settle(f.r, m); err != nil {
				t.Fatal(err)
			}
			got := counts{f.q.Counts().Active, f.q.Counts().Locked, f.q.Counts().Deferred, f.q.Counts().DeadLetter}
			if got != tt.want {
				t.Fatalf("counts = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestAbandonRedeliversFirstWithCountAndProperties(t *testing.T) {
	f := newFixture(t, nil)
	ctx := context.Background()
	sendAll(t, f.s, "a", "b", "c")
	ms := receive(t, f.r, 2, time.Second) // a, b locked
	if got := bodies(ms); !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("got %v", got)
	}
	err := f.r.AbandonMessage(ctx, ms[1], &azservicebus.AbandonMessageOptions{PropertiesToModify: map[string]any{"tries": 1}})
	if err != nil {
		t.Fatal(err)
	}
	// b comes back before c, with its delivery counted and the property set.
	next := receiveOne(t, f.r)
	if string(next.Body) != "b" || next.DeliveryCount != 2 || next.ApplicationProperties["tries"] != 1 {
		t.Fatalf("got %q count %d props %v", next.Body, next.DeliveryCount, next.ApplicationProperties)
	}
	if got := f.q.Stats().Abandoned; got != 1 {
		t.Fatalf("Abandoned = %d", got)
	}
}

func TestDeadLetterFields(t *testing.T) {
	f := newFixture(t, nil)
	ctx := context.Background()
	sendAll(t, f.s, "a", "b")
	ms := receive(t, f.r, 2, time.Second)
	if err := f.r.DeadLetterMessage(ctx, ms[0], &azservicebus.DeadLetterOptions{
		Reason: sp("bad"), ErrorDescription: sp("it was bad"), PropertiesToModify: map[string]any{"x": true},
	}); err != nil {
		t.Fatal(err)
	}
	if err := f.r.DeadLetterMessage(ctx, ms[1], nil); err != nil {
		t.Fatal(err)
	}
	dl := f.q.DeadLetters()
	if len(dl) != 2 {
		t.Fatalf("%d dead letters", len(dl))
	}
	if *dl[0].DeadLetterReason != "bad" || *dl[0].DeadLetterErrorDescription != "it was bad" || dl[0].ApplicationProperties["x"] != true {
		t.Fatalf("first: %+v", dl[0])
	}
	if dl[1].DeadLetterReason != nil || dl[1].DeadLetterErrorDescription != nil {
		t.Fatalf("no reason given, got %v", *dl[1].DeadLetterReason)
	}
	// The DLQ is receivable with SubQueueDeadLetter and settles normally.
	dr := f.receiver(t, &ReceiverOptions{SubQueue: azservicebus.SubQueueDeadLetter})
	got := receive(t, dr, 10, time.Second)
	if !slices.Equal(bodies(got), []string{"a", "b"}) || *got[0].DeadLetterReason != "bad" {
		t.Fatalf("DLQ receive: %v", bodies(got))
	}
	if err := dr.DeadLetterMessage(ctx, got[0], nil); !errors.Is(err, ErrNotSettleable) {
		t.Fatalf("dead-lettering from the DLQ: %v", err)
	}
	for _, m := range got {
		if err := dr.CompleteMessage(ctx, m, nil); err != nil {
			t.Fatal(err)
		}
	}
	if n := f.q.Counts().DeadLetter; n != 0 {
		t.Fatalf("%d dead-lettered after completing", n)
	}
}

func TestDeferAndReceiveDeferred(t *testing.T) {
	f := newFixture(t, nil)
	ctx := context.Background()
	sendAll(t, f.s, "a", "b")
	a := receiveOne(t, f.r)
	if err := f.r.DeferMessage(ctx, a, &azservicebus.DeferMessageOptions{PropertiesToModify: map[string]any{"d": 1}}); err != nil {
		t.Fatal(err)
	}
	// Deferred messages are not delivered by ReceiveMessages.
	b := receiveOne(t, f.r)
	if string(b.Body) != "b" {
		t.Fatalf("got %q", b.Body)
	}
	expectNone(t, f.r, 10*time.Millisecond)
	if d := f.q.Deferred(); len(d) != 1 || d[0].State != azservicebus.MessageStateDeferred {
		t.Fatalf("Deferred() = %v", d)
	}
	// Strict, as the service: one unknown number fails the request and locks nothing.
	if got, err := f.r.ReceiveDeferredMessages(ctx, []int64{*a.SequenceNumber, 999}, nil); code(err) != azservicebus.CodeNotFound || len(got) != 0 {
		t.Fatalf("with an unknown number: %d, %v; want CodeNotFound", len(got), err)
	}
	got, err := f.r.ReceiveDeferredMessages(ctx, []int64{*a.SequenceNumber}, nil)
	if err != nil || len(got) != 1 {
		t.Fatalf("ReceiveDeferredMessages = %d, %v", len(got), err)
	}
	d := got[0]
	// Receiving by sequence number counts no delivery ("Messages, payloads, and
	// serialization": only lock expiry and abandon do).
	if d.State != azservicebus.MessageStateDeferred || d.DeliveryCount != 1 || d.LockToken == [16]byte{} || d.ApplicationProperties["d"] != 1 {
		t.Fatalf("deferred message: %+v", d)
	}
	// Receiving it again while locked finds nothing.
	if again, _ := f.r.ReceiveDeferredMessages(ctx, []int64{*a.SequenceNumber}, nil); len(again) != 0 {
		t.Fatal("locked deferred message received twice")
	}
	// Abandon keeps it deferred; complete removes it.
	if err := f.r.AbandonMessage(ctx, d, nil); err != nil {
		t.Fatal(err)
	}
	if f.q.Counts().Deferred != 1 || f.q.Counts().Active != 0 {
		t.Fatalf("after abandon: deferred %d active %d", f.q.Counts().Deferred, f.q.Counts().Active)
	}
	got, _ = f.r.ReceiveDeferredMessages(ctx, []int64{*a.SequenceNumber}, nil)
	if err := f.r.CompleteMessage(ctx, got[0], nil); err != nil {
		t.Fatal(err)
	}
	if f.q.Counts().Deferred != 0 {
		t.Fatal("completed deferred message still there")
	}
}

func TestReceiveAndDelete(t *testing.T) {
	f := newFixture(t, nil)
	r := f.receiver(t, &ReceiverOptions{ReceiveMode: azservicebus.ReceiveModeReceiveAndDelete})
	sendAll(t, f.s, "a", "b")
	ms := receive(t, r, 10, time.Second)
	if len(ms) != 2 || ms[0].LockToken != [16]byte{} || ms[0].LockedUntil != nil || ms[0].DeliveryCount != 1 {
		t.Fatalf("got %+v", ms)
	}
	if f.q.Counts().Active != 0 || f.q.Counts().Locked != 0 {
		t.Fatal("messages not removed on receive")
	}
	wantCode(t, r.CompleteMessage(context.Background(), ms[0], nil), azservicebus.CodeLockLost)
}

func TestPeek(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, nil)
		ctx := context.Background()
		sendAll(t, f.s, "a", "b", "c")
		if _, err := f.s.ScheduleMessages(ctx, []*azservicebus.Message{msg("s")}, time.Now().Add(time.Hour), nil); err != nil {
			t.Fatal(err)
		}
		a := receiveOne(t, f.r) // locked
		b := receiveOne(t, f.r)
		if err := f.r.DeferMessage(ctx, b, nil); err != nil {
			t.Fatal(err)
		}
		p, err := f.r.PeekMessages(ctx, 2, nil)
		if err != nil || !slices.Equal(bodies(p), []string{"a", "b"}) {
			t.Fatalf("first peek %v %v", bodies(p), err)
		}
		if p[0].LockToken != [16]byte{} || p[0].LockedUntil != nil || p[1].State != azservicebus.MessageStateDeferred {
			t.Fatalf("peeked: %+v", p)
		}
		p, _ = f.r.PeekMessages(ctx, 10, nil) // the cursor moved on
		if !slices.Equal(bodies(p), []string{"c", "s"}) || p[1].State != azservicebus.MessageStateScheduled {
			t.Fatalf("second peek %v", bodies(p))
		}
		p, _ = f.r.PeekMessages(ctx, 10, &azservicebus.PeekMessagesOptions{FromSequenceNumber: ptr(int64(2))})
		if !slices.Equal(bodies(p), []string{"b", "c", "s"}) {
			t.Fatalf("peek from 2: %v", bodies(p))
		}
		// Peeking locks nothing: a's lock is still ours.
		if err := f.r.CompleteMessage(ctx, a, nil); err != nil {
			t.Fatal(err)
		}
		if _, err := f.r.PeekMessages(ctx, 0, nil); !errors.Is(err, ErrInvalidArgument) {
			t.Fatalf("max 0: %v", err)
		}
	})
}
