package sbtest

import (
	"context"
	"errors"
	"math/rand/v2"
	"testing"
	"testing/synctest"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/sbkit/sbkit"
)

// Every message is in exactly one count, and Size follows the messages in and out.
func TestCounts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		f := newFixture(t, nil)
		size := func(bodies ...string) int64 {
			var n int64
			for _, b := range bodies {
				n += sbkit.MessageSize(msg(b))
			}
			return n
		}
		sendAll(t, f.s, "a", "bb", "ccc", "dddd", "eeeee")
		if _, err := f.s.ScheduleMessages(ctx, []*azservicebus.Message{msg("later")}, time.Now().Add(time.Hour), nil); err != nil {
			t.Fatal(err)
		}
		ms := receive(t, f.r, 4, time.Second) // a, bb, ccc, dddd locked
		if err := f.r.DeferMessage(ctx, ms[0], nil); err != nil {
			t.Fatal(err)
		}
		if err := f.r.DeadLetterMessage(ctx, ms[1], nil); err != nil {
			t.Fatal(err)
		}
		if err := f.r.CompleteMessage(ctx, ms[2], nil); err != nil {
			t.Fatal(err)
		}
		want := Counts{Active: 1, Locked: 1, Deferred: 1, Scheduled: 1, DeadLetter: 1,
			Size: size("a", "bb", "dddd", "eeeee", "later")}
		if got := f.q.Counts(); got != want {
			t.Fatalf("counts %+v, want %+v", got, want)
		}
		time.Sleep(time.Hour) // the lock expires, the scheduled message becomes active
		want.Active, want.Locked, want.Scheduled = 3, 0, 0
		if got := f.q.Counts(); got != want {
			t.Fatalf("after an hour: counts %+v, want %+v", got, want)
		}
		rd := f.receiver(t, &ReceiverOptions{ReceiveMode: azservicebus.ReceiveModeReceiveAndDelete})
		receive(t, rd, 3, time.Second)
		want.Active, want.Size = 0, size("a", "bb")
		if got := f.q.Counts(); got != want {
			t.Fatalf("after receive-and-delete: counts %+v, want %+v", got, want)
		}
	})
}

// Size stays the sum of the stored messages' sizes through random sends, receives,
// settlements, expiries and dead-lettering.
func TestCountsSizeFollowsMessages(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		f := newFixture(t, &EntityOptions{DefaultTTL: 10 * time.Minute, DeadLetterOnExpiration: true, MaxDeliveryCount: 2})
		rd := f.receiver(t, &ReceiverOptions{ReceiveMode: azservicebus.ReceiveModeReceiveAndDelete})
		dl := f.receiver(t, &ReceiverOptions{SubQueue: azservicebus.SubQueueDeadLetter, ReceiveMode: azservicebus.ReceiveModeReceiveAndDelete})
		rng := rand.New(rand.NewPCG(1, 2))
		for i := range 500 {
			switch rng.IntN(6) {
			case 0, 1:
				sendAll(t, f.s, string(make([]byte, rng.IntN(300))))
			case 2:
				ctx, cancel := context.WithTimeout(ctx, time.Millisecond)
				ms, _ := f.r.ReceiveMessages(ctx, 3, nil)
				cancel()
				for _, m := range ms {
					switch rng.IntN(4) {
					case 0:
						_ = f.r.CompleteMessage(ctx, m, nil)
					case 1:
						_ = f.r.AbandonMessage(ctx, m, &azservicebus.AbandonMessageOptions{PropertiesToModify: map[string]any{"k": "v"}})
					case 2:
						_ = f.r.DeadLetterMessage(ctx, m, nil)
					}
				}
			case 3:
				ctx, cancel := context.WithTimeout(ctx, time.Millisecond)
				_, _ = rd.ReceiveMessages(ctx, 2, nil)
				_, _ = dl.ReceiveMessages(ctx, 1, nil)
				cancel()
			case 4:
				time.Sleep(time.Duration(rng.IntN(120)) * time.Second)
			}
			f.q.mu.Lock()
			var want int64
			for _, sq := range []*subqueue{&f.q.main, &f.q.dlq} {
				for _, m := range sq.bySeq {
					want += int64(m.p.size)
				}
			}
			f.q.mu.Unlock()
			if got := f.q.Counts().Size; got != want {
				t.Fatalf("step %d: Size %d, the messages hold %d bytes", i, got, want)
			}
		}
	})
}

