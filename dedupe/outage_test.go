package dedupe_test

import (
	"context"
	"errors"
	"strconv"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/sbkit/sbkit"
	"github.com/sbkit/sbkit/dedupe"
	"github.com/sbkit/sbkit/receiver"
	"github.com/sbkit/sbkit/sbtest"
)

// errStoreDown is what a store that cannot be reached returns.
var errStoreDown = errors.New("connection refused")

// storeDownFor returns a store whose every Acquire fails with errStoreDown until d has
// passed (forever when d < 0).
func storeDownFor(t *testing.T, d time.Duration) *faultyStore {
	s := newFaulty(t)
	s.set(errStoreDown, nil, nil)
	if d >= 0 {
		time.AfterFunc(d, func() { s.set(nil, nil, nil) })
	}
	return s
}

// sendNumbered sends n messages with MessageIDs m0, m1, ...
func (b *broker) sendNumbered(n int) {
	b.t.Helper()
	ids := make([]string, n)
	for i := range ids {
		ids[i] = "m" + strconv.Itoa(i)
	}
	b.send(ids...)
}

// TestStoreOutageHoldsDelivery, for one delivery: under FailClosed a failing Acquire is
// retried with backoff while the delivery is held, so an outage of a few seconds costs no
// abandon; a longer one ends in an abandon after the documented hold; the handler's
// context ends the hold at once.
func TestStoreOutageHoldsDelivery(t *testing.T) {
	// The default Retry: 7 retries, 500 ms doubling up to 8 s, jitter ±50%.
	const nominalHold = 500*time.Millisecond + time.Second + 2*time.Second + 4*time.Second + 3*8*time.Second
	cases := []struct {
		name       string
		outage     time.Duration // the store fails for this long (forever when < 0)
		cancelAt   time.Duration // the handler's context is cancelled then (0: never)
		wantRuns   int64
		wantStore  bool // the result is a *StoreError
		minElapsed time.Duration
		maxElapsed time.Duration
	}{
		{"8 s outage: held, then processed", 8 * time.Second, 0, 1, false, 8 * time.Second, 8*time.Second + 12*time.Second},
		{"outage longer than the hold: abandoned", -1, 0, 0, true, nominalHold / 2, nominalHold * 3 / 2},
		{"lock lost while held: abandoned at once", -1, 3 * time.Second, 0, false, 3 * time.Second, 3 * time.Second},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := storeDownFor(t, c.outage)
				ctx, cancel := context.WithCancelCause(context.Background())
				defer cancel(nil)
				if c.cancelAt > 0 {
					time.AfterFunc(c.cancelAt, func() { cancel(sbkit.ErrLockLost) })
				}
				f := mustNew(t, s, nil)
				var runs atomic.Int64
				start := time.Now()
				err := wrap(t, f, counting(&runs, nil))(ctx, msg("m"))
				elapsed := time.Since(start)
				var se *dedupe.StoreError
				if runs.Load() != c.wantRuns || errors.As(err, &se) != c.wantStore || (c.wantRuns == 1) != (err == nil) {
					t.Fatalf("result %v, runs %d; want runs %d, store error %v", err, runs.Load(), c.wantRuns, c.wantStore)
				}
				if c.cancelAt > 0 && !errors.Is(err, sbkit.ErrLockLost) {
					t.Fatalf("result %v, want the context's cause", err)
				}
				if elapsed < c.minElapsed || elapsed > c.maxElapsed {
					t.Fatalf("held %v, want between %v and %v", elapsed, c.minElapsed, c.maxElapsed)
				}
				st := f.Stats()
				if st.AcquireRetries == 0 || st.Held != 0 || (st.StoreDownAbandoned == 1) != c.wantStore {
					t.Fatalf("stats %+v", st)
				}
				if c.wantStore && st.StoreErrors != 8 {
					t.Fatalf("%d failed calls, want 8 (the first and 7 retries)", st.StoreErrors)
				}
			})
		})
	}
}

