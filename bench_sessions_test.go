package sbkit_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/sbkit/sbkit/receiver"
	"github.com/sbkit/sbkit/sbtest"
)

// benchPerSession is how many messages each session of BenchmarkSessions has.
const benchPerSession = 50

// sessionBenchQueue returns a session queue pre-filled (without latency) with n messages
// in sessions of benchPerSession (the last one may have fewer), sent round-robin across
// the sessions; the namespace's latency is processLatency from then on.
func sessionBenchQueue(b *testing.B, n int) (*sbtest.Namespace, *sbtest.Entity) {
	b.Helper()
	ns := sbtest.NewTestNamespace(b, &sbtest.NamespaceOptions{Queues: map[string]*sbtest.EntityOptions{"jobs": {RequiresSession: true}}})
	q, _ := ns.Entity("jobs")
	s, err := ns.NewSender("jobs", nil)
	if err != nil {
		b.Fatal(err)
	}
	sessions := (n + benchPerSession - 1) / benchPerSession
	body := make([]byte, 1024)
	for i := range n {
		id := fmt.Sprintf("session-%03d", i%sessions)
		if err := s.SendMessage(context.Background(), &azservicebus.Message{Body: body, SessionID: &id}, nil); err != nil {
			b.Fatal(err)
		}
	}
	ns.SetLatency(processLatency)
	return ns, q
}

// sessionRate is the msgs/s of the last MaxConcurrentSessions=1 run, the baseline of the
// ratio the others report.
var sessionRate float64

// BenchmarkSessions runs the session processor over sessions of 50 messages (64 of them
// for 3,200 messages) at the standard latency (7 ms round trip, 1 ms store, a 5 ms
// handler), holding 1 session at a time and then 32.
// Within a session messages are handled one at a time, in order, and each costs a receive
// and a complete round trip besides the handler: about 20 ms, so the ceiling is
// MaxConcurrentSessions / 20 ms (50 msgs/s per session held).
func BenchmarkSessions(b *testing.B) {
	for _, slots := range []int{1, 32} {
		b.Run(fmt.Sprintf("MaxConcurrentSessions=%d", slots), func(b *testing.B) {
			ns, q := sessionBenchQueue(b, b.N)
			total := b.N
			handler := func(ctx context.Context, m *azservicebus.ReceivedMessage) error {
				time.Sleep(processWork)
				return nil
			}
			p, err := receiver.NewSessionProcessor(ns.QueueSessionAcceptor("jobs", nil), handler, &receiver.SessionOptions{
				MaxConcurrentSessions: slots,
				MaxMessagesPerSession: benchPerSession, // a drained session is released at once, not after the idle timeout
			})
			if err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			done := make(chan error, 1)
			go func() { done <- p.Run(context.Background()) }()
			if err := q.WaitDrained(context.Background()); err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			if err := p.Close(context.Background()); err != nil {
				b.Fatal(err)
			}
			if err := <-done; err != nil {
				b.Fatal(err)
			}
			rate := float64(total) / b.Elapsed().Seconds()
			b.ReportMetric(rate, "msgs/s")
			if slots == 1 {
				sessionRate = rate
			} else if sessionRate > 0 {
				b.ReportMetric(rate/sessionRate, "x-vs-1-session")
			}
		})
	}
}
