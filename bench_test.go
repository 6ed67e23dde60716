package sbkit_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/sbkit/sbkit"
	"github.com/sbkit/sbkit/sbtest"
	"github.com/sbkit/sbkit/sender"
)

// benchLatency models a broker 7ms away that takes 1ms to store a request, as in the
// Service Bus documentation's example scaled down (70ms round trip, 10ms store).
var benchLatency = sbtest.Latency{RoundTrip: 7 * time.Millisecond, StoreTime: time.Millisecond}

// benchBody is the 1 KiB payload of every benchmark message. Messages share it: nobody
// writes to it, and sbtest copies what it stores.
var benchBody = make([]byte, 1024)

// benchTopic returns a sender to a topic without subscriptions: sbtest models every
// request and its latency but keeps no messages, so memory does not grow with b.N.
func benchTopic(b *testing.B, lat sbtest.Latency) (*sbtest.Sender, *sbtest.Topic) {
	b.Helper()
	ns := sbtest.NewTestNamespace(b, &sbtest.NamespaceOptions{Latency: lat, Topics: map[string]sbtest.TopicOptions{"bench": {}}})
	topic, _ := ns.Topic("bench")
	dst, err := ns.NewSender("bench", nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = dst.Close(context.Background()) })
	return dst, topic
}

// burst is how many messages one iteration of a concurrent BenchmarkSend sub-benchmark
// sends (and waits for): enough to fill every pipeline many times over, so that even
// -benchtime=1x measures a steady rate, and few enough that b.N grows quickly at 8ms a
// round trip. The sequential baseline sends one message per iteration (its rate does not
// depend on the count, and 1,024 messages would take 8.6s).
const burst = 1024

// reportRate reports the messages per second of the timed part of the benchmark, which
// sent perOp messages per iteration, and fails it unless the broker stored every message.
func reportRate(b *testing.B, topic *sbtest.Topic, perOp int) {
	b.Helper()
	n := int64(b.N) * int64(perOp)
	b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "msgs/s")
	if sent := topic.Stats().Sent; sent != n {
		b.Fatalf("broker stored %d of %d messages", sent, n)
	}
}

// benchSequential sends b.N messages to dst one at a time, awaiting each: one message per
// round trip.
func benchSequential(b *testing.B, dst sbkit.MessageSender, topic *sbtest.Topic) {
	ctx := context.Background()
	b.ResetTimer()
	for range b.N {
		if err := dst.SendMessage(ctx, &azservicebus.Message{Body: benchBody}, nil); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	reportRate(b, topic, 1)
}

// benchSender sends messages to dst through one sender.Sender, pipelined. With perOp > 0
// every iteration sends perOp messages and waits for their outcomes (Flush); with
// perOp == 0 the benchmark streams b.N messages and waits once at the end.
func benchSender(b *testing.B, dst sbkit.MessageSender, topic *sbtest.Topic, opts *sender.Options, perOp int) {
	s, err := sender.New(dst, opts)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	send := func(n int) {
		for range n {
			if _, err := s.SendAsync(ctx, &azservicebus.Message{Body: benchBody}); err != nil {
				b.Fatal(err)
			}
		}
		if err := s.Flush(ctx); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	if perOp == 0 {
		send(b.N)
	} else {
		for range b.N {
			send(perOp)
		}
	}
	b.StopTimer()
	if st := s.Stats(); st.Failed != 0 {
		b.Fatalf("%d messages failed", st.Failed)
	}
	if err := s.Close(ctx); err != nil {
		b.Fatal(err)
	}
	reportRate(b, topic, max(perOp, 1))
}

// benchMemorySender is benchSender on a fresh in-memory topic with latency lat.
func benchMemorySender(b *testing.B, lat sbtest.Latency, opts *sender.Options, perOp int) {
	dst, topic := benchTopic(b, lat)
	benchSender(b, dst, topic, opts, perOp)
}

// BenchmarkSend compares ways of sending messages of 1 KiB to a broker with an 8ms
// request latency (see benchLatency); msgs/s is the throughput. The sequential baseline
// sends b.N messages, the others b.N bursts of 1,024 (see burst).
func BenchmarkSend(b *testing.B) {
	ctx := context.Background()
	// The documentation's first loop: await every send before the next (one message per
	// round trip).
	b.Run("sequential", func(b *testing.B) {
		dst, topic := benchTopic(b, benchLatency)
		benchSequential(b, dst, topic)
	})
	// The documentation's second loop: start every send of a burst at once, each on its
	// own goroutine, and await them all. Nothing bounds the memory in flight but the
	// burst itself.
	b.Run("goroutine-per-message", func(b *testing.B) {
		dst, topic := benchTopic(b, benchLatency)
		var wg sync.WaitGroup
		b.ResetTimer()
		for range b.N {
			for range burst {
				wg.Go(func() {
					if err := dst.SendMessage(ctx, &azservicebus.Message{Body: benchBody}, nil); err != nil {
						b.Error(err)
					}
				})
			}
			wg.Wait()
		}
		b.StopTimer()
		reportRate(b, topic, burst)
	})
	// The documentation's semaphore: at most 64 sends in flight, one message each.
	b.Run("pipelined-64", func(b *testing.B) {
		benchMemorySender(b, benchLatency, &sender.Options{MaxInFlightMessages: 64, DisableBatching: true}, burst)
	})
	// The sender's defaults: pipelined and batched.
	b.Run("batched", func(b *testing.B) {
		benchMemorySender(b, benchLatency, nil, burst)
	})
}

// BenchmarkSendOverhead measures what the sender adds per message when the broker
// answers at once.
func BenchmarkSendOverhead(b *testing.B) {
	b.Run("direct", func(b *testing.B) {
		b.ReportAllocs()
		dst, topic := benchTopic(b, sbtest.Latency{})
		benchSequential(b, dst, topic)
	})
	b.Run("single", func(b *testing.B) {
		b.ReportAllocs()
		benchMemorySender(b, sbtest.Latency{}, &sender.Options{DisableBatching: true}, 0)
	})
	b.Run("batched", func(b *testing.B) {
		b.ReportAllocs()
		benchMemorySender(b, sbtest.Latency{}, nil, 0)
	})
}
