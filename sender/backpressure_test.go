package sender_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/sbkit/sbkit"
	"github.com/sbkit/sbkit/sbtest"
	"github.com/sbkit/sbkit/sender"
)

func TestTrySendReturnsErrFull(t *testing.T) {
	size := sbkit.MessageSize(msg(0))
	tests := []struct {
		name string
		opts sender.Options
	}{
		{"message window", sender.Options{MaxInFlightMessages: 2}},
		{"byte window", sender.Options{MaxInFlightBytes: 2 * size}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				b := newBroker(t, sbtest.Latency{RoundTrip: 10 * time.Millisecond}, nil)
				tt.opts.DisableBatching = true
				s := newSender(t, b.s, &tt.opts)
				for i := range 2 {
					if _, err := s.TrySend(t.Context(), msg(i)); err != nil {
						t.Fatalf("TrySend %d: %v", i, err)
					}
				}
				r, err := s.TrySend(t.Context(), msg(2))
				if r != nil || !errors.Is(err, sender.ErrFull) {
					t.Fatalf("TrySend on a full window = %v, %v; want ErrFull", r, err)
				}
				if st := s.Stats(); st.InFlightMessages != 2 || st.InFlightBytes != 2*size {
					t.Fatalf("in flight %d msgs %d bytes, want 2 and %d", st.InFlightMessages, st.InFlightBytes, 2*size)
				}
				time.Sleep(10 * time.Millisecond)
				synctest.Wait()
				if _, err := s.TrySend(t.Context(), msg(3)); err != nil {
					t.Fatalf("TrySend once room freed: %v", err)
				}
			})
		})
	}
}

func TestSendBlocksUntilRoomOrContextEnd(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newBroker(t, sbtest.Latency{RoundTrip: 10 * time.Millisecond}, nil)
		out := newOutcomes()
		s := newSender(t, b.s, &sender.Options{MaxInFlightMessages: 1, DisableBatching: true, Hooks: []sender.Hook{out}})
		if _, err := s.SendAsync(t.Context(), msg(0)); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Millisecond)
		defer cancel()
		start := time.Now()
		err := s.Send(ctx, msg(1))
		if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) != 5*time.Millisecond {
			t.Fatalf("Send on a full window = %v after %v; want DeadlineExceeded after 5ms", err, time.Since(start))
		}
		start = time.Now()
		if err := s.Send(t.Context(), msg(2)); err != nil {
			t.Fatal(err)
		}
		// msg(2) waited for msg(0) (10ms from the start) and then took its own 10ms.
		if got := time.Since(start); got != 15*time.Millisecond {
			t.Errorf("blocked Send took %v, want 15ms", got)
		}
		if err := s.Flush(t.Context()); err != nil {
			t.Fatal(err)
		}
		out.checkOnce(t, []string{"m0000", "m0001", "m0002"}) // m0001's outcome is its refusal
		if b.q.Counts().Active != 2 {
			t.Errorf("queue holds %d, want 2 (the cancelled one never sent)", b.q.Counts().Active)
		}
	})
}

func TestMessageLargerThanByteWindowTravelsAlone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newBroker(t, sbtest.Latency{RoundTrip: 10 * time.Millisecond}, nil)
		s := newSender(t, b.s, &sender.Options{MaxInFlightBytes: 1000})
		var results []*sender.Result
		for i := range 3 {
			r, err := s.SendAsync(t.Context(), &azservicebus.Message{Body: make([]byte, 5000+i)})
			if err != nil {
				t.Fatal(err)
			}
			results = append(results, r)
		}
		for _, r := range results {
			if err := r.Wait(t.Context()); err != nil {
				t.Fatal(err)
			}
		}
		if st := b.q.Stats(); st.PeakInFlightSends != 1 || st.Sent != 3 {
			t.Errorf("broker stats %+v: want 3 sent one at a time", st)
		}
	})
}

// TestFastProducerStaysInByteWindow: a producer much faster than the broker (it produces
// 1,000 messages at once; the broker needs 8ms per request) keeps the bytes in flight
// inside the byte window, whereas a goroutine per message overshoots it by far.
func TestFastProducerStaysInByteWindow(t *testing.T) {
	const window = 64 << 10
	body := make([]byte, 1024)
	lat := sbtest.Latency{RoundTrip: 7 * time.Millisecond, StoreTime: time.Millisecond}
	const n, producers = 1000, 20
	for _, batching := range []bool{false, true} {
		t.Run(map[bool]string{false: "single", true: "batched"}[batching], func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				b := newBroker(t, lat, nil)
				s := newSender(t, b.s, &sender.Options{MaxInFlightBytes: window, DisableBatching: !batching})
				var wg sync.WaitGroup
				for p := range producers {
					wg.Go(func() {
						for i := range n / producers {
							if _, err := s.SendAsync(t.Context(), &azservicebus.Message{Body: body}); err != nil {
								t.Errorf("producer %d message %d: %v", p, i, err)
							}
						}
					})
				}
				wg.Wait()
				if err := s.Flush(t.Context()); err != nil {
					t.Fatal(err)
				}
				st, bst := s.Stats(), b.q.Stats()
				if st.Sent != n || bst.Sent != n {
					t.Fatalf("sent %d (broker %d), want %d", st.Sent, bst.Sent, n)
				}
				if st.PeakInFlightBytes > window || bst.PeakInFlightBytes > window {
					t.Errorf("peak in flight %d bytes (broker %d), window %d", st.PeakInFlightBytes, bst.PeakInFlightBytes, window)
				}
				t.Logf("peak in flight: sender %d, broker %d bytes; window %d", st.PeakInFlightBytes, bst.PeakInFlightBytes, window)
			})
		})
	}
	t.Run("goroutine-per-message baseline", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			b := newBroker(t, lat, nil)
			var wg sync.WaitGroup
			for range n {
				wg.Go(func() {
					if err := b.s.SendMessage(t.Context(), &azservicebus.Message{Body: body}, nil); err != nil {
						t.Error(err)
					}
				})
			}
			wg.Wait()
			if peak := b.q.Stats().PeakInFlightBytes; peak <= window {
				t.Errorf("baseline peak %d bytes within the window %d: the test shows nothing", peak, window)
			} else {
				t.Logf("baseline peak in flight: %d bytes; window %d", peak, window)
			}
		})
	})
}
