package sbtest

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/sbkit/sbkit"
)

func TestLatencyPerOperation(t *testing.T) {
	lat := Latency{RoundTrip: 7 * time.Millisecond, StoreTime: time.Millisecond}
	tests := []struct {
		name string
		op   func(t *testing.T, f *fixture)
		want time.Duration
	}{
		{"send", func(t *testing.T, f *fixture) { sendAll(t, f.s, "b") }, 8 * time.Millisecond},
		{"batch", func(t *testing.T, f *fixture) {
			b, _ := f.s.NewBatch(context.Background(), nil)
			for range 10 {
				_ = b.AddMessage(msg("b"), nil)
			}
			if err := f.s.SendBatch(context.Background(), b, nil); err != nil {
				t.Fatal(err)
			}
		}, 8 * time.Millisecond},
		{"schedule", func(t *testing.T, f *fixture) {
			if _, err := f.s.ScheduleMessages(context.Background(), []*azservicebus.Message{msg("b")}, time.Now().Add(time.Hour), nil); err != nil {
				t.Fatal(err)
			}
		}, 8 * time.Millisecond},
		{"receive", func(t *testing.T, f *fixture) { receiveOne(t, f.r) }, 7 * time.Millisecond},
		{"settle", func(t *testing.T, f *fixture) {
			if err := f.r.CompleteMessage(context.Background(), f.held, nil); err != nil {
				t.Fatal(err)
			}
		}, 7 * time.Millisecond},
		{"renew", func(t *testing.T, f *fixture) {
			if err := f.r.RenewMessageLock(context.Background(), f.held, nil); err != nil {
				t.Fatal(err)
			}
		}, 7 * time.Millisecond},
		{"peek", func(t *testing.T, f *fixture) {
			if _, err := f.r.PeekMessages(context.Background(), 1, nil); err != nil {
				t.Fatal(err)
			}
		}, 7 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := newFixture(t, nil)
				sendAll(t, f.s, "a", "a")
				f.held = receiveOne(t, f.r)
				f.ns.SetLatency(lat)
				if f.ns.Latency() != lat {
					t.Fatal("Latency() does not return what SetLatency set")
				}
				start := time.Now()
				tt.op(t, f)
				if got := time.Since(start); got != tt.want {
					t.Fatalf("took %v, want %v", got, tt.want)
				}
			})
		})
	}
}

// TestConcurrentSendsOverlap: requests are served in parallel, so 64 concurrent senders
// with a 7ms round trip and 1ms store reach 64 messages per 8ms (8000/s); with
// StoreConcurrency 1 the stores serialise.
func TestConcurrentSendsOverlap(t *testing.T) {
	tests := []struct {
		name        string
		lat         Latency
		senders     int
		each        int
		wantElapsed time.Duration
	}{
		{"unlimited", Latency{RoundTrip: 7 * time.Millisecond, StoreTime: time.Millisecond}, 64, 10, 80 * time.Millisecond},
		{"store concurrency 1", Latency{RoundTrip: 7 * time.Millisecond, StoreTime: time.Millisecond, StoreConcurrency: 1}, 4, 1, 11 * time.Millisecond},
		{"store concurrency 2", Latency{StoreTime: time.Millisecond, StoreConcurrency: 2}, 8, 1, 4 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ns := NewNamespace(&NamespaceOptions{Latency: tt.lat})
				q, _ := ns.NewQueue("q", nil)
				s, _ := ns.NewSender("q", nil)
				start := time.Now()
				var wg sync.WaitGroup
				for range tt.senders {
					wg.Go(func() {
						for range tt.each {
							if err := s.SendMessage(context.Background(), msg("0123456789"), nil); err != nil {
								t.Error(err)
							}
						}
					})
				}
				wg.Wait()
				if got := time.Since(start); got != tt.wantElapsed {
					t.Fatalf("elapsed %v, want %v", got, tt.wantElapsed)
				}
				st := q.Stats()
				if st.Sent != int64(tt.senders*tt.each) || st.InFlightSends != 0 || st.PeakInFlightSends != int64(tt.senders) {
					t.Fatalf("stats %+v", st)
				}
				if want := int64(tt.senders) * sbkit.MessageSize(msg("0123456789")); st.PeakInFlightBytes != want {
					t.Fatalf("PeakInFlightBytes = %d, want %d", st.PeakInFlightBytes, want)
				}
			})
		})
	}
}

func TestSendCancelledDuringLatencyStoresNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ns := NewNamespace(&NamespaceOptions{Latency: Latency{RoundTrip: time.Second, StoreTime: time.Second}})
		q, _ := ns.NewQueue("q", nil)
		s, _ := ns.NewSender("q", nil)
		for _, d := range []time.Duration{500 * time.Millisecond, 1500 * time.Millisecond} {
			ctx, cancel := context.WithTimeout(context.Background(), d)
			err := s.SendMessage(ctx, msg("a"), nil)
			cancel()
			if err != context.DeadlineExceeded {
				t.Fatalf("err = %v", err)
			}
		}
		if q.Counts().Active != 0 || q.Stats().InFlightSends != 0 {
			t.Fatal("a cancelled send stored a message or stayed in flight")
		}
	})
}
