package sbotel_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"go.opentelemetry.io/otel/codes"

	"github.com/sbkit/sbkit"
	"github.com/sbkit/sbkit/dedupe"
	"github.com/sbkit/sbkit/receiver"
	"github.com/sbkit/sbkit/sbtest"
	"github.com/sbkit/sbkit/sender"
)

// A send retried after a transient failure has a "retry" event with the attempt number.
func TestRetryEvent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, nil)
		ns := sbtest.NewTestNamespace(t, &sbtest.NamespaceOptions{Queues: map[string]*sbtest.EntityOptions{"orders": nil}})
		q, _ := ns.Entity("orders")
		snd, _ := ns.NewSender("orders", nil)
		s, _ := sender.New(snd, &sender.Options{DisableBatching: true, Hooks: []sender.Hook{r.tel.Sender("orders")}})
		q.InjectFault(sbtest.Fault{Op: sbtest.OpSend, Count: 1})
		if err := s.Send(context.Background(), &azservicebus.Message{}); err != nil {
			t.Fatal(err)
		}
		q.InjectFault(sbtest.Fault{Op: sbtest.OpSend, Count: 1, Err: sbtest.PermanentError})
		if err := s.Send(context.Background(), &azservicebus.Message{}); err == nil {
			t.Fatal("the second send did not fail")
		}
		_ = s.Close(context.Background())
		spans := r.spans("send orders")
		if len(spans) != 2 {
			t.Fatalf("%d send spans", len(spans))
		}
		ok, failed := spans[0], spans[1]
		if evs := ok.Events(); len(evs) != 1 || evs[0].Name != "retry" {
			t.Fatalf("events %v, want one retry", events(ok))
		}
		ev := map[string]string{}
		for _, kv := range ok.Events()[0].Attributes {
			ev[string(kv.Key)] = kv.Value.String()
		}
		if ev["sbkit.retry.attempt"] != "1" || ev["error.type"] != "connlost" || ev["sbkit.retry.delay"] == "" {
			t.Errorf("retry event attributes %v", ev)
		}
		wantAttrs(t, ok, "sbkit.attempts=2")
		if failed.Status().Code != codes.Error || attrs(failed)["error.type"] != "unauthorized" || !hasEvent(failed, "exception") {
			t.Errorf("failed send: status %v, attributes %v, events %v", failed.Status(), attrs(failed), events(failed))
		}
	})
}

// Lock renewals and a lost lock are events on the process span; a handler error sets
// its status; a dead-letter's settle span has the reason; a duplicate is an event.
func TestProcessEvents(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, nil)
		ns := sbtest.NewTestNamespace(t, &sbtest.NamespaceOptions{Queues: map[string]*sbtest.EntityOptions{"orders": {LockDuration: 10 * time.Second}}})
		q, _ := ns.Entity("orders")
		snd, _ := ns.NewSender("orders", nil)
		for _, id := range []string{"slow", "lost", "fails", "dead", "dup", "dup"} {
			if err := snd.SendMessage(context.Background(), &azservicebus.Message{MessageID: new(id)}, nil); err != nil {
				t.Fatal(err)
			}
		}
		ph := r.tel.Processor("orders", "")
		store, _ := dedupe.NewMemoryStore(nil)
		filter, _ := dedupe.New(store, &dedupe.Options{Entity: "orders", Hooks: []dedupe.Hook{ph}})
		handler, _ := filter.Wrap(func(ctx context.Context, m *azservicebus.ReceivedMessage) error {
			switch m.MessageID {
			case "slow": // renewed twice or more
				time.Sleep(25 * time.Second)
			case "lost":
				if m.DeliveryCount == 1 {
					<-ctx.Done()
					return ctx.Err()
				}
			case "fails":
				return errors.New("boom")
			case "dead":
				return sbkit.DeadLetter("Invalid", "bad order", nil)
			}
			return nil
		})
		src, _ := ns.NewReceiverForQueue("orders", nil)
		p, _ := receiver.New(src, handler, &receiver.Options{MaxConcurrency: 1, PrefetchCount: 8,
			Hooks: []receiver.Hook{ph}})
		done := make(chan error, 1)
		go func() { done <- p.Run(context.Background()) }()
		time.Sleep(30 * time.Second) // "slow" is done, "lost" is running
		for _, m := range q.Locked() {
			if m.MessageID == "lost" {
				q.ExpireLock(m.LockToken)
			}
		}
		time.Sleep(time.Minute)
		_ = p.Close(context.Background())
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		byID := map[string][]string{}
		for _, s := range r.spans("process orders") {
			id := attrs(s)["messaging.message.id"]
			byID[id] = append(byID[id], events(s)...)
			if id == "fails" && (s.Status().Code != codes.Error || attrs(s)["error.type"] != "*errors.errorString") {
				t.Errorf("failed handler's span: status %v, attributes %v", s.Status(), attrs(s))
			}
		}
		count := func(evs []string, name string) (n int) {
			for _, e := range evs {
				if e == name {
					n++
				}
			}
			return n
		}
		if n := count(byID["slow"], "lock renewed"); n < 2 {
			t.Errorf("slow message: %d lock renewed events (%v)", n, byID["slow"])
		}
		if count(byID["lost"], "lock lost") != 1 {
			t.Errorf("lost message: events %v, want a lock lost", byID["lost"])
		}
		if count(byID["dup"], "duplicate") != 1 {
			t.Errorf("duplicates: events %v, want one duplicate", byID["dup"])
		}
		dl := r.one(t, "dead_letter orders")
		wantAttrs(t, dl, "messaging.servicebus.disposition_status=dead_letter", "sbkit.dead_letter.reason=Invalid",
			"messaging.operation.type=settle")
		if n := len(r.spans("abandon orders")); n < 1 {
			t.Errorf("%d abandon spans", n)
		}
		m := r.metrics(t)
		if got := m.sum("sbkit.lock.lost", "sbkit.lock.lost_reason=lock_lost"); got != 1 || m.sum("sbkit.lock.lost") != 1 {
			t.Errorf("sbkit.lock.lost = %+v, want one (lock_lost)", m["sbkit.lock.lost"].Data)
		}
	})
}
