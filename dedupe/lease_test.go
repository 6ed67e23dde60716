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
	"github.com/sbkit/sbkit/receiver"
	"github.com/sbkit/sbkit/sbtest"
)

// TestLeaseRenewal: a handler that runs 5 minutes under a 1-minute lease keeps its key
// leased while it runs (a duplicate arriving at 3 minutes is not processed) only when
// renewal is on; after it returns, no refresh recreates the lease.
func TestLeaseRenewal(t *testing.T) {
	boom := errors.New("boom")
	cases := []struct {
		name          string
		disable       bool
		result        error
		wantDupRuns   bool  // the duplicate at 3 minutes runs the handler
		wantDoneAfter int64 // done marks left long after the first handler returned
	}{
		{"renewed, success", false, nil, false, 1},
		{"renewed, failure", false, boom, false, 0},
		{"not renewed", true, nil, true, 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s, _ := dedupe.NewMemoryStore(nil)
				f := mustNew(t, s, &dedupe.Options{LeaseTTL: time.Minute, DisableLeaseRenewal: c.disable, Contended: dedupe.ContendedAbandon})
				var runs atomic.Int64
				h := wrap(t, f, func(context.Context, *azservicebus.ReceivedMessage) error {
					if runs.Add(1) == 1 {
						time.Sleep(5 * time.Minute)
						return c.result
					}
					return nil
				})
				first := make(chan error, 1)
				go func() { first <- h(context.Background(), msg("m")) }()
				time.Sleep(3 * time.Minute)
				dup := h(context.Background(), msg("m"))
				if ran := runs.Load() == 2; ran != c.wantDupRuns {
					t.Fatalf("duplicate at 3 min: %v, ran=%v; want ran=%v", dup, ran, c.wantDupRuns)
				}
				if !c.wantDupRuns && !errors.Is(dup, dedupe.ErrLeaseHeld) {
					t.Fatalf("duplicate at 3 min: %v, want ErrLeaseHeld", dup)
				}
				if err := <-first; err != c.result {
					t.Fatalf("first: %v", err)
				}
				time.Sleep(10 * time.Minute) // many renewal intervals
				if st := s.Stats(); st.Leases != 0 || st.DoneMarks != c.wantDoneAfter {
					t.Fatalf("store holds %+v after the handler returned, want no lease and %d done marks", st, c.wantDoneAfter)
				}
			})
		})
	}
}

