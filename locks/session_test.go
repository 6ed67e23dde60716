package locks_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/sbkit/sbkit"
	"github.com/sbkit/sbkit/locks"
)

// fakeSession is a session lock of lockDur that renews until failAfter renewals, then
// fails with err.
type fakeSession struct {
	mu        sync.Mutex
	until     time.Time
	lockDur   time.Duration
	renewals  int
	failAfter int
	err       error
}

func (s *fakeSession) SessionID() string { return "s1" }

func (s *fakeSession) LockedUntil() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.until
}

func (s *fakeSession) RenewSessionLock(ctx context.Context, _ *azservicebus.RenewSessionLockOptions) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.failAfter > 0 && s.renewals >= s.failAfter {
		return s.err
	}
	s.renewals++
	s.until = time.Now().Add(s.lockDur)
	return nil
}

type lossRecorder struct {
	mu     sync.Mutex
	losses []locks.LockLoss
}

func (r *lossRecorder) OnLockLost(_ context.Context, e locks.LockLoss) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.losses = append(r.losses, e)
}

// TestSessionLocks: a session lock is renewed from its LockedUntil like a message lock,
// and its loss is reported once with the session's id and a lock-lost cause.
func TestSessionLocks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := &lossRecorder{}
		e, err := locks.New(nil, &locks.Options{Hooks: []locks.Hook{rec}, MaxAutoLockRenewalDuration: -1})
		if err != nil {
			t.Fatal(err)
		}
		defer e.Close(context.Background())
		s := &fakeSession{until: time.Now().Add(30 * time.Second), lockDur: 30 * time.Second, failAfter: 4,
			err: &azservicebus.Error{Code: azservicebus.CodeLockLost}}
		l, err := e.AddSession(context.Background(), s)
		if err != nil {
			t.Fatal(err)
		}
		if l.SessionID() != "s1" || l.Message() != nil {
			t.Fatalf("lock of %q, message %v", l.SessionID(), l.Message())
		}
		start := time.Now()
		<-l.Done()
		synctest.Wait() // the loss is reported after Done closes, on the renewal's goroutine
		// Renewed 10 s before each expiry (a third of 30 s): at 20, 40, 60, 80 s; the fifth
		// attempt, at 100 s, is refused.
		if took := time.Since(start); took != 100*time.Second || l.Renewals() != 4 {
			t.Fatalf("lost after %v and %d renewals", took, l.Renewals())
		}
		var lost *locks.LostError
		if !errors.As(l.Err(), &lost) || lost.SessionID != "s1" || lost.Reason != locks.ReasonLockLost || !sbkit.IsLockLost(l.Err()) {
			t.Fatalf("lost with %v", l.Err())
		}
		rec.mu.Lock()
		defer rec.mu.Unlock()
		if len(rec.losses) != 1 || rec.losses[0].SessionID != "s1" || rec.losses[0].Message != nil {
			t.Fatalf("losses %+v", rec.losses)
		}
		if _, err := e.AddSession(context.Background(), &fakeSession{}); !errors.Is(err, locks.ErrNoLock) {
			t.Fatalf("session without a lock: %v", err)
		}
	})
}
