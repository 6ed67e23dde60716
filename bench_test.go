package sbkit_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
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
	ns := sbtest.NewNamespace(&sbtest.NamespaceOptions{Latency: lat})
	topic, err := ns.NewTopic("bench", nil)
	if err != nil {
		b.Fatal(err)
	}
	dst, err := ns.NewSender("bench")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = dst.Close(context.Background()) })
	return dst, topic
}

// reportRate reports the messages per second of the timed part of the benchmark and
// fails it unless the broker stored every message.
func reportRate(b *testing.B, topic *sbtest.Topic) {
	b.Helper()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
	if sent := topic.Stats().Sent; sent != int64(b.N) {
		b.Fatalf("broker stored %d of %d messages", sent, b.N)
	}
}

// benchSender runs b.N messages through a sender.Sender and waits for all outcomes.
func benchSender(b *testing.B, lat sbtest.Latency, opts *sender.Options) {
	dst, topic := benchTopic(b, lat)
	s, err := sender.New(dst, opts)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	b.ResetTimer()
	for range b.N {
		if _, err := s.SendAsync(ctx, &azservicebus.Message{Body: benchBody}); err != nil {
			b.Fatal(err)
		}
	}
	if err := s.Flush(ctx); err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	if st := s.Stats(); st.Failed != 0 {
		b.Fatalf("%d messages failed", st.Failed)
	}
	if err := s.Close(ctx); err != nil {
		b.Fatal(err)
	}
	reportRate(b, topic)
}

// BenchmarkSend compares ways of sending b.N messages of 1 KiB to a broker with an 8ms
// request latency (see benchLatency); msgs/s is the throughput.
func BenchmarkSend(b *testing.B) {
	ctx := context.Background()
	// The documentation's first loop: await every send before the next (one message per
	// round trip).
	b.Run("sequential", func(b *testing.B) {
		dst, topic := benchTopic(b, benchLatency)
		b.ResetTimer()
		for range b.N {
			if err := dst.SendMessage(ctx, &azservicebus.Message{Body: benchBody}, nil); err != nil {
				b.Fatal(err)
			}
		}
		b.StopTimer()
		reportRate(b, topic)
	})
	// The documentation's second loop: start every send at once and await them all.
	// Nothing bounds the memory in flight.
	b.Run("goroutine-per-message", func(b *testing.B) {
		dst, topic := benchTopic(b, benchLatency)
		var wg sync.WaitGroup
		b.ResetTimer()
		for range b.N {
			wg.Go(func() {
				if err := dst.SendMessage(ctx, &azservicebus.Message{Body: benchBody}, nil); err != nil {
					b.Error(err)
				}
			})
		}
		wg.Wait()
		b.StopTimer()
		reportRate(b, topic)
	})
	// The documentation's semaphore: at most 64 sends in flight, one message each.
	b.Run("pipelined-64", func(b *testing.B) {
		benchSender(b, benchLatency, &sender.Options{MaxInFlightMessages: 64, DisableBatching: true})
	})
	// The sender's defaults: pipelined and batched.
	b.Run("batched", func(b *testing.B) {
		benchSender(b, benchLatency, nil)
	})
}

// BenchmarkSendOverhead measures what the sender adds per message when the broker
// answers at once.
func BenchmarkSendOverhead(b *testing.B) {
	b.Run("direct", func(b *testing.B) {
		b.ReportAllocs()
		dst, topic := benchTopic(b, sbtest.Latency{})
		ctx := context.Background()
		b.ResetTimer()
		for range b.N {
			if err := dst.SendMessage(ctx, &azservicebus.Message{Body: benchBody}, nil); err != nil {
				b.Fatal(err)
			}
		}
		b.StopTimer()
		reportRate(b, topic)
	})
	b.Run("single", func(b *testing.B) {
		b.ReportAllocs()
		benchSender(b, sbtest.Latency{}, &sender.Options{DisableBatching: true})
	})
	b.Run("batched", func(b *testing.B) {
		b.ReportAllocs()
		benchSender(b, sbtest.Latency{}, nil)
	})
}