// TestLeaseLostCancelsHandler: two workers share a store; worker A's lease is lost while
// its handler runs (its store stops answering for 45 s, or a refresh finds another owner
// holding the key). A's handler context must be cancelled with a cause wrapping
// ErrLeaseLost no later than the lease's end, so that worker B, which processes the
// redelivered duplicate, is the only one to finish the work.
func TestLeaseLostCancelsHandler(t *testing.T) {
	cases := []struct {
		name     string
		fault    func(a *faultyStore) // applied 5 s into A's handler, undone at 50 s
		wantLost time.Duration        // when A's context must have been cancelled, at the latest
	}{
		{"store hangs", func(a *faultyStore) { a.setHang(true) }, 30 * time.Second},
		{"store fails", func(a *faultyStore) { a.set(errors.New("i/o timeout"), nil, nil) }, 30 * time.Second},
		// The store lost the lease unseen (a failover) and a refresh finds another owner.
		{"refresh finds the key taken", func(a *faultyStore) { a.setStolen(true) }, 10 * time.Second},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				shared, _ := dedupe.NewMemoryStore(nil)
				a := &faultyStore{MemoryStore: shared}
				opts := &dedupe.Options{LeaseTTL: 30 * time.Second, Contended: dedupe.ContendedAbandon}
				fa, fb := mustNew(t, a, opts), mustNew(t, shared, opts)
				var finished atomic.Int64 // handlers that ran their 60 s of work to the end
				start := time.Now()
				var lostAt time.Duration
				var cause error
				work := func(ctx context.Context, _ *azservicebus.ReceivedMessage) error {
					for range 60 { // 60 s of work, checking the context every second
						select {
						case <-ctx.Done():
							lostAt, cause = time.Since(start), context.Cause(ctx)
							return ctx.Err()
						case <-time.After(time.Second):
						}
					}
					finished.Add(1)
					return nil
				}
				ha, hb := wrap(t, fa, work), wrap(t, fb, work)
				resultA := make(chan error, 1)
				go func() { resultA <- ha(context.Background(), msg("m")) }()
				time.Sleep(5 * time.Second)
				c.fault(a)
				time.AfterFunc(45*time.Second, func() { a.set(nil, nil, nil); a.setHang(false); a.setStolen(false) })
				time.Sleep(30 * time.Second)                  // A's lease has run out in the store
				resultB := hb(context.Background(), msg("m")) // the redelivered copy, on worker B
				errA := <-resultA
				if !errors.Is(cause, dedupe.ErrLeaseLost) || lostAt > c.wantLost || lostAt < c.wantLost-time.Second {
					t.Fatalf("A's context: cause %v at %v; want ErrLeaseLost by %v", cause, lostAt, c.wantLost)
				}
				if !errors.Is(errA, dedupe.ErrLeaseLost) || !errors.Is(errA, context.Canceled) {
					t.Fatalf("A's result %v, want the handler's error wrapped with ErrLeaseLost", errA)
				}
				if act, _ := sbkit.SettlementOf(errA); act != sbkit.ActionAbandon {
					t.Fatalf("A's result asks for %v, want abandon", act)
				}
				if resultB != nil || finished.Load() != 1 {
					t.Fatalf("B's result %v, handlers that finished the work %d; want nil, exactly 1", resultB, finished.Load())
				}
				if st := fa.Stats(); st.LeasesLost != 1 || st.Succeeded != 0 {
					t.Fatalf("A's stats %+v", st)
				}
			})
		})
	}
}

// TestRefreshRetriedWithinLease: after a failed refresh the next attempt comes after a
// backoff inside the lease's remaining time, not a whole LeaseRenewal later, so that a
// store blip of 28 s (refreshes every 25 s, two of which fail or hang until StoreTimeout)
// does not let a 60 s lease lapse while its handler runs.
func TestRefreshRetriedWithinLease(t *testing.T) {
	cases := []struct {
		name  string
		retry sbkit.RetryOptions
		fault func(a *faultyStore)
		// the longest gap between the first failed refresh's start and the next attempt
		maxGap time.Duration
	}{
		{"refreshes hang", sbkit.RetryOptions{RetryDelay: time.Second, MaxRetryDelay: time.Second},
			func(a *faultyStore) { a.setHang(true) }, dedupe.DefaultStoreTimeout + 1500*time.Millisecond},
		{"long delays are capped by half the lease left", sbkit.RetryOptions{RetryDelay: 30 * time.Second, MaxRetryDelay: 30 * time.Second},
			func(a *faultyStore) { a.set(errors.New("i/o timeout"), nil, nil) }, 35 * time.Second / 2},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				shared, _ := dedupe.NewMemoryStore(nil)
				a := &faultyStore{MemoryStore: shared}
				opts := dedupe.Options{LeaseTTL: time.Minute, LeaseRenewal: 25 * time.Second, Contended: dedupe.ContendedAbandon, Retry: c.retry}
				fa, fb := mustNew(t, a, &opts), mustNew(t, shared, &opts)
				start := time.Now()
				var cancelled atomic.Bool
				ha := wrap(t, fa, func(ctx context.Context, _ *azservicebus.ReceivedMessage) error {
					select {
					case <-ctx.Done():
						cancelled.Store(true)
						return context.Cause(ctx)
					case <-time.After(90 * time.Second):
						return nil
					}
				})
				resultA := make(chan error, 1)
				go func() { resultA <- ha(context.Background(), msg("m")) }()
				time.AfterFunc(24*time.Second, func() { c.fault(a) })
				time.AfterFunc(52*time.Second, func() { a.set(nil, nil, nil); a.setHang(false) })
				time.Sleep(65 * time.Second) // past the end of the lease taken at 0 s
				var ran atomic.Bool
				dup := wrap(t, fb, func(context.Context, *azservicebus.ReceivedMessage) error { ran.Store(true); return nil })(context.Background(), msg("m"))
				if !errors.Is(dup, dedupe.ErrLeaseHeld) || ran.Load() {
					t.Fatalf("duplicate on worker B at 65 s: %v (ran %v); want ErrLeaseHeld: A's lease must have been refreshed", dup, ran.Load())
				}
				if err := <-resultA; err != nil || cancelled.Load() {
					t.Fatalf("A: %v (cancelled %v), want nil", err, cancelled.Load())
				}
				var refreshes []time.Duration // A's refresh calls, after its Acquire
				for _, at := range a.acquireTimes()[1:] {
					refreshes = append(refreshes, at.Sub(start))
				}
				if len(refreshes) < 2 || refreshes[0] != 25*time.Second || refreshes[1]-refreshes[0] > c.maxGap {
					t.Fatalf("refreshes at %v; want the first at 25 s and a retry within %v", refreshes, c.maxGap)
				}
				if st := fa.Stats(); st.LeasesLost != 0 || st.Succeeded != 1 || st.LeasesRenewed == 0 {
					t.Fatalf("A's stats %+v", st)
				}
			})
		})
	}
}

