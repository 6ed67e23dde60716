package sbotel_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/sbkit/sbkit/receiver"
	"github.com/sbkit/sbkit/sbtest"
	"github.com/sbkit/sbkit/sender"
)

// The same hook serves a SessionProcessor: a process span per message with its session,
// in the producer's trace; session lock renewals are counted as kind session; the
// metrics agree with SessionStats.
func TestSessionProcessor(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, nil)
		ns := sbtest.NewTestNamespace(t, &sbtest.NamespaceOptions{Queues: map[string]*sbtest.EntityOptions{
			"jobs": {RequiresSession: true, LockDuration: 10 * time.Second},
		}})
		snd, _ := ns.NewSender("jobs", nil)
		s, _ := sender.New(snd, &sender.Options{Hooks: []sender.Hook{r.tel.Sender("jobs")}})
		for _, id := range []string{"a", "b", "a", "b"} {
			if err := s.Send(context.Background(), &azservicebus.Message{SessionID: new(id)}); err != nil {
				t.Fatal(err)
			}
		}
		_ = s.Close(context.Background())
		ph := r.tel.Processor("jobs", "")
		p, err := receiver.NewSessionProcessor(ns.QueueSessionAcceptor("jobs", nil),
			func(context.Context, *azservicebus.ReceivedMessage) error {
				time.Sleep(15 * time.Second) // the session lock is renewed
				return nil
			}, &receiver.SessionOptions{Options: receiver.Options{Hooks: []receiver.Hook{ph}}})
		if err != nil {
			t.Fatal(err)
		}
		reg, err := ph.ObserveSessions(p)
		if err != nil {
			t.Fatal(err)
		}
		defer reg.Unregister()
		done := make(chan error, 1)
		go func() { done <- p.Run(context.Background()) }()
		time.Sleep(5 * time.Second)
		if held := r.metrics(t).sum("sbkit.processor.sessions.held"); held != 2 {
			t.Errorf("sessions held %d, want 2", held)
		}
		time.Sleep(time.Minute)
		_ = p.Close(context.Background())
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		sends := map[string]string{} // message id -> trace id
		for _, sp := range r.spans("send jobs") {
			sends[attrs(sp)["messaging.message.id"]] = sp.SpanContext().TraceID().String()
		}
		processes := r.spans("process jobs")
		if len(processes) != 4 {
			t.Fatalf("%d process spans, want 4", len(processes))
		}
		for _, sp := range processes {
			a := attrs(sp)
			if a["sbkit.session.id"] == "" || sends[a["messaging.message.id"]] != sp.SpanContext().TraceID().String() {
				t.Errorf("process span %v in trace %s; sends %v", a, sp.SpanContext().TraceID(), sends)
			}
		}
		st, m := p.Stats(), r.metrics(t)
		if st.SessionLocksRenewed == 0 || m.sum("sbkit.lock.renewals", "sbkit.lock.kind=session") != st.SessionLocksRenewed {
			t.Errorf("session renewals: metric %d, stats %d", m.sum("sbkit.lock.renewals", "sbkit.lock.kind=session"), st.SessionLocksRenewed)
		}
		if got := m.sum("sbkit.processor.outcomes", "sbkit.outcome=complete"); got != st.Completed || got != 4 {
			t.Errorf("completed: metric %d, stats %d", got, st.Completed)
		}
		if got := m.sum("sbkit.processor.sessions.held"); got != 0 {
			t.Errorf("sessions held after Close: %d", got)
		}
	})
}
