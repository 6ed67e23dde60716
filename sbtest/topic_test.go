package sbtest

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
)

func TestTopicFanOut(t *testing.T) {
	ctx := context.Background()
	ns := NewNamespace(nil)
	top, err := ns.NewTopic("t", nil)
	if err != nil {
		t.Fatal(err)
	}
	s1, _ := top.NewSubscription("s1", nil)
	s2, _ := top.NewSubscription("s2", &EntityOptions{MaxDeliveryCount: 1})
	if e, ok := ns.Entity("t/Subscriptions/s2"); !ok || e != s2 || e.Name() != "t/Subscriptions/s2" {
		t.Fatal("Entity lookup of a subscription")
	}
	if got := top.Subscriptions(); !slices.Equal(got, []*Entity{s1, s2}) {
		t.Fatal("Subscriptions()")
	}
	s, _ := ns.NewSender("t", nil)
	sendAll(t, s, "a", "b")
	r1, _ := ns.NewReceiverForSubscription("t", "s1", nil)
	r2, _ := ns.NewReceiverForSubscription("t", "s2", nil)
	m1 := receive(t, r1, 10, time.Second)
	m2 := receive(t, r2, 10, time.Second)
	if !slices.Equal(bodies(m1), []string{"a", "b"}) || !slices.Equal(bodies(m2), []string{"a", "b"}) {
		t.Fatalf("fan-out: %v %v", bodies(m1), bodies(m2))
	}
	if *m1[1].SequenceNumber != 2 || *m2[1].SequenceNumber != 2 {
		t.Fatal("subscriptions do not share the topic's sequence numbers")
	}
	// Settling in one subscription leaves the other alone; each applies its own options.
	for _, m := range m1 {
		if err := r1.CompleteMessage(ctx, m, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := r2.AbandonMessage(ctx, m2[0], nil); err != nil {
		t.Fatal(err)
	}
	if s1.Counts().Active != 0 || s2.Counts().DeadLetter != 1 || s2.Counts().Locked != 1 {
		t.Fatalf("s1 active %d, s2 dlq %d locked %d", s1.Counts().Active, s2.Counts().DeadLetter, s2.Counts().Locked)
	}
	// The DLQ of a subscription is receivable too.
	dr, _ := ns.NewReceiverForSubscription("t", "s2", &ReceiverOptions{SubQueue: azservicebus.SubQueueDeadLetter})
	if got := receiveOne(t, dr); string(got.Body) != "a" || *got.DeadLetterReason != MaxDeliveryCountExceededReason {
		t.Fatalf("DLQ: %q", got.Body)
	}
	if st := top.Stats(); st.Sent != 2 {
		t.Fatalf("topic stats %+v", st)
	}
	// A queue receiver cannot open a subscription and a topic is not a queue.
	if _, err := ns.NewReceiverForQueue("t/Subscriptions/s1", nil); code(err) != azservicebus.CodeNotFound {
		t.Fatalf("err = %v", err)
	}
	if _, err := ns.NewSender("t/Subscriptions/s1", nil); code(err) != azservicebus.CodeNotFound {
		t.Fatalf("err = %v", err)
	}
}

func TestTopicScheduleCancelAndDuplicates(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		ns := NewNamespace(nil)
		top, _ := ns.NewTopic("t", &EntityOptions{DuplicateDetectionWindow: time.Hour})
		a, _ := top.NewSubscription("a", nil)
		b, _ := top.NewSubscription("b", nil)
		s, _ := ns.NewSender("t", nil)
		seqs, err := s.ScheduleMessages(ctx, []*azservicebus.Message{msg("x"), msg("y")}, time.Now().Add(time.Minute), nil)
		if err != nil {
			t.Fatal(err)
		}
		if a.Counts().Scheduled != 2 || b.Counts().Scheduled != 2 {
			t.Fatal("schedule not fanned out")
		}
		if err := s.CancelScheduledMessages(ctx, seqs[:1], nil); err != nil {
			t.Fatal(err)
		}
		if a.Counts().Scheduled != 1 || b.Counts().Scheduled != 1 || top.Stats().Cancelled != 1 {
			t.Fatalf("cancel: %d %d %+v", a.Counts().Scheduled, b.Counts().Scheduled, top.Stats())
		}
		for range 2 {
			if err := s.SendMessage(ctx, &azservicebus.Message{MessageID: sp("dup")}, nil); err != nil {
				t.Fatal(err)
			}
		}
		if a.Counts().Active != 1 || top.Stats().DuplicatesDropped != 1 {
			t.Fatalf("duplicates: active %d stats %+v", a.Counts().Active, top.Stats())
		}
		time.Sleep(time.Minute)
		if a.Counts().Active != 2 || b.Counts().Active != 2 {
			t.Fatal("scheduled message not activated in every subscription")
		}
	})
}

func TestSubscriptionCreatedLaterSeesOnlyLaterMessages(t *testing.T) {
	ns := NewNamespace(nil)
	top, _ := ns.NewTopic("t", nil)
	s, _ := ns.NewSender("t", nil)
	sendAll(t, s, "before")
	sub, _ := top.NewSubscription("late", nil)
	sendAll(t, s, "after")
	if got := sub.Active(); len(got) != 1 || string(got[0].Body) != "after" {
		t.Fatalf("got %v", bodies(got))
	}
}

// A topic's options may change while subscriptions are created (the admin API does both):
// each new subscription takes the topic's DefaultTTL under the topic's lock.
func TestNewSubscriptionWhileTopicOptionsChange(t *testing.T) {
	ns := NewNamespace(nil)
	top, err := ns.NewTopic("t", nil)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range 50 {
			if err := top.SetOptions(&EntityOptions{DefaultTTL: time.Duration(i+1) * time.Minute}); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	for i := range 50 {
		if _, err := top.NewSubscription(fmt.Sprint("s", i), nil); err != nil {
			t.Fatal(err)
		}
	}
	<-done
	for _, s := range top.Subscriptions() {
		s.mu.Lock()
		ttl := s.defaultTTL
		s.mu.Unlock()
		if ttl != 50*time.Minute {
			t.Fatalf("%s: default TTL %v, want the topic's last, 50m", s.Name(), ttl)
		}
	}
}
