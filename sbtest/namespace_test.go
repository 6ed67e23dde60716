package sbtest

import (
	"context"
	"errors"
	"fmt"
	"math"
	"runtime"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
)

func TestNamespaceAccessors(t *testing.T) {
	ns := NewNamespace(&NamespaceOptions{MaxMessageSize: 1024})
	if ns.MaxMessageSize() != 1024 || NewNamespace(nil).MaxMessageSize() != DefaultMaxMessageSize {
		t.Fatal("MaxMessageSize")
	}
	top, _ := ns.NewTopic("t", nil)
	if got, ok := ns.Topic("t"); !ok || got != top || top.Name() != "t" {
		t.Fatal("Topic lookup")
	}
	if _, ok := ns.Topic("nope"); ok {
		t.Fatal("unknown topic found")
	}
	if _, err := ns.NewQueue("t", nil); !errors.Is(err, ErrExists) {
		t.Fatalf("queue named like a topic: %v", err)
	}
	sub, _ := top.NewSubscription("s", nil)
	if _, err := top.NewSubscription("s", nil); !errors.Is(err, ErrExists) {
		t.Fatalf("duplicate subscription: %v", err)
	}
	if _, err := top.NewSubscription("x", &EntityOptions{LockDuration: time.Hour}); !errors.Is(err, ErrInvalidOptions) {
		t.Fatalf("bad subscription options: %v", err)
	}
	r, _ := ns.NewReceiverForSubscription("t", "s", nil)
	if r.Entity() != sub {
		t.Fatal("Receiver.Entity")
	}
	if _, err := ns.NewReceiverForSubscription("t", "s", &ReceiverOptions{SubQueue: 9}); !errors.Is(err, ErrInvalidOptions) {
		t.Fatalf("bad sub-queue: %v", err)
	}
}

func TestTransferSubQueueIsEmpty(t *testing.T) {
	f := newFixture(t, nil)
	sendAll(t, f.s, "a")
	r := f.receiver(t, &ReceiverOptions{SubQueue: azservicebus.SubQueueTransfer})
	expectNone(t, r, 5*time.Millisecond)
	if p, err := r.PeekMessages(context.Background(), 10, nil); err != nil || len(p) != 0 {
		t.Fatalf("peek: %d %v", len(p), err)
	}
}

func TestNegativeLatencyIsZero(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ns := NewNamespace(&NamespaceOptions{Latency: Latency{RoundTrip: -time.Hour, StoreTime: -time.Hour, StoreConcurrency: -1}})
		if _, err := ns.NewQueue("q", nil); err != nil {
			t.Fatal(err)
		}
		s, _ := ns.NewSender("q", nil)
		start := time.Now()
		if err := s.SendMessage(context.Background(), msg("a"), nil); err != nil {
			t.Fatal(err)
		}
		if time.Since(start) != 0 {
			t.Fatalf("negative latency slept %v", time.Since(start))
		}
	})
}