// WaitUntil returns as soon as the counts satisfy its condition, whether a client or time
// (a lock, a schedule, a time-to-live) changed them, and takes no real time in a bubble.
func TestWaitUntil(t *testing.T) {
	waitAt := func(t *testing.T, q *Entity, after time.Duration, cond func(Counts) bool) Counts {
		t.Helper()
		start := time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), 24*time.Hour)
		defer cancel()
		c, err := q.WaitUntil(ctx, cond)
		if err != nil {
			t.Fatalf("WaitUntil: %v (counts %+v)", err, c)
		}
		if d := time.Since(start); d != after {
			t.Fatalf("WaitUntil returned after %v, want %v", d, after)
		}
		return c
	}
	active := func(n int) func(Counts) bool { return func(c Counts) bool { return c.Active == n } }
	t.Run("settlement", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			f := newFixture(t, nil)
			sendAll(t, f.s, "a", "b")
			ms := receive(t, f.r, 2, time.Second)
			go func() {
				for _, m := range ms {
					time.Sleep(10 * time.Second)
					_ = f.r.CompleteMessage(context.Background(), m, nil)
				}
			}()
			start := time.Now()
			if err := f.q.WaitDrained(context.Background()); err != nil {
				t.Fatal(err)
			}
			if d := time.Since(start); d != 20*time.Second {
				t.Fatalf("WaitDrained returned after %v, want 20s", d)
			}
		})
	})
	t.Run("lock expiry", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			f := newFixture(t, &EntityOptions{LockDuration: time.Minute})
			sendAll(t, f.s, "a")
			receiveOne(t, f.r)
			waitAt(t, f.q, time.Minute, active(1))
		})
	})
	t.Run("session lock expiry", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			f := newSessionFixture(t, &EntityOptions{LockDuration: time.Minute})
			f.send(t, "s", "a")
			receive(t, f.accept(t, "s").r, 1, time.Second)
			waitAt(t, f.q, time.Minute, active(1))
		})
	})
	t.Run("schedule", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			f := newFixture(t, nil)
			if _, err := f.s.ScheduleMessages(context.Background(), []*azservicebus.Message{msg("a")}, time.Now().Add(30*time.Second), nil); err != nil {
				t.Fatal(err)
			}
			waitAt(t, f.q, 30*time.Second, active(1))
		})
	})
	t.Run("time-to-live", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			f := newFixture(t, &EntityOptions{DefaultTTL: time.Hour, DeadLetterOnExpiration: true})
			sendAll(t, f.s, "a")
			c := waitAt(t, f.q, time.Hour, func(c Counts) bool { return c.DeadLetter == 1 })
			if c.Active != 0 {
				t.Fatalf("counts %+v, want the message in the dead-letter queue only", c)
			}
		})
	})
	t.Run("forwarded", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			ns := NewNamespace(nil)
			dst, _ := ns.NewQueue("dst", nil)
			if _, err := ns.NewQueue("src", &EntityOptions{ForwardTo: "dst"}); err != nil {
				t.Fatal(err)
			}
			s, _ := ns.NewSender("src", nil)
			go func() {
				time.Sleep(time.Second)
				sendAll(t, s, "a")
			}()
			waitAt(t, dst, time.Second, active(1))
		})
	})
	t.Run("context", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			f := newFixture(t, nil)
			sendAll(t, f.s, "a")
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			c, err := f.q.WaitUntil(ctx, active(2))
			if !errors.Is(err, context.DeadlineExceeded) || c.Active != 1 {
				t.Fatalf("WaitUntil = %+v, %v; want the last counts and DeadlineExceeded", c, err)
			}
		})
	})
}
