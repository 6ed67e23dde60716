package sbtest

import (
	"context"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
)

// "Chaining Service Bus entities with autoforwarding": a message sent to a forwarding
// queue ends in its target with EnqueuedSequenceNumber from where it was first enqueued
// (seed 004); the source keeps nothing.
func TestForwardQueueToQueue(t *testing.T) {
	ns := NewNamespace(nil)
	dst, _ := ns.NewQueue("dst", nil)
	src, err := ns.NewQueue("src", &EntityOptions{ForwardTo: "dst"})
	if err != nil {
		t.Fatal(err)
	}
	s, _ := ns.NewSender("src", nil)
	sendAll(t, s, "a", "b")
	if src.ActiveCount() != 0 {
		t.Fatalf("source kept %d messages", src.ActiveCount())
	}
	got := dst.Active()
	if len(got) != 2 || string(got[0].Body) != "a" || got[0].EnqueuedSequenceNumber == nil || *got[0].EnqueuedSequenceNumber != 1 ||
		*got[1].EnqueuedSequenceNumber != 2 {
		t.Fatalf("target got %v", bodies(got))
	}
}

// Dead-lettered messages go to ForwardDeadLetteredMessagesTo with DeadLetterSource set
// (seed 004: set only on messages dead-lettered and then auto-forwarded) and their
// reason; the source's dead-letter queue stays empty.
func TestForwardDeadLetters(t *testing.T) {
	ctx := context.Background()
	ns := NewNamespace(nil)
	dst, _ := ns.NewQueue("dlq-sink", nil)
	src, _ := ns.NewQueue("src", &EntityOptions{ForwardDeadLetteredMessagesTo: "dlq-sink", MaxDeliveryCount: 1})
	s, _ := ns.NewSender("src", nil)
	sendAll(t, s, "bad", "worse")
	r, _ := ns.NewReceiverForQueue("src", nil)
	ms := receive(t, r, 2, time.Second)
	if err := r.DeadLetterMessage(ctx, ms[0], &azservicebus.DeadLetterOptions{Reason: sp("r"), ErrorDescription: sp("d")}); err != nil {
		t.Fatal(err)
	}
	if err := r.AbandonMessage(ctx, ms[1], nil); err != nil { // MaxDeliveryCount 1: dead-lettered by the broker
		t.Fatal(err)
	}
	if src.DeadLetterCount() != 0 {
		t.Fatalf("source DLQ holds %d", src.DeadLetterCount())
	}
	got := dst.Active()
	if len(got) != 2 {
		t.Fatalf("sink got %v", bodies(got))
	}
	if m := got[0]; *m.DeadLetterSource != "src" || *m.DeadLetterReason != "r" || *m.DeadLetterErrorDescription != "d" {
		t.Errorf("first: source %v reason %v", m.DeadLetterSource, m.DeadLetterReason)
	}
	if m := got[1]; *m.DeadLetterSource != "src" || *m.DeadLetterReason != MaxDeliveryCountExceededReason {
		t.Errorf("second: source %v reason %v", m.DeadLetterSource, m.DeadLetterReason)
	}
	if src.Stats().DeadLettered != 2 {
		t.Errorf("source stats %+v", src.Stats())
	}
}

// A subscription forwarding to a queue: the topic's messages that pass its rules end in
// the queue.
func TestForwardSubscriptionToQueue(t *testing.T) {
	ns := NewNamespace(nil)
	q, _ := ns.NewQueue("q", nil)
	top, _ := ns.NewTopic("t", nil)
	sub, _ := top.NewSubscription("s", &EntityOptions{ForwardTo: "q"})
	s, _ := ns.NewSender("t", nil)
	sendAll(t, s, "x")
	if sub.ActiveCount() != 0 || len(q.Active()) != 1 {
		t.Fatalf("subscription %d, queue %d", sub.ActiveCount(), len(q.Active()))
	}
}

// A chain longer than MaxForwardHops stops after that many hops, dead-lettered where it
// stopped, and a cycle neither loops forever nor deadlocks.
func TestForwardHopLimit(t *testing.T) {
	ns := NewNamespace(nil)
	names := []string{"h0", "h1", "h2", "h3", "h4", "h5"}
	for i := len(names) - 1; i >= 0; i-- {
		o := &EntityOptions{}
		if i < len(names)-1 {
			o.ForwardTo = names[i+1]
		}
		if _, err := ns.NewQueue(names[i], o); err != nil {
			t.Fatal(err)
		}
	}
	s, _ := ns.NewSender("h0", nil)
	sendAll(t, s, "m")
	for i, n := range names {
		e, _ := ns.Entity(n)
		want := 0
		if i == MaxForwardHops {
			want = 1
		}
		if got := e.ActiveCount() + e.DeadLetterCount(); got != want {
			t.Errorf("%s holds %d, want %d", n, got, want)
		}
	}
	stop, _ := ns.Entity(names[MaxForwardHops])
	if dl := stop.DeadLetters(); len(dl) != 1 || *dl[0].DeadLetterReason != ForwardHopsExceededReason {
		t.Errorf("the message past the hop limit is not dead-lettered: %v", bodies(dl))
	}
	a, _ := ns.NewQueue("a", nil)
	b, _ := ns.NewQueue("b", &EntityOptions{ForwardTo: "a"})
	if err := a.SetOptions(&EntityOptions{ForwardTo: "b"}); err != nil {
		t.Fatal(err)
	}
	sa, _ := ns.NewSender("a", nil)
	sendAll(t, sa, "loop")
	if n := a.ActiveCount() + b.ActiveCount() + a.DeadLetterCount() + b.DeadLetterCount(); n != 1 || a.DeadLetterCount()+b.DeadLetterCount() != 1 {
		t.Fatalf("cycle: a %d+%d b %d+%d", a.ActiveCount(), a.DeadLetterCount(), b.ActiveCount(), b.DeadLetterCount())
	}
}