// Entity names are case-insensitive, as the service's ("Naming rules and restrictions for
// Azure resources": resource names are case-insensitive): a name that differs from an
// existing one only in case is taken, and every lookup finds an entity in any case; the
// entity keeps the name it was created with.
func TestEntityNamesIgnoreCase(t *testing.T) {
	ns := NewNamespace(nil)
	q, err := ns.NewQueue("Orders", nil)
	if err != nil {
		t.Fatal(err)
	}
	top, err := ns.NewTopic("Events", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := top.NewSubscription("Audit", nil); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"orders", "EVENTS"} {
		if _, err := ns.NewQueue(name, nil); !errors.Is(err, ErrExists) {
			t.Errorf("NewQueue(%q) = %v, want ErrExists", name, err)
		}
		if _, err := ns.NewTopic(name, nil); !errors.Is(err, ErrExists) {
			t.Errorf("NewTopic(%q) = %v, want ErrExists", name, err)
		}
	}
	if _, err := top.NewSubscription("audit", nil); !errors.Is(err, ErrExists) {
		t.Errorf("NewSubscription(audit) = %v, want ErrExists", err)
	}
	if e, ok := ns.Entity("ORDERS"); !ok || e != q || e.Name() != "Orders" {
		t.Errorf("Entity(ORDERS) = %v, %v; want the queue Orders", e, ok)
	}
	if _, ok := ns.Entity("events/subscriptions/AUDIT"); !ok {
		t.Error("Entity(events/subscriptions/AUDIT) found nothing")
	}
	if _, ok := ns.Topic("events"); !ok {
		t.Error("Topic(events) found nothing")
	}
	if _, ok := top.Subscription("AUDIT"); !ok {
		t.Error("Subscription(AUDIT) found nothing")
	}
	s, err := ns.NewSender("oRDERS", nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.SendMessage(context.Background(), &azservicebus.Message{Body: []byte("m")}, nil); err != nil || len(q.Active()) != 1 {
		t.Fatalf("send through oRDERS: %v, queue holds %d", err, len(q.Active()))
	}
	if err := top.DeleteSubscription("AUDIT"); err != nil {
		t.Errorf("DeleteSubscription(AUDIT): %v", err)
	}
	if err := ns.DeleteQueue("orders"); err != nil {
		t.Errorf("DeleteQueue(orders): %v", err)
	}
	if err := ns.DeleteTopic("events"); err != nil {
		t.Errorf("DeleteTopic(events): %v", err)
	}
}

// A lookup in any letter case costs the same however many entities the namespace holds:
// creating one is a lookup that misses, and the admin API lets a client create the
// service's 10,000 queues and topics per namespace ("Service Bus quotas"), so a walk over
// every name per lookup made creating them quadratic (10,000 queues took 11 s) and every
// miss (a link to a missing address, a GET of a missing queue) cost 10,000 comparisons
// under the namespace's lock. A name deleted in one case is free in every case.
func TestEntityLookupCostIsFlat(t *testing.T) {
	missLookups := func(ns *Namespace) time.Duration {
		start := time.Now()
		for i := range 2000 {
			if _, ok := ns.Entity(fmt.Sprint("Missing-", i)); ok {
				t.Fatal("found a missing entity")
			}
		}
		return time.Since(start)
	}
	small := NewNamespace(&NamespaceOptions{Queues: map[string]*EntityOptions{"q": nil}})
	big := NewNamespace(nil)
	for i := range 10_000 {
		if _, err := big.NewQueue(fmt.Sprint("Queue-", i), nil); err != nil {
			t.Fatal(err)
		}
	}
	if e, ok := big.Entity("QUEUE-9999"); !ok || e.Name() != "Queue-9999" {
		t.Fatalf("Entity(QUEUE-9999) = %v, %v", e, ok)
	}
	// Best of three against noise from other processes; a walk costs about 1,000 times more.
	best := func(ns *Namespace) time.Duration {
		return min(missLookups(ns), missLookups(ns), missLookups(ns))
	}
	if s, b := best(small), best(big); b > 50*s+10*time.Millisecond {
		t.Fatalf("2,000 lookups that miss took %v among 10,000 queues, %v among one", b, s)
	}
	if err := big.DeleteQueue("queue-7"); err != nil {
		t.Fatal(err)
	}
	if _, ok := big.Entity("Queue-7"); ok {
		t.Fatal("a deleted queue is found")
	}
	if _, err := big.NewTopic("QUEUE-7", nil); err != nil {
		t.Fatalf("the name of a deleted queue in another case: %v", err)
	}
	if tp, ok := big.Topic("queue-7"); !ok || tp.Name() != "QUEUE-7" {
		t.Fatalf("Topic(queue-7) = %v, %v", tp, ok)
	}
}

// NamespaceOptions declares queues and topics with their subscriptions and options.
func TestNamespaceOptionsEntities(t *testing.T) {
	ns := NewTestNamespace(t, &NamespaceOptions{
		Queues: map[string]*EntityOptions{"a": nil, "b": {LockDuration: time.Second}},
		Topics: map[string]TopicOptions{"t": {
			Options:       &EntityOptions{DefaultTTL: time.Hour},
			Subscriptions: map[string]*EntityOptions{"s": {MaxDeliveryCount: 3}, "u": nil},
		}},
	})
	if b, ok := ns.Entity("b"); !ok || b.Options().LockDuration != time.Second {
		t.Fatalf("queue b: %v", ok)
	}
	if _, ok := ns.Entity("a"); !ok {
		t.Fatal("queue a missing")
	}
	top, ok := ns.Topic("t")
	if !ok || top.Options().DefaultTTL != time.Hour || len(top.Subscriptions()) != 2 {
		t.Fatalf("topic t: %v", ok)
	}
	if s, ok := top.Subscription("s"); !ok || s.Options().MaxDeliveryCount != 3 {
		t.Fatalf("subscription s: %v", ok)
	}
}

// recordingTB is a testing.TB whose Fatal records its message and ends the goroutine.
type recordingTB struct {
	testing.TB
	fatal string
}

func (r *recordingTB) Helper() {}
func (r *recordingTB) Fatal(args ...any) {
	r.fatal = fmt.Sprint(args...)
	runtime.Goexit()
}

// An entity that cannot be created fails NewTestNamespace's test, and makes NewNamespace
// panic, naming the entity.
func TestNamespaceOptionsBadEntity(t *testing.T) {
	opts := &NamespaceOptions{Queues: map[string]*EntityOptions{"q": {LockDuration: time.Hour}}}
	rec := &recordingTB{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		NewTestNamespace(rec, opts)
		t.Error("NewTestNamespace returned")
	}()
	<-done
	if !strings.Contains(rec.fatal, `queue "q"`) || !strings.Contains(rec.fatal, ErrInvalidOptions.Error()) {
		t.Fatalf("Fatal(%q), want the queue named and ErrInvalidOptions", rec.fatal)
	}
	defer func() {
		err, _ := recover().(error)
		if !errors.Is(err, ErrInvalidOptions) {
			t.Fatalf("NewNamespace panicked with %v, want ErrInvalidOptions", err)
		}
	}()
	NewNamespace(&NamespaceOptions{Topics: map[string]TopicOptions{"t": {Subscriptions: map[string]*EntityOptions{"": nil}}}})
	t.Fatal("NewNamespace did not panic")
}

// MaxMessageSize: zero is the default, negative no limit, positive itself.
func TestNamespaceMaxMessageSize(t *testing.T) {
	big := &azservicebus.Message{Body: make([]byte, 1<<20)}
	for _, tt := range []struct {
		size, want int
		bigOK      bool
	}{
		{0, DefaultMaxMessageSize, false},
		{-1, math.MaxInt, true},
		{2 << 20, 2 << 20, true},
		{1024, 1024, false},
	} {
		ns := NewNamespace(&NamespaceOptions{MaxMessageSize: tt.size, Queues: map[string]*EntityOptions{"q": nil}})
		if got := ns.MaxMessageSize(); got != tt.want {
			t.Errorf("MaxMessageSize %d: %d, want %d", tt.size, got, tt.want)
		}
		s, _ := ns.NewSender("q", nil)
		err := s.SendMessage(context.Background(), big, nil)
		if (err == nil) != tt.bigOK || err != nil && !errors.Is(err, azservicebus.ErrMessageTooLarge) {
			t.Errorf("MaxMessageSize %d: sending 1 MiB: %v", tt.size, err)
		}
	}
}
