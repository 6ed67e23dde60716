package sender_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/sbkit/sbkit"
	"github.com/sbkit/sbkit/sbtest"
	"github.com/sbkit/sbkit/sender"
)

// sendAsync sends msgs with SendAsync and returns their results.
func sendAsync(t *testing.T, ctx context.Context, s *sender.Sender, msgs ...*azservicebus.Message) []*sender.Result {
	t.Helper()
	var rs []*sender.Result
	for _, m := range msgs {
		r, err := s.SendAsync(ctx, m)
		if err != nil {
			t.Fatal(err)
		}
		rs = append(rs, r)
	}
	return rs
}

func msgs(from, to int) []*azservicebus.Message {
	var ms []*azservicebus.Message
	for i := from; i < to; i++ {
		ms = append(ms, msg(i))
	}
	return ms
}

func TestBatchingSizes(t *testing.T) {
	tests := []struct {
		name        string
		opts        sender.Options
		maxMsgSize  int
		n           int
		wantBatches int64
	}{
		{"one batch", sender.Options{}, 0, 100, 1},
		{"count limit", sender.Options{MaxBatchMessages: 10}, 0, 95, 10},
		{"default count limit", sender.Options{MaxInFlightMessages: 2000}, 0, 1500, 2},
		{"no count limit", sender.Options{MaxInFlightMessages: 2000, MaxBatchMessages: -1}, 0, 1500, 1},
		{"byte limit", sender.Options{MaxBatchBytes: 10 * sbkit.MessageSize(msg(0))}, 0, 95, 10},
		// The broker's batches hold 4 KiB; the sender's estimate seals at 256 KiB, so the
		// SDK batch decides: a message that does not fit starts the next batch.
		{"broker limit splits", sender.Options{}, 4096, 100, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ns := sbtest.NewTestNamespace(t, &sbtest.NamespaceOptions{MaxMessageSize: tt.maxMsgSize, Latency: sbtest.Latency{RoundTrip: 7 * time.Millisecond},
					Queues: map[string]*sbtest.EntityOptions{"q": nil}})
				q, _ := ns.Entity("q")
				dst, _ := ns.NewSender("q", nil)
				s := newSender(t, dst, &tt.opts)
				start := time.Now()
				for _, r := range sendAsync(t, t.Context(), s, msgs(0, tt.n)...) {
					if err := r.Wait(t.Context()); err != nil {
						t.Fatal(err)
					}
				}
				if got := q.Stats().Batches; got != tt.wantBatches {
					t.Errorf("broker got %d batches, want %d", got, tt.wantBatches)
				}
				if got := s.Stats().BatchesSent; got != q.Stats().Batches {
					t.Errorf("sender counted %d batches, broker %d", got, q.Stats().Batches)
				}
				// Full batches go at once; only the last one lingers. All travel in parallel.
				// (A group split by the broker's limit goes batch after batch.)
				if got := time.Since(start); tt.maxMsgSize == 0 && got > sender.DefaultLinger+7*time.Millisecond {
					t.Errorf("took %v, want at most linger + one round trip", got)
				}
				active := q.Active()
				if len(active) != tt.n {
					t.Fatalf("queue holds %d, want %d", len(active), tt.n)
				}
			})
		})
	}
}

func TestLinger(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newBroker(t, sbtest.Latency{}, nil)
		s := newSender(t, b.s, &sender.Options{Linger: 5 * time.Millisecond})
		r := sendAsync(t, t.Context(), s, msg(0))[0]
		time.Sleep(4 * time.Millisecond)
		sendAsync(t, t.Context(), s, msg(1))
		synctest.Wait()
		if b.q.Counts().Active != 0 {
			t.Fatal("sent before the linger time")
		}
		time.Sleep(time.Millisecond)
		synctest.Wait()
		if b.q.Counts().Active != 2 || b.q.Stats().Batches != 1 || r.Err() != nil {
			t.Fatalf("after the linger: %d active in %d batches, err %v", b.q.Counts().Active, b.q.Stats().Batches, r.Err())
		}
		// Flush does not wait for the linger.
		sendAsync(t, t.Context(), s, msg(2))
		if err := s.Flush(t.Context()); err != nil {
			t.Fatal(err)
		}
		if b.q.Counts().Active != 3 {
			t.Fatal("Flush did not send the lingering batch")
		}
	})
}

func TestTooLargeFailsAlone(t *testing.T) {
	for _, batching := range []bool{false, true} {
		t.Run(map[bool]string{false: "single", true: "batched"}[batching], func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				b := newBroker(t, sbtest.Latency{RoundTrip: time.Millisecond}, nil)
				s := newSender(t, b.s, &sender.Options{DisableBatching: !batching})
				big := &azservicebus.Message{Body: make([]byte, 257<<10)}
				rs := sendAsync(t, t.Context(), s, msg(0), big, msg(2))
				for i, r := range rs {
					err := r.Wait(t.Context())
					if tooLarge := errors.Is(err, azservicebus.ErrMessageTooLarge); (i == 1) != tooLarge {
						t.Errorf("message %d: %v", i, err)
					}
					if i != 1 && err != nil {
						t.Errorf("message %d failed with the large one: %v", i, err)
					}
				}
				if b.q.Counts().Active != 2 {
					t.Errorf("queue holds %d, want 2", b.q.Counts().Active)
				}
			})
		})
	}
}

func TestContextEndsWhileLingering(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newBroker(t, sbtest.Latency{}, nil)
		out := newOutcomes()
		s := newSender(t, b.s, &sender.Options{Linger: 50 * time.Millisecond, Hooks: []sender.Hook{out}})
		ctx, cancel := context.WithCancel(t.Context())
		gone := sendAsync(t, ctx, s, msg(0))[0]
		kept := sendAsync(t, t.Context(), s, msg(1))[0]
		time.Sleep(10 * time.Millisecond)
		cancel()
		if err := gone.Wait(t.Context()); !errors.Is(err, context.Canceled) {
			t.Errorf("cancelled message: %v, want context.Canceled", err)
		}
		if err := kept.Wait(t.Context()); err != nil {
			t.Errorf("other message: %v", err)
		}
		if gone.Attempts() != 0 {
			t.Errorf("cancelled message had %d attempts", gone.Attempts())
		}
		active := b.q.Active()
		if len(active) != 1 || active[0].MessageID != "m0001" {
			t.Errorf("queue holds %d messages, want only m0001", len(active))
		}
		out.checkOnce(t, []string{"m0000", "m0001"})
	})
}

func TestBatchesGroupedBySession(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newBroker(t, sbtest.Latency{}, nil)
		s := newSender(t, b.s, nil)
		var ms []*azservicebus.Message
		for i := range 30 {
			ms = append(ms, sessionMsg([]string{"a", "b", "c"}[i%3], i))
		}
		if err := s.SendAll(t.Context(), ms); err != nil {
			t.Fatal(err)
		}
		if got := b.q.Stats().Batches; got != 3 {
			t.Errorf("%d batches, want one per session (3)", got)
		}
	})
}
