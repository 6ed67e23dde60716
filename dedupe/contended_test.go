package dedupe_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/sbkit/sbkit"
	"github.com/sbkit/sbkit/dedupe"
)

// TestConcurrentDuplicate: two deliveries of one MessageId at once; the first holds the
// lease for 10 s and ends with firstResult; the second must never be completed
// unprocessed.
func TestConcurrentDuplicate(t *testing.T) {
	boom := errors.New("boom")
	cases := []struct {
		name        string
		opts        dedupe.Options
		firstResult error
		want        sbkit.Action // the second delivery's settlement
		wantLeaseHe bool         // the second's result wraps ErrLeaseHeld
		wantRuns    int64
		wantElapsed time.Duration // how long the second delivery took
	}{
		{"abandon at once", dedupe.Options{Contended: dedupe.ContendedAbandon}, nil, sbkit.ActionAbandon, true, 1, 0},
		{"wait, first succeeds: skipped", dedupe.Options{LeasePoll: 3 * time.Second}, nil, sbkit.ActionComplete, false, 1, 12 * time.Second},
		{"wait, first fails: processed", dedupe.Options{LeasePoll: 3 * time.Second}, boom, sbkit.ActionComplete, false, 2, 12 * time.Second},
		{"wait too short: abandoned", dedupe.Options{LeaseWait: 3 * time.Second, LeasePoll: time.Second}, nil, sbkit.ActionAbandon, true, 1, 3 * time.Second},
		{"no limit: waits past LeaseTTL", dedupe.Options{LeaseTTL: 6 * time.Second, LeaseWait: -1, LeasePoll: 3 * time.Second}, nil, sbkit.ActionComplete, false, 1, 12 * time.Second},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var contended atomic.Int64
				c.opts.Hooks = []dedupe.Hook{contendedCounter{&contended}}
				f := mustNew(t, nil, &c.opts)
				var runs atomic.Int64
				h := wrap(t, f, func(context.Context, *azservicebus.ReceivedMessage) error {
					if runs.Add(1) == 1 {
						time.Sleep(10 * time.Second)
						return c.firstResult
					}
					return nil
				})
				first := make(chan error, 1)
				go func() { first <- h(context.Background(), msg("m")) }()
				synctest.Wait() // the first delivery holds the lease and sleeps
				start := time.Now()
				second := h(context.Background(), msg("m"))
				elapsed := time.Since(start)
				if err := <-first; err != c.firstResult {
					t.Fatalf("first = %v, want %v", err, c.firstResult)
				}
				if a, _ := sbkit.SettlementOf(second); a != c.want || errors.Is(second, dedupe.ErrLeaseHeld) != c.wantLeaseHe {
					t.Fatalf("second = %v (%v), want %v, ErrLeaseHeld=%v", second, a, c.want, c.wantLeaseHe)
				}
				if runs.Load() != c.wantRuns || elapsed != c.wantElapsed || contended.Load() != 1 {
					t.Fatalf("runs %d, elapsed %v, contended hooks %d; want %d, %v, 1", runs.Load(), elapsed, contended.Load(), c.wantRuns, c.wantElapsed)
				}
				if st := f.Stats(); st.Contended != 1 || st.Checked != 2 {
					t.Fatalf("stats %+v", st)
				}
			})
		})
	}
}

// TestCrashedWorkerLeaseExpires: a worker took the lease and died; with the default
// policy the redelivery waits for the lease to expire, then processes the message.
func TestCrashedWorkerLeaseExpires(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, _ := dedupe.NewMemoryStore(nil)
		if _, err := s.Acquire(context.Background(), ":m", "crashed-worker", time.Minute); err != nil {
			t.Fatal(err)
		}
		f := mustNew(t, s, &dedupe.Options{LeaseTTL: time.Minute})
		var runs atomic.Int64
		start := time.Now()
		if err := wrap(t, f, counting(&runs, nil))(context.Background(), msg("m")); err != nil || runs.Load() != 1 {
			t.Fatalf("result %v, runs %d; want processed", err, runs.Load())
		}
		if waited := time.Since(start); waited < time.Minute || waited > time.Minute+dedupe.DefaultLeasePoll {
			t.Fatalf("waited %v, want about the lease's remaining minute", waited)
		}
	})
}

func TestContextEndsWhileWaiting(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, _ := dedupe.NewMemoryStore(nil)
		if _, err := s.Acquire(context.Background(), ":m", "other", time.Hour); err != nil {
			t.Fatal(err)
		}
		f := mustNew(t, s, nil)
		ctx, cancel := context.WithCancelCause(context.Background())
		time.AfterFunc(2*time.Second, func() { cancel(sbkit.ErrLockLost) })
		var runs atomic.Int64
		err := wrap(t, f, counting(&runs, nil))(ctx, msg("m"))
		if !errors.Is(err, sbkit.ErrLockLost) || runs.Load() != 0 {
			t.Fatalf("result %v, runs %d; want the context's cause, not run", err, runs.Load())
		}
		if a, _ := sbkit.SettlementOf(err); a != sbkit.ActionAbandon {
			t.Fatalf("asks for %v, want abandon", a)
		}
		if st := f.Stats(); st.StoreErrors != 0 || st.Contended != 1 {
			t.Fatalf("stats %+v", st)
		}
	})
}

type contendedCounter struct{ n *atomic.Int64 }

func (c contendedCounter) OnContended(context.Context, dedupe.Contended) { c.n.Add(1) }
