package dedupe_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/sbkit/sbkit/dedupe"
)

// TestLeaseRenewal: a handler that runs 5 minutes under a 1-minute lease keeps its key
// leased while it runs (a duplicate arriving at 3 minutes is not processed) only when
// renewal is on; after it returns, no refresh recreates the lease.
func TestLeaseRenewal(t *testing.T) {
	boom := errors.New("boom")
	cases := []struct {
		name         string
		disable      bool
		result       error
		wantDupRuns  bool // the duplicate at 3 minutes runs the handler
		wantLenAfter int  // entries left long after the first handler returned
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
				h := f.Wrap(func(context.Context, *azservicebus.ReceivedMessage) error {
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
				if got := s.Len(); got != c.wantLenAfter {
					t.Fatalf("store holds %d entries after the handler returned, want %d", got, c.wantLenAfter)
				}
			})
		})
	}
}

// TestLeaseRenewalFailure: a refresh that fails is reported and retried; one that finds
// the lease taken is counted as lost.
func TestLeaseRenewalFailure(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newFaulty(t)
		var renewErrs atomic.Int64
		f := mustNew(t, s, &dedupe.Options{LeaseTTL: time.Minute, Hooks: dedupe.Hooks{
			OnStoreError: func(_ context.Context, err *dedupe.StoreError) {
				if err.Op == dedupe.OpRenew {
					renewErrs.Add(1)
				}
			},
		}})
		h := f.Wrap(func(context.Context, *azservicebus.ReceivedMessage) error {
			s.set(errors.New("store down"), nil, nil)
			time.Sleep(65 * time.Second) // refreshes at 20, 40 and 60 s fail; the lease expires at 60 s
			if _, err := s.MemoryStore.Acquire(context.Background(), ":m", "other", time.Hour); err != nil {
				t.Error(err) // another owner takes the key
			}
			s.set(nil, nil, nil)
			time.Sleep(20 * time.Second) // the refresh at 80 s finds the lease gone
			return nil
		})
		if err := h(context.Background(), msg("m")); err != nil {
			t.Fatal(err)
		}
		st := f.Stats()
		if renewErrs.Load() != 3 || st.LeasesLost != 1 || st.MarkFailures != 1 {
			t.Fatalf("renew errors %d, stats %+v; want 3 renew errors, 1 lease lost, 1 mark failure (not owner)", renewErrs.Load(), st)
		}
	})
}
