package sbtest

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
)

// "Chaining Service Bus entities with autoforwarding": a message sent to a forwarding
// queue ends in its target with EnqueuedSequenceNumber from where it was first enqueued
// ("Messages, payloads, and serialization"); the source keeps nothing.
func TestForwardQueueToQueue(t *testing.T) {
	ns := NewNamespace(nil)
	dst, _ := ns.NewQueue("dst", nil)
	src, err := ns.NewQueue("src", &EntityOptions{ForwardTo: "dst"})
	if err != nil {
		t.Fatal(err)
	}
	s, _ := ns.NewSender("src", nil)
	sendAll(t, s, "a", "b")
	if src.Counts().Active != 0 {
		t.Fatalf("source kept %d messages", src.Counts().Active)
	}
	got := dst.Active()
	if len(got) != 2 || string(got[0].Body) != "a" || got[0].EnqueuedSequenceNumber == nil || *got[0].EnqueuedSequenceNumber != 1 ||
		*got[1].EnqueuedSequenceNumber != 2 {
		t.Fatalf("target got %v", bodies(got))
	}
}

// Dead-lettered messages go to ForwardDeadLetteredMessagesTo with DeadLetterSource set
// ("Messages, payloads, and serialization": set only on messages dead-lettered and then
// auto-forwarded) and their reason; the source's dead-letter queue stays empty.
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
	if src.Counts().DeadLetter != 0 {
		t.Fatalf("source DLQ holds %d", src.Counts().DeadLetter)
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
	if sub.Counts().Active != 0 || len(q.Active()) != 1 {
		t.Fatalf("subscription %d, queue %d", sub.Counts().Active, len(q.Active()))
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
		if got := e.Counts().Active + e.Counts().DeadLetter; got != want {
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
	if n := a.Counts().Active + b.Counts().Active + a.Counts().DeadLetter + b.Counts().DeadLetter; n != 1 || a.Counts().DeadLetter+b.Counts().DeadLetter != 1 {
		t.Fatalf("cycle: a %d+%d b %d+%d", a.Counts().Active, a.Counts().DeadLetter, b.Counts().Active, b.Counts().DeadLetter)
	}
}

// A message whose forwarding target is gone or refuses sends stays in its source's
// dead-letter queue ("Service Bus dead-letter queues", dead-lettering in auto forward
// scenarios: the destination queue or topic is disabled or deleted), with
// ForwardTargetUnavailableReason; a dead-lettered message whose
// ForwardDeadLetteredMessagesTo target cannot take it stays in the source's dead-letter
// queue with its own reason. Nothing vanishes and the target receives nothing.
func TestForwardTargetUnavailable(t *testing.T) {
	for _, tc := range []struct {
		name  string
		topic bool // the target is a topic (with one subscription), else a queue
		spoil func(t *testing.T, ns *Namespace)
		desc  string // in the dead-letter description
	}{
		{"deleted queue", false, func(t *testing.T, ns *Namespace) {
			if err := ns.DeleteQueue("dst"); err != nil {
				t.Fatal(err)
			}
		}, "does not exist"},
		{"deleted topic", true, func(t *testing.T, ns *Namespace) {
			if err := ns.DeleteTopic("dst"); err != nil {
				t.Fatal(err)
			}
		}, "does not exist"},
		{"disabled queue", false, func(t *testing.T, ns *Namespace) {
			e, _ := ns.Entity("dst")
			_ = e.SetStatus(StatusDisabled)
		}, "Disabled"},
		{"send-disabled queue", false, func(t *testing.T, ns *Namespace) {
			e, _ := ns.Entity("dst")
			_ = e.SetStatus(StatusSendDisabled)
		}, "SendDisabled"},
		{"send-disabled topic", true, func(t *testing.T, ns *Namespace) {
			tp, _ := ns.Topic("dst")
			_ = tp.SetStatus(StatusSendDisabled)
		}, "SendDisabled"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			ns := NewNamespace(nil)
			held := func() int { // what the target holds
				if tc.topic {
					tp, ok := ns.Topic("dst")
					if !ok {
						return 0
					}
					s, _ := tp.Subscription("all")
					return s.Counts().Active + s.Counts().DeadLetter
				}
				e, ok := ns.Entity("dst")
				if !ok {
					return 0
				}
				return e.Counts().Active + e.Counts().DeadLetter
			}
			if tc.topic {
				tp, _ := ns.NewTopic("dst", nil)
				if _, err := tp.NewSubscription("all", nil); err != nil {
					t.Fatal(err)
				}
			} else if _, err := ns.NewQueue("dst", nil); err != nil {
				t.Fatal(err)
			}
			src, _ := ns.NewQueue("src", &EntityOptions{ForwardTo: "dst"})
			dls, _ := ns.NewQueue("dls", &EntityOptions{ForwardDeadLetteredMessagesTo: "dst"})
			tc.spoil(t, ns)

			s, _ := ns.NewSender("src", nil)
			sendAll(t, s, "fwd")
			dl := src.DeadLetters()
			if len(dl) != 1 || string(dl[0].Body) != "fwd" || src.Counts().Active != 0 {
				t.Fatalf("source holds %d active and dead letters %v, want the message dead-lettered", src.Counts().Active, bodies(dl))
			}
			if r := dl[0].DeadLetterReason; r == nil || *r != ForwardTargetUnavailableReason {
				t.Errorf("reason %v, want %s", r, ForwardTargetUnavailableReason)
			}
			if d := dl[0].DeadLetterErrorDescription; d == nil || !strings.Contains(*d, tc.desc) || !strings.Contains(*d, "dst") {
				t.Errorf("description %v, want one naming dst and %q", d, tc.desc)
			}
			if dl[0].DeadLetterSource != nil {
				t.Errorf("DeadLetterSource %q on a message dead-lettered where it is", *dl[0].DeadLetterSource)
			}
			if st := src.Stats(); st.DeadLettered != 1 {
				t.Errorf("source stats %+v, want one dead-lettered", st)
			}

			ds, _ := ns.NewSender("dls", nil)
			sendAll(t, ds, "bad")
			r, _ := ns.NewReceiverForQueue("dls", nil)
			m := receive(t, r, 1, time.Second)[0]
			if err := r.DeadLetterMessage(ctx, m, &azservicebus.DeadLetterOptions{Reason: sp("mine"), ErrorDescription: sp("why")}); err != nil {
				t.Fatal(err)
			}
			dl = dls.DeadLetters()
			if len(dl) != 1 || *dl[0].DeadLetterReason != "mine" || *dl[0].DeadLetterErrorDescription != "why" {
				t.Fatalf("dead-lettering source's DLQ %v, want the message with its own reason", bodies(dl))
			}
			if n := held(); n != 0 {
				t.Fatalf("the unavailable target received %d messages", n)
			}
		})
	}
}

// A target that comes back (enabled again, or created again under its name) takes
// forwarded messages again: nothing about the failure sticks to the source.
func TestForwardTargetBack(t *testing.T) {
	ns := NewNamespace(nil)
	dst, _ := ns.NewQueue("dst", nil)
	src, _ := ns.NewQueue("src", &EntityOptions{ForwardTo: "dst"})
	s, _ := ns.NewSender("src", nil)
	_ = dst.SetStatus(StatusDisabled)
	sendAll(t, s, "a")
	_ = dst.SetStatus(StatusActive)
	sendAll(t, s, "b")
	if err := ns.DeleteQueue("dst"); err != nil {
		t.Fatal(err)
	}
	again, _ := ns.NewQueue("dst", nil)
	sendAll(t, s, "c")
	if got := bodies(src.DeadLetters()); len(got) != 1 || got[0] != "a" {
		t.Errorf("source dead letters %v, want [a]", got)
	}
	if got := bodies(dst.Active()); len(got) != 1 || got[0] != "b" {
		t.Errorf("re-enabled target holds %v, want [b]", got)
	}
	if got := bodies(again.Active()); len(got) != 1 || got[0] != "c" {
		t.Errorf("re-created target holds %v, want [c]", got)
	}
}

// Forwarding fans out at most the namespace's MaxForwardCopies copies of one message
// (sbtest's own bound: the hop limit bounds depth, not breadth). Subscriptions forwarding
// back to their own topic would otherwise multiply one send by 14^5; the copies beyond
// the bound stay in the dead-letter queue of the entity that would have forwarded them,
// with ForwardCopiesExceededReason, and every copy is accounted for.
func TestForwardFanOutBounded(t *testing.T) {
	const subs, limit = 14, 500
	ns := NewNamespace(&NamespaceOptions{MaxForwardCopies: limit})
	top, _ := ns.NewTopic("t", nil)
	for i := range subs {
		if _, err := top.NewSubscription(fmt.Sprint("s", i), &EntityOptions{ForwardTo: "t"}); err != nil {
			t.Fatal(err)
		}
	}
	s, _ := ns.NewSender("t", nil)
	start := time.Now()
	sendAll(t, s, "x")
	t.Logf("one send took %v", time.Since(start))
	var active, dead, exceeded, hops int
	for _, sub := range top.Subscriptions() {
		active += sub.Counts().Active
		for _, m := range sub.DeadLetters() {
			dead++
			switch *m.DeadLetterReason {
			case ForwardCopiesExceededReason:
				exceeded++
			case ForwardHopsExceededReason:
				hops++
			default:
				t.Fatalf("dead-letter reason %q", *m.DeadLetterReason)
			}
		}
	}
	// Each forwarded message stored in the topic makes 14 copies: the bound can be
	// passed by one topic's fan-out, and every copy that is not forwarded is dead-lettered.
	if total := active + dead; total > 2*(limit+subs) || exceeded == 0 {
		t.Fatalf("one send left %d messages (%d active, %d dead-lettered: %d over the copy bound, %d over the hop limit), want at most %d and some over the bound",
			total, active, dead, exceeded, hops, 2*(limit+subs))
	}
}
