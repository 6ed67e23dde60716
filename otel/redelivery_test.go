package sbotel_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/sbkit/sbkit"
	"github.com/sbkit/sbkit/receiver"
	"github.com/sbkit/sbkit/sbtest"
)

// TestRedeliveryAndBreakerMetrics: the delayed redelivery decisions and the breaker's
// changes are counted as the processor's Stats count them, a redelivered original ends
// as "redelivered", and a copy's process span carries its attempt.
func TestRedeliveryAndBreakerMetrics(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, nil)
		ns := sbtest.NewTestNamespace(t, &sbtest.NamespaceOptions{Queues: map[string]*sbtest.EntityOptions{"orders": {MaxDeliveryCount: 10}}})
		q, _ := ns.Entity("orders")
		snd, _ := ns.NewSender("orders", nil)
		for _, id := range []string{"a", "b", "c", "d", "e"} {
			if err := snd.SendMessage(context.Background(), &azservicebus.Message{MessageID: new(id)}, nil); err != nil {
				t.Fatal(err)
			}
		}
		down := errors.New("down")
		end := time.Now().Add(time.Minute)
		h := func(ctx context.Context, m *azservicebus.ReceivedMessage) error {
			if sbkit.OriginalMessageID(m) == "e" || time.Now().Before(end) {
				return down
			}
			return nil
		}
		ph := r.tel.Processor("orders", "")
		src, _ := ns.NewReceiverForQueue("orders", nil)
		p, err := receiver.New(src, h, &receiver.Options{Hooks: []receiver.Hook{ph},
			Redelivery: &receiver.RedeliveryOptions{Scheduler: snd, MaxRedeliveries: 2, Delay: func(int) time.Duration { return 40 * time.Second }},
			Breaker: &receiver.BreakerOptions{IsDependencyDown: func(err error) bool { return errors.Is(err, down) },
				MinimumCalls: 5, OpenDuration: 10 * time.Second}})
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- p.Run(context.Background()) }()
		if _, err := q.WaitUntil(t.Context(), func(c sbtest.Counts) bool {
			return c.Active == 0 && c.Locked == 0 && c.Scheduled == 0 && c.DeadLetter == 1
		}); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if err := p.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		s := p.Stats()
		m := r.metrics(t)
		for _, c := range []struct {
			name      string
			got, want int64
		}{
			{"scheduled", m.sum("sbkit.processor.redeliveries", "sbkit.redelivery.outcome=scheduled"), s.Scheduled},
			{"exhausted", m.sum("sbkit.processor.redeliveries", "sbkit.redelivery.outcome=exhausted"), s.Exhausted},
			{"redelivered outcome", m.sum("sbkit.processor.outcomes", "sbkit.outcome=redelivered"), s.Redelivered},
			{"complete outcome", m.sum("sbkit.processor.outcomes", "sbkit.outcome=complete"), s.Completed},
			{"breaker open", m.sum("sbkit.processor.breaker.changes", "sbkit.breaker.state=open"), s.BreakerOpened},
			{"breaker half-open", m.sum("sbkit.processor.breaker.changes", "sbkit.breaker.state=half-open"), s.BreakerHalfOpened},
			{"breaker closed", m.sum("sbkit.processor.breaker.changes", "sbkit.breaker.state=closed"), s.BreakerClosed},
		} {
			if c.got != c.want {
				t.Errorf("%s: metric %d, Stats %d", c.name, c.got, c.want)
			}
		}
		if s.Scheduled == 0 || s.Exhausted != 1 || s.BreakerOpened == 0 || s.BreakerClosed == 0 {
			t.Errorf("the scenario did not happen: %+v", s)
		}
		attempts := 0
		for _, sp := range r.spans("process orders") {
			for _, kv := range sp.Attributes() {
				if kv.Key == "sbkit.redelivery.attempt" && kv.Value.AsInt64() > 0 {
					attempts++
				}
			}
		}
		if attempts == 0 {
			t.Error("no process span carries sbkit.redelivery.attempt")
		}
	})
}
