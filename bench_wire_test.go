package sbkit_test

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/sbkit/sbkit"
	"github.com/sbkit/sbkit/sbtest"
	"github.com/sbkit/sbkit/sender"
)

// wireTopic starts an sbtest server whose namespace has the latency model lat and a topic
// without subscriptions (it stores nothing, so memory does not grow with b.N), connects
// the real SDK client to it over loopback and returns an SDK sender to the topic with its
// link already attached, so that connecting is not timed. Everything is closed when b
// ends.
func wireTopic(b *testing.B, lat sbtest.Latency) (*azservicebus.Sender, *sbtest.Topic) {
	b.Helper()
	ns := sbtest.NewNamespace(&sbtest.NamespaceOptions{Latency: lat})
	topic, err := ns.NewTopic("bench", nil)
	if err != nil {
		b.Fatal(err)
	}
	srv, err := sbtest.NewServer(&sbtest.ServerOptions{Namespace: ns})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		if err := srv.Close(); err != nil {
			b.Error(err)
		}
	})
	client, err := azservicebus.NewClientFromConnectionString(srv.ConnectionString(), nil)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	b.Cleanup(func() { _ = client.Close(ctx) })
	s, err := client.NewSender("bench", nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = s.Close(ctx) })
	// NewMessageBatch attaches the link (connection, SASL, $cbs token, attach) without
	// sending anything.
	if _, err := s.NewMessageBatch(ctx, nil); err != nil {
		b.Fatal(err)
	}
	return s, topic
}

// benchWireSender is benchSender through the real client: every iteration sends burst
// messages through one sender.Sender and waits for their outcomes.
func benchWireSender(b *testing.B, lat sbtest.Latency, opts *sender.Options) {
	dst, topic := wireTopic(b, lat)
	s, err := sender.New(sbkit.NewBatchSender(dst), opts)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	b.ResetTimer()
	for range b.N {
		for range burst {
			if _, err := s.SendAsync(ctx, &azservicebus.Message{Body: benchBody}); err != nil {
				b.Fatal(err)
			}
		}
		if err := s.Flush(ctx); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	if st := s.Stats(); st.Failed != 0 {
		b.Fatalf("%d messages failed", st.Failed)
	}
	if err := s.Close(ctx); err != nil {
		b.Fatal(err)
	}
	reportRate(b, topic, burst)
}

// benchWire runs the three ways of sending of BenchmarkSend through the real
// *azservicebus.Client talking AMQP over loopback to sbtest.NewServer, whose namespace
// applies the latency model lat, and checks that no goroutine outlives them.
func benchWire(b *testing.B, lat sbtest.Latency) {
	before := runtime.NumGoroutine()
	ctx := context.Background()
	// One SendMessage at a time, each awaited: one message per round trip.
	b.Run("sequential", func(b *testing.B) {
		dst, topic := wireTopic(b, lat)
		b.ResetTimer()
		for range b.N {
			if err := dst.SendMessage(ctx, &azservicebus.Message{Body: benchBody}, nil); err != nil {
				b.Fatal(err)
			}
		}
		b.StopTimer()
		reportRate(b, topic, 1)
	})
	// At most 64 sends in flight, one message each.
	b.Run("pipelined-64", func(b *testing.B) {
		benchWireSender(b, lat, &sender.Options{MaxInFlightMessages: 64, DisableBatching: true})
	})
	// The sender's defaults: pipelined and batched.
	b.Run("batched", func(b *testing.B) {
		benchWireSender(b, lat, nil)
	})
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before {
		if time.Now().After(deadline) {
			b.Fatalf("%d goroutines remain after the benchmarks, %d before", runtime.NumGoroutine(), before)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// BenchmarkWire measures sending 1 KiB messages through the real SDK client to
// sbtest.NewServer on loopback with no simulated latency: the cost of the AMQP stack on
// both sides. msgs/s is the throughput.
func BenchmarkWire(b *testing.B) { benchWire(b, sbtest.Latency{}) }

// BenchmarkWireLatency is BenchmarkWire with the server's namespace applying the latency
// model of BenchmarkSend (benchLatency: 7 ms round trip, 1 ms store), so that its numbers
// compare with BenchmarkSend's in-memory ones.
func BenchmarkWireLatency(b *testing.B) { benchWire(b, benchLatency) }
