package sbtest

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
)

// BenchmarkSendReceive measures one send, receive and complete with no latency, on an
// empty queue and on one with a backlog of 100k messages: the costs should be about the
// same, since every operation is O(log n).
func BenchmarkSendReceive(b *testing.B) {
	for _, backlog := range []int{0, 100_000} {
		b.Run(fmt.Sprintf("backlog=%d", backlog), func(b *testing.B) {
			ctx := context.Background()
			ns := NewNamespace(nil)
			if _, err := ns.NewQueue("q", nil); err != nil {
				b.Fatal(err)
			}
			s, _ := ns.NewSender("q", nil)
			r, _ := ns.NewReceiverForQueue("q", nil)
			body := make([]byte, 100)
			for range backlog {
				_ = s.SendMessage(ctx, &azservicebus.Message{Body: body}, nil)
			}
			b.ReportAllocs()
			for b.Loop() {
				if err := s.SendMessage(ctx, &azservicebus.Message{Body: body}, nil); err != nil {
					b.Fatal(err)
				}
				ms, err := r.ReceiveMessages(ctx, 1, nil)
				if err != nil {
					b.Fatal(err)
				}
				if err := r.CompleteMessage(ctx, ms[0], nil); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkParallelSendLatency sends from 64 goroutines with RoundTrip 7ms and StoreTime
// 1ms: expect about 64/8ms = 8000 msgs/s (the msgs/s metric), since requests are served
// in parallel.
func BenchmarkParallelSendLatency(b *testing.B) {
	ctx := context.Background()
	ns := NewNamespace(&NamespaceOptions{Latency: Latency{RoundTrip: 7 * time.Millisecond, StoreTime: time.Millisecond}})
	q, _ := ns.NewQueue("q", nil)
	s, _ := ns.NewSender("q", nil)
	b.SetParallelism(max(1, 64/runtime.GOMAXPROCS(0)))
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if err := s.SendMessage(ctx, &azservicebus.Message{Body: []byte("x")}, nil); err != nil {
				b.Error(err)
			}
		}
	})
	b.ReportMetric(float64(q.Stats().Sent)/time.Since(start).Seconds(), "msgs/s")
}

// BenchmarkSessionBacklog measures a session's round trip (a send to a new session,
// AcceptNextSession, receive, complete, close) on a session queue with a backlog of
// available sessions, each with one message; backlog=0 is the baseline. Every session
// operation must cost O(log sessions), so the rows should be about the same (with a
// walk over every session per operation, 40,000 sessions took 92 s to send and drain).
func BenchmarkSessionBacklog(b *testing.B) {
	for _, backlog := range []int{0, 1000, 20_000} {
		b.Run(fmt.Sprintf("backlog=%d", backlog), func(b *testing.B) {
			ctx := context.Background()
			ns := NewNamespace(nil)
			if _, err := ns.NewQueue("q", &EntityOptions{RequiresSession: true}); err != nil {
				b.Fatal(err)
			}
			s, _ := ns.NewSender("q", nil)
			body := []byte("x")
			id := 0
			send := func() {
				id++
				if err := s.SendMessage(ctx, &azservicebus.Message{Body: body, SessionID: ptr(fmt.Sprint(id))}, nil); err != nil {
					b.Fatal(err)
				}
			}
			for range backlog {
				send()
			}
			b.ReportAllocs()
			start := time.Now()
			for b.Loop() {
				send()
				sr, err := ns.AcceptNextSessionForQueue(ctx, "q", nil)
				if err != nil {
					b.Fatal(err)
				}
				ms, err := sr.ReceiveMessages(ctx, 1, nil)
				if err != nil || len(ms) != 1 {
					b.Fatal(len(ms), err)
				}
				if err := sr.CompleteMessage(ctx, ms[0], nil); err != nil {
					b.Fatal(err)
				}
				_ = sr.Close(ctx)
			}
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "msgs/s")
		})
	}
}

// BenchmarkSessionRelease measures closing a session receiver that holds one locked
// message (and taking the session again) while other session receivers hold locked=N
// messages of the same queue; locked=0 is the baseline. Releasing a session touches its
// own locked messages only, so the rows should be about the same.
func BenchmarkSessionRelease(b *testing.B) {
	for _, locked := range []int{0, 2000, 8000} {
		b.Run(fmt.Sprintf("locked=%d", locked), func(b *testing.B) {
			ctx := context.Background()
			ns := NewNamespace(nil)
			if _, err := ns.NewQueue("q", &EntityOptions{RequiresSession: true}); err != nil {
				b.Fatal(err)
			}
			s, _ := ns.NewSender("q", nil)
			hold := func(id string) *SessionReceiver {
				sr, err := ns.AcceptSessionForQueue(ctx, "q", id, nil)
				if err != nil {
					b.Fatal(err)
				}
				if ms, err := sr.ReceiveMessages(ctx, 1, nil); err != nil || len(ms) != 1 {
					b.Fatal(len(ms), err)
				}
				return sr
			}
			for i := range locked + 1 {
				if err := s.SendMessage(ctx, &azservicebus.Message{Body: []byte("x"), SessionID: ptr(fmt.Sprint(i))}, nil); err != nil {
					b.Fatal(err)
				}
			}
			for i := range locked {
				hold(fmt.Sprint(i))
			}
			sr := hold(fmt.Sprint(locked))
			start := time.Now()
			for b.Loop() {
				_ = sr.Close(ctx)
				sr = hold(fmt.Sprint(locked))
			}
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "releases/s")
		})
	}
}