// TestLeaseLostThroughProcessors is TestLeaseLostCancelsHandler through two processors of
// package receiver sharing one store: a MessageId sent twice; worker A takes the first
// copy, then its store stops answering for 45 s; worker B receives the second copy, waits
// for the lease, and takes the key when A's lease has run out. A's handler must be
// cancelled by then, so the work is finished exactly once, and both copies end settled:
// nothing dead-lettered, nothing left in the queue.
func TestLeaseLostThroughProcessors(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newBroker(t, &sbtest.EntityOptions{LockDuration: time.Minute})
		b.send("pay-1", "pay-1")
		shared := memStore()
		a := &faultyStore{MemoryStore: shared}
		opts := &dedupe.Options{Entity: "orders", LeaseTTL: 30 * time.Second}
		var finished, cancelled atomic.Int64
		work := func(ctx context.Context, _ *azservicebus.ReceivedMessage) error {
			select {
			case <-ctx.Done():
				cancelled.Add(1)
				return context.Cause(ctx)
			case <-time.After(40 * time.Second): // the payment takes 40 s
				finished.Add(1)
				return nil
			}
		}
		run := func(s dedupe.Store) (*receiver.Processor, chan error) {
			p, err := receiver.New(b.receiver(), mustNew(t, s, opts).Middleware()(work), &receiver.Options{DisablePrefetch: true})
			if err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() { done <- p.Run(context.Background()) }()
			return p, done
		}
		pa, doneA := run(a)
		synctest.Wait() // A holds the first copy and runs its handler
		a.setHang(true)
		time.AfterFunc(45*time.Second, func() { a.setHang(false) })
		pb, doneB := run(shared)
		if err := b.queue.WaitDrained(context.Background()); err != nil {
			t.Fatal(err)
		}
		for _, p := range []*receiver.Processor{pa, pb} {
			if err := p.Close(context.Background()); err != nil {
				t.Fatalf("Close = %v", err)
			}
		}
		<-doneA
		<-doneB
		if finished.Load() != 1 || cancelled.Load() != 1 || b.queue.Counts().DeadLetter != 0 {
			t.Fatalf("work finished %d times, cancelled %d times, %d dead-lettered; want 1, 1, 0",
				finished.Load(), cancelled.Load(), b.queue.Counts().DeadLetter)
		}
	})
}
