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

// wireClient serves ns with sbtest.NewServer and returns the real SDK client connected to
// it over loopback; both are closed when b ends.
func wireClient(b *testing.B, ns *sbtest.Namespace) *azservicebus.Client {
	b.Helper()
	srv := sbtest.NewTestServer(b, &sbtest.ServerOptions{Namespace: ns})
	client, err := azservicebus.NewClientFromConnectionString(srv.ConnectionString(), nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = client.Close(context.Background()) })
	return client
}

// wireTopic starts an sbtest server whose namespace has the latency model lat and a topic
// without subscriptions (it stores nothing, so memory does not grow with b.N), connects
// the real SDK client to it over loopback and returns an SDK sender to the topic with its
// link already attached, so that connecting is not timed. Everything is closed when b
// ends.
func wireTopic(b *testing.B, lat sbtest.Latency) (*azservicebus.Sender, *sbtest.Topic) {
	b.Helper()
	ns := sbtest.NewTestNamespace(b, &sbtest.NamespaceOptions{Latency: lat, Topics: map[string]sbtest.TopicOptions{"bench": {}}})
	topic, _ := ns.Topic("bench")
	client := wireClient(b, ns)
	ctx := context.Background()
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

// benchWire runs the three ways of sending of BenchmarkSend through the real
// *azservicebus.Client talking AMQP over loopback to sbtest.NewServer, whose namespace
// applies the latency model lat, and checks that no goroutine outlives them.
func benchWire(b *testing.B, lat sbtest.Latency) {
	before := runtime.NumGoroutine()
	// One SendMessage at a time, each awaited: one message per round trip.
	b.Run("sequential", func(b *testing.B) {
		dst, topic := wireTopic(b, lat)
		benchSequential(b, dst, topic)
	})
	// At most 64 sends in flight, one message each.
	b.Run("pipelined-64", func(b *testing.B) {
		dst, topic := wireTopic(b, lat)
		benchSender(b, dst, topic, &sender.Options{MaxInFlightMessages: 64, DisableBatching: true}, burst)
	})
	// The sender's defaults: pipelined and batched (sender.New batches the SDK's sender).
	b.Run("batched", func(b *testing.B) {
		dst, topic := wireTopic(b, lat)
		benchSender(b, dst, topic, nil, burst)
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

// wireReceiverOf returns the real SDK's receiver of client's queue "work" (served by
// sbtest.NewServer over loopback), its link attached (connection, SASL, $cbs token,
// attach) by a warm-up receive of one message, which it completes: the queue must hold
// one message more than the benchmark uses. It is closed when b ends.
func wireReceiverOf(b *testing.B, client *azservicebus.Client) *azservicebus.Receiver {
	b.Helper()
	ctx := context.Background()
	r, err := client.NewReceiverForQueue("work", nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = r.Close(ctx) })
	msgs, err := r.ReceiveMessages(ctx, 1, nil)
	if err != nil || len(msgs) != 1 {
		b.Fatalf("warm-up receive: %d messages, %v", len(msgs), err)
	}
	if err := r.CompleteMessage(ctx, msgs[0], nil); err != nil {
		b.Fatal(err)
	}
	return r
}

// BenchmarkWireProcess is BenchmarkProcess through the real SDK client: an
// *azservicebus.Receiver talking AMQP over loopback to sbtest.NewServer, whose namespace
// applies the latency model at each of processRTTs, handlers working 5 ms.
func BenchmarkWireProcess(b *testing.B) {
	before := runtime.NumGoroutine()
	benchProcessRTTs(b, func(b *testing.B, n, receivers int, lat sbtest.Latency) ([]sbkit.LockingReceiver, *sbtest.Entity) {
		ns, q := processNamespace(b, n+receivers, lat) // one more for each receiver's warm-up
		client := wireClient(b, ns)
		var rs []sbkit.LockingReceiver
		for range receivers {
			rs = append(rs, wireReceiverOf(b, client))
		}
		return rs, q
	})
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before {
		if time.Now().After(deadline) {
			b.Fatalf("%d goroutines remain after the benchmarks, %d before", runtime.NumGoroutine(), before)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