// TestStoreOutageBurnsNoDeliveryCount is TestStoreOutageHoldsDelivery end to end: 20
// messages on a queue with MaxDeliveryCount 3, a worker loop that settles as the
// Filter's result asks, and a store that is down for the first 8 s. Each delivery is
// held until the store answers and is processed once; abandoning them at once would
// send all 20 to the dead-letter queue unprocessed.
func TestStoreOutageBurnsNoDeliveryCount(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newBroker(t, &sbtest.EntityOptions{MaxDeliveryCount: 3})
		b.sendNumbered(20)
		s := storeDownFor(t, 8*time.Second)
		f := mustNew(t, s, &dedupe.Options{Entity: "orders"})
		var runs atomic.Int64
		h := wrap(t, f, counting(&runs, nil))
		r := b.receiver()
		for i := 0; b.queue.Counts().Active > 0; i++ {
			if i == 100 {
				t.Fatal("the queue did not drain in 100 deliveries")
			}
			if d := deliverOne(t, r, h); d.settleErr != nil {
				t.Fatalf("settling %s: %v", d.msg.MessageID, d.settleErr)
			}
		}
		if n := b.queue.Counts().DeadLetter; n != 0 || runs.Load() != 20 {
			t.Fatalf("%d messages dead-lettered, handler ran %d times; want 0 and 20", n, runs.Load())
		}
	})
}

// TestFailOpenDoesNotHold: under FailOpen the handler runs at once, unprotected.
func TestFailOpenDoesNotHold(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := storeDownFor(t, -1)
		f := mustNew(t, s, &dedupe.Options{StoreFailure: dedupe.FailOpen})
		var runs atomic.Int64
		start := time.Now()
		if err := wrap(t, f, counting(&runs, nil))(context.Background(), &azservicebus.ReceivedMessage{MessageID: "m"}); err != nil || runs.Load() != 1 || time.Since(start) != 0 {
			t.Fatalf("result %v, runs %d after %v; want run at once", err, runs.Load(), time.Since(start))
		}
		if st := f.Stats(); st.Unprotected != 1 || st.AcquireRetries != 0 {
			t.Fatalf("stats %+v", st)
		}
	})
}

// TestStoreOutageThroughProcessor is TestStoreOutageBurnsNoDeliveryCount through the
// processor of package receiver: 41 messages, the broker's default MaxDeliveryCount of
// 10, a store that is down for the first 8 s. Each delivery is held until the store
// answers and processed once; abandoning them at once would send all 41 to the
// dead-letter queue unprocessed.
func TestStoreOutageThroughProcessor(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newBroker(t, &sbtest.EntityOptions{MaxDeliveryCount: 10})
		b.sendNumbered(41)
		s := storeDownFor(t, 8*time.Second)
		f := mustNew(t, s, &dedupe.Options{Entity: "orders"})
		var runs atomic.Int64
		p, err := receiver.New(b.receiver(), f.Middleware()(counting(&runs, nil)), &receiver.Options{MaxConcurrency: 8})
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- p.Run(context.Background()) }()
		// Until every message is settled, or the first is dead-lettered.
		if _, err := b.queue.WaitUntil(t.Context(), func(c sbtest.Counts) bool {
			return c.Active+c.Locked == 0 || c.DeadLetter > 0
		}); err != nil {
			t.Fatal(err)
		}
		if err := p.Close(context.Background()); err != nil {
			t.Fatalf("Close = %v", err)
		}
		if err := <-done; err != nil && !errors.Is(err, receiver.ErrClosed) {
			t.Fatalf("Run = %v", err)
		}
		if n := b.queue.Counts().DeadLetter; n != 0 || runs.Load() != 41 {
			t.Fatalf("%d messages dead-lettered, handler ran %d times; want 0 and 41", n, runs.Load())
		}
		if st := f.Stats(); st.StoreDownAbandoned != 0 || st.AcquireRetries == 0 || st.Succeeded != 41 {
			t.Fatalf("dedupe stats %+v", st)
		}
	})
}
