package sbtest

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/sbkit/sbkit"
)

// DeliveryCount goes up on abandon and lock expiry, not on delivery ("Messages, payloads,
// and serialization"); the dead-letter queue counts none (SDK live test
// TestMessageSettlementUsingReceiver).
func TestDeliveryCountCountsAbandonNotDelivery(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, &EntityOptions{MaxDeliveryCount: 2})
	dlq := f.receiver(t, &ReceiverOptions{SubQueue: azservicebus.SubQueueDeadLetter})
	sendAll(t, f.s, "first", "poison")

	m := receiveOne(t, f.r)
	if err := f.r.DeadLetterMessage(ctx, m, nil); err != nil {
		t.Fatal(err)
	}
	d := receiveOne(t, dlq)
	if d.DeliveryCount != 1 {
		t.Fatalf("dead-lettered on its first delivery: DeliveryCount %d, want 1", d.DeliveryCount)
	}
	if err := dlq.AbandonMessage(ctx, d, nil); err != nil {
		t.Fatal(err)
	}
	if d = receiveOne(t, dlq); d.DeliveryCount != 1 {
		t.Fatalf("abandoned in the dead-letter queue: DeliveryCount %d, want 1", d.DeliveryCount)
	}
	if err := dlq.CompleteMessage(ctx, d, nil); err != nil {
		t.Fatal(err)
	}

	for want := uint32(1); want <= 2; want++ {
		m := receiveOne(t, f.r)
		if m.DeliveryCount != want {
			t.Fatalf("delivery %d: DeliveryCount %d", want, m.DeliveryCount)
		}
		if err := f.r.AbandonMessage(ctx, m, nil); err != nil {
			t.Fatal(err)
		}
	}
	d = receiveOne(t, dlq)
	if string(d.Body) != "poison" || *d.DeadLetterReason != MaxDeliveryCountExceededReason || d.DeliveryCount != 2 {
		t.Fatalf("dead-lettered after MaxDeliveryCount: %q %q DeliveryCount %d, want poison, %s, 2", d.Body, *d.DeadLetterReason, d.DeliveryCount, MaxDeliveryCountExceededReason)
	}
}

// The released outcome gives a message back uncounted, and a lock that expires after its
// receiver closed counts nothing either, while one that expires under a live receiver
// counts ("Messages, payloads, and serialization").
func TestLockExpiryCountsOnlyLiveLocks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, &EntityOptions{LockDuration: 10 * time.Second})
		sendAll(t, f.s, "a")
		receiveOne(t, f.r)
		if m := receive(t, f.r, 1, time.Minute)[0]; m.DeliveryCount != 2 {
			t.Fatalf("after a lock expiry under a live receiver: DeliveryCount %d, want 2", m.DeliveryCount)
		}
		_ = f.r.Close(context.Background())
		r2 := f.receiver(t, nil)
		if m := receive(t, r2, 1, time.Minute)[0]; m.DeliveryCount != 2 {
			t.Fatalf("after a lock expiry of a closed receiver: DeliveryCount %d, want 2", m.DeliveryCount)
		}
	})
}

// A scheduled message becomes active with a new sequence number, after the messages sent
// before its activation (Service Bus docs, message sequencing: scheduled messages), on a
// queue and on a topic's subscriptions.
func TestScheduledMessageNumberedAtActivation(t *testing.T) {
	for _, topic := range []bool{false, true} {
		synctest.Test(t, func(t *testing.T) {
			ctx := context.Background()
			ns := NewNamespace(nil)
			var q *Entity
			var s *Sender
			if topic {
				top, _ := ns.NewTopic("t", nil)
				q, _ = top.NewSubscription("s", nil)
				s, _ = ns.NewSender("t", nil)
			} else {
				q, _ = ns.NewQueue("q", nil)
				s, _ = ns.NewSender("q", nil)
			}
			seqs, err := s.ScheduleMessages(ctx, []*azservicebus.Message{msg("scheduled")}, time.Now().Add(time.Minute), nil)
			if err != nil || len(seqs) != 1 || seqs[0] != 1 {
				t.Fatalf("ScheduleMessages = %v, %v", seqs, err)
			}
			time.Sleep(2 * time.Minute)
			sendAll(t, s, "later")
			got := q.Active()
			if len(got) != 2 || string(got[0].Body) != "scheduled" || *got[0].SequenceNumber != 2 || *got[1].SequenceNumber != 3 {
				t.Fatalf("active %d messages, first %q #%d; want scheduled #2, later #3", len(got), got[0].Body, *got[0].SequenceNumber)
			}
			if s.CancelScheduledMessages(ctx, seqs, nil) != nil || q.Counts().Active != 2 {
				t.Fatal("cancelling an activated message's scheduled number removed it")
			}
		})
	}
}

// "Message expiration (Time to Live)": a message without its own TTL shows the maximum
// TTL to peek until it is received (the entity's TTL is applied on the receive path); one
// with a TTL shows it.
func TestPeekOfMessageWithoutTTL(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, &EntityOptions{DefaultTTL: time.Hour})
	sendAll(t, f.s, "no-ttl")
	if err := f.s.SendMessage(ctx, &azservicebus.Message{Body: []byte("ttl"), TimeToLive: ptr(time.Minute)}, nil); err != nil {
		t.Fatal(err)
	}
	peek := func() []*azservicebus.ReceivedMessage {
		t.Helper()
		ms, err := f.r.PeekMessages(ctx, 2, &azservicebus.PeekMessagesOptions{FromSequenceNumber: ptr(int64(1))})
		if err != nil || len(ms) != 2 {
			t.Fatalf("peek: %d, %v", len(ms), err)
		}
		return ms
	}
	ms := peek()
	if *ms[0].TimeToLive != sbkit.MaxTTL || *ms[1].TimeToLive != time.Minute {
		t.Fatalf("peek before a receive: TTLs %v, %v; want the maximum, 1m", *ms[0].TimeToLive, *ms[1].TimeToLive)
	}
	m := receiveOne(t, f.r)
	if *m.TimeToLive != time.Hour {
		t.Fatalf("received TTL %v, want the entity's 1h", *m.TimeToLive)
	}
	if err := f.r.AbandonMessage(ctx, m, nil); err != nil {
		t.Fatal(err)
	}
	if ms = peek(); *ms[0].TimeToLive != time.Hour {
		t.Fatalf("peek after a receive: TTL %v, want 1h", *ms[0].TimeToLive)
	}
}
