package locks_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/sbkit/sbkit"
	"github.com/sbkit/sbkit/locks"
)

// fakeRenewer renews a lock for lockDur from the time of the call, like the broker, after
// an optional delay; errFn decides the error of call n (0-based).
type fakeRenewer struct {
	lockDur time.Duration
	delay   time.Duration
	errFn   func(n int) error

	mu          sync.Mutex
	calls       []time.Time
	inFlight    int
	maxInFlight int
}

func (f *fakeRenewer) RenewMessageLock(ctx context.Context, m *azservicebus.ReceivedMessage, _ *azservicebus.RenewMessageLockOptions) error {
	f.mu.Lock()
	n := len(f.calls)
	f.calls = append(f.calls, time.Now())
	f.inFlight++
	f.maxInFlight = max(f.maxInFlight, f.inFlight)
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		f.inFlight--
		f.mu.Unlock()
	}()
	if f.delay > 0 {
		select {
		case <-time.After(f.delay):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if f.errFn != nil {
		if err := f.errFn(n); err != nil {
			return err
		}
	}
	t := time.Now().Add(f.lockDur)
	m.LockedUntil = &t
	return nil
}

func (f *fakeRenewer) callTimes() []time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]time.Time(nil), f.calls...)
}

func lockedMessage(d time.Duration) *azservicebus.ReceivedMessage {
	t := time.Now().Add(d)
	return &azservicebus.ReceivedMessage{MessageID: "m", LockedUntil: &t}
}

// newEngine starts an engine with a recorder among its hooks.
func newEngine(t *testing.T, r sbkit.LockRenewer, o *locks.Options) (*locks.Engine, *recorder) {
	t.Helper()
	var opts locks.Options
	if o != nil {
		opts = *o
	}
	rec := &recorder{}
	opts.Hooks = append(opts.Hooks, rec)
	e, err := locks.New(r, &opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Close(context.Background()) })
	return e, rec
}

// recorder is a hook that records what an engine reports.
type recorder struct {
	mu       sync.Mutex
	renewals []locks.Renewal
	failures []*locks.RenewError
	lost     []error
	lostAt   []time.Time
}

func (r *recorder) OnRenew(_ context.Context, e locks.Renewal) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.renewals = append(r.renewals, e)
}

func (r *recorder) OnRenewError(_ context.Context, e *locks.RenewError) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.failures = append(r.failures, e)
}

func (r *recorder) OnLockLost(_ context.Context, e locks.LockLoss) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lost = append(r.lost, e.Cause)
	r.lostAt = append(r.lostAt, time.Now())
}

func (r *recorder) snapshot() (renewals []locks.Renewal, failures []*locks.RenewError, lost []error, lostAt []time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.renewals), slices.Clone(r.failures), slices.Clone(r.lost), slices.Clone(r.lostAt)
}

// Renewals are due a margin before LockedUntil: a third of the lock duration, at most
// MaxMargin (10 s by default).
func TestRenewalScheduledFromLockedUntil(t *testing.T) {
	tests := []struct {
		name      string
		lockDur   time.Duration
		maxMargin time.Duration
		want      []time.Duration // call times since Add
	}{
		{"60s lock, 10s margin", time.Minute, 0, []time.Duration{50 * time.Second, 100 * time.Second, 150 * time.Second}},
		{"6s lock, a third", 6 * time.Second, 0, []time.Duration{4 * time.Second, 8 * time.Second, 12 * time.Second}},
		{"5min lock", 5 * time.Minute, 0, []time.Duration{290 * time.Second}},
		{"30s lock, 5s MaxMargin", 30 * time.Second, 5 * time.Second, []time.Duration{25 * time.Second, 50 * time.Second}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				fr := &fakeRenewer{lockDur: tt.lockDur}
				e, rec := newEngine(t, fr, &locks.Options{MaxMargin: tt.maxMargin, MaxAutoLockRenewalDuration: -1})
				start := time.Now()
				l, err := e.Add(context.Background(), lockedMessage(tt.lockDur))
				if err != nil {
					t.Fatal(err)
				}
				time.Sleep(tt.want[len(tt.want)-1] + time.Second)
				got := fr.callTimes()
				if len(got) != len(tt.want) {
					t.Fatalf("got %d renewals, want %d", len(got), len(tt.want))
				}
				for i, at := range got {
					if at.Sub(start) != tt.want[i] {
						t.Errorf("renewal %d at %v, want %v", i, at.Sub(start), tt.want[i])
					}
				}
				if want := got[len(got)-1].Add(tt.lockDur); !l.LockedUntil().Equal(want) {
					t.Errorf("LockedUntil %v, want %v", l.LockedUntil(), want)
				}
				if l.Err() != nil || l.Renewals() != len(tt.want) {
					t.Errorf("Err %v, Renewals %d", l.Err(), l.Renewals())
				}
				renewals, _, _, _ := rec.snapshot()
				if len(renewals) != len(tt.want) || renewals[len(renewals)-1].Renewals != len(tt.want) ||
					!renewals[len(renewals)-1].LockedUntil.Equal(l.LockedUntil()) {
					t.Errorf("RenewHook saw %+v", renewals)
				}
			})
		})
	}
}

// MaxAutoLockRenewalDuration stops renewals; the lock is then reported lost with
// ReasonLimit when it runs out.
func TestRenewalLimit(t *testing.T) {
	tests := []struct {
		name         string
		limit        time.Duration
		wait         time.Duration
		wantRenewals int
		wantLostAt   time.Duration // 0: not lost
	}{
		{"default 5min", 0, time.Hour, 5, 310 * time.Second},
		{"2min", 2 * time.Minute, time.Hour, 2, 160 * time.Second},
		{"negative is unlimited", -time.Second, time.Hour + 10*time.Second, 72, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				fr := &fakeRenewer{lockDur: time.Minute}
				e, rec := newEngine(t, fr, &locks.Options{MaxAutoLockRenewalDuration: tt.limit})
				start := time.Now()
				l, err := e.Add(context.Background(), lockedMessage(time.Minute))
				if err != nil {
					t.Fatal(err)
				}
				time.Sleep(tt.wait)
				synctest.Wait()
				if got := len(fr.callTimes()); got != tt.wantRenewals {
					t.Errorf("renewals %d, want %d", got, tt.wantRenewals)
				}
				if tt.wantLostAt == 0 {
					if l.Err() != nil {
						t.Fatalf("lost: %v", l.Err())
					}
					return
				}
				var le *locks.LostError
				if !errors.As(l.Err(), &le) || le.Reason != locks.ReasonLimit || !sbkit.IsLockLost(l.Err()) {
					t.Fatalf("Err = %v, want ReasonLimit lock lost", l.Err())
				}
				if _, _, lost, lostAt := rec.snapshot(); len(lost) != 1 || lostAt[0].Sub(start) != tt.wantLostAt {
					t.Errorf("lost %d times at %v, want once at %v", len(lost), lostAt, tt.wantLostAt)
				}
			})
		})
	}
}

// Failed renewals are retried with backoff while the lock is valid; what happens when
// they keep failing depends on the error.
func TestRenewalErrors(t *testing.T) {
	timeout := &azservicebus.Error{Code: azservicebus.CodeTimeout}
	connLost := &azservicebus.Error{Code: azservicebus.CodeConnectionLost}
	lockLost := &azservicebus.Error{Code: azservicebus.CodeLockLost}
	unauthorized := &azservicebus.Error{Code: azservicebus.CodeUnauthorizedAccess}
	tests := []struct {
		name        string
		errFn       func(n int) error
		wantReason  locks.Reason // 0: not lost
		wantErrIs   error
		minRetries  int
		wantLostAt  time.Duration
		wantRenewed bool
	}{
		{"transient then ok", func(n int) error {
			if n < 3 {
				return timeout
			}
			return nil
		}, 0, nil, 3, 0, true},
		{"unclassified error retried", func(n int) error {
			if n < 2 {
				return errors.New("boom")
			}
			return nil
		}, 0, nil, 2, 0, true},
		{"timeouts until expiry", func(int) error { return timeout }, locks.ReasonExpired, timeout, 3, time.Minute, false},
		{"connection lost until expiry", func(int) error { return connLost }, locks.ReasonConnectionLost, connLost, 3, time.Minute, false},
		{"broker says lock lost", func(int) error { return lockLost }, locks.ReasonLockLost, lockLost, 0, 50 * time.Second, false},
		{"connection lost then lock lost", func(n int) error {
			if n == 0 {
				return connLost
			}
			return lockLost
		}, locks.ReasonConnectionLost, lockLost, 1, 0, false},
		{"permanent", func(int) error { return unauthorized }, locks.ReasonRenewFailed, unauthorized, 0, 50 * time.Second, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				fr := &fakeRenewer{lockDur: time.Minute, errFn: tt.errFn}
				e, rec := newEngine(t, fr, nil)
				start := time.Now()
				l, err := e.Add(context.Background(), lockedMessage(time.Minute))
				if err != nil {
					t.Fatal(err)
				}
				time.Sleep(2 * time.Minute)
				synctest.Wait()
				_, failures, lost, lostAt := rec.snapshot()
				retried := 0
				for i, f := range failures {
					if f.WillRetry {
						retried++
					}
					if f.Attempt < 1 || (i > 0 && f.Attempt != failures[i-1].Attempt+1 && f.Attempt != 1) || f.Err == nil {
						t.Errorf("failure %d: %+v", i, f)
					}
					if !errors.Is(f, f.Err) || !strings.Contains(f.Error(), fmt.Sprintf("failed (attempt %d): ", f.Attempt)) {
						t.Errorf("failure %d: %q does not name its attempt and wrap %v", i, f.Error(), f.Err)
					}
				}
				if retried < tt.minRetries {
					t.Errorf("%d failed attempts retried, want >= %d", retried, tt.minRetries)
				}
				if tt.wantReason == 0 {
					if l.Err() != nil || len(lost) != 0 {
						t.Fatalf("lost: %v", l.Err())
					}
					if tt.wantRenewed && l.Renewals() == 0 {
						t.Error("never renewed")
					}
					return
				}
				if len(lost) != 1 {
					t.Fatalf("lost reported %d times, want 1", len(lost))
				}
				cause := lost[0]
				var le *locks.LostError
				if !errors.As(cause, &le) || le.Reason != tt.wantReason {
					t.Fatalf("cause %v, want reason %v", cause, tt.wantReason)
				}
				if !errors.Is(cause, sbkit.ErrLockLost) || !errors.Is(cause, tt.wantErrIs) || cause != l.Err() {
					t.Errorf("cause %v does not wrap ErrLockLost and %v, or differs from Err", cause, tt.wantErrIs)
				}
				if tt.wantLostAt != 0 && lostAt[0].Sub(start) != tt.wantLostAt {
					t.Errorf("lost at %v, want %v", lostAt[0].Sub(start), tt.wantLostAt)
				}
				select {
				case <-l.Done():
				default:
					t.Error("Done not closed")
				}
				if err := l.Release(); err != cause {
					t.Errorf("Release = %v, want the cause", err)
				}
			})
		})
	}
}

// Release stops renewals, never reports a loss afterwards, and waits for (and cancels) an
// in-flight renewal so that the caller may settle the message without a race.
func TestRelease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fr := &fakeRenewer{lockDur: time.Minute, delay: time.Hour}
		e, rec := newEngine(t, fr, nil)
		m := lockedMessage(time.Minute)
		l, err := e.Add(context.Background(), m)
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(55 * time.Second) // the renewal started at 50s and hangs
		synctest.Wait()
		if len(fr.callTimes()) != 1 {
			t.Fatalf("renewal not in flight")
		}
		if err := l.Release(); err != nil {
			t.Fatal(err)
		}
		_ = m.LockedUntil // no race: the renewal returned
		fr.mu.Lock()
		inFlight := fr.inFlight
		fr.mu.Unlock()
		if inFlight != 0 {
			t.Error("Release returned before the renewal call")
		}
		if err := l.Release(); err != nil {
			t.Errorf("second Release = %v", err)
		}
		time.Sleep(time.Hour)
		if e.Stats().Tracked != 0 || len(fr.callTimes()) != 1 {
			t.Errorf("stats %+v, calls %d", e.Stats(), len(fr.callTimes()))
		}
		if _, _, lost, _ := rec.snapshot(); len(lost) != 0 {
			t.Errorf("lost after Release: %v", lost)
		}
	})
}

// Thousands of locks are renewed by a bounded number of goroutines and concurrent calls.
func TestManyLocksBoundedGoroutines(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const n = 5000
		const workers = 4
		fr := &fakeRenewer{lockDur: 30 * time.Second, delay: 10 * time.Millisecond}
		before := runtime.NumGoroutine()
		e, rec := newEngine(t, fr, &locks.Options{Workers: workers})
		ls := make([]*locks.Lock, n)
		for i := range ls {
			var err error
			ls[i], err = e.Add(context.Background(), lockedMessage(30*time.Second+time.Duration(i)*time.Millisecond))
			if err != nil {
				t.Fatal(err)
			}
		}
		for range 10 {
			time.Sleep(10 * time.Second)
			if g := runtime.NumGoroutine() - before; g > 1+workers {
				t.Fatalf("%d goroutines for %d locks", g, n)
			}
		}
		for _, l := range ls {
			if l.Renewals() < 4 {
				t.Fatalf("lock renewed %d times in 100s", l.Renewals())
			}
		}
		if fr.maxInFlight > workers {
			t.Errorf("%d renewals at once, want <= %d", fr.maxInFlight, workers)
		}
		if s := e.Stats(); s.Tracked != n || s.LocksLost != 0 || s.Renewed < 4*n {
			t.Errorf("stats %+v", s)
		}
		if _, _, lost, _ := rec.snapshot(); len(lost) != 0 {
			t.Errorf("lost: %v", lost)
		}
		for _, l := range ls {
			if err := l.Release(); err != nil {
				t.Fatal(err)
			}
		}
		if s := e.Stats(); s.Tracked != 0 {
			t.Errorf("tracked %d after Release", s.Tracked)
		}
	})
}

// Locks received together come due together: 1,000 five-second locks (the shortest the
// service allows, renewed 1.7 s before they expire) whose renewal calls take a 100 ms
// round trip are all renewed in time by an engine with the default Workers, each within
// a few round trips of coming due, and none is lost. Renewals do not queue behind a pool
// sized for short round trips (8 calls at once would take 12.5 s to renew them all).
func TestRenewalBurstAtLongRoundTrip(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const n = 1000
		fr := &fakeRenewer{lockDur: 5 * time.Second, delay: 100 * time.Millisecond}
		e, rec := newEngine(t, fr, nil)
		begin := time.Now()
		ls := make([]*locks.Lock, n)
		for i := range ls {
			var err error
			if ls[i], err = e.Add(context.Background(), lockedMessage(5*time.Second)); err != nil {
				t.Fatal(err)
			}
		}
		time.Sleep(20 * time.Second)
		if _, _, lost, _ := rec.snapshot(); len(lost) != 0 {
			t.Fatalf("%d of %d locks lost, first: %v", len(lost), n, lost[0])
		}
		renewals, _, _, _ := rec.snapshot()
		due := begin.Add(5*time.Second - 5*time.Second/3)
		for _, r := range renewals[:n] { // the first renewal of each lock
			if late := r.LockedUntil.Add(-5 * time.Second).Sub(due); late > 500*time.Millisecond {
				t.Fatalf("a first renewal returned %v after the locks came due", late)
			}
		}
		if fr.maxInFlight != locks.DefaultWorkers {
			t.Errorf("%d renewals at once, want DefaultWorkers (%d)", fr.maxInFlight, locks.DefaultWorkers)
		}
		for _, l := range ls {
			if err := l.Release(); err != nil {
				t.Fatal(err)
			}
		}
		time.Sleep(2 * time.Second) // idle renewal goroutines end
		synctest.Wait()
		buf := make([]byte, 1<<20)
		if n := strings.Count(string(buf[:runtime.Stack(buf, true)]), "internal/workpool."); n != 0 {
			t.Errorf("%d renewal goroutines with no renewal due, want none", n)
		}
	})
}

func TestCloseAndBadInput(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fr := &fakeRenewer{lockDur: time.Minute}
		// Without a LockRenewer only session locks can be added.
		sessionsOnly, err := locks.New(nil, nil)
		if err != nil {
			t.Fatalf("New without a renewer: %v", err)
		}
		if _, err := sessionsOnly.Add(context.Background(), &azservicebus.ReceivedMessage{LockedUntil: new(time.Time)}); !errors.Is(err, locks.ErrNilRenewer) {
			t.Errorf("Add to a session-only engine: %v", err)
		}
		_ = sessionsOnly.Close(context.Background())
		for _, o := range []*locks.Options{{MaxMargin: -1}, {Workers: -1}, {Hooks: []locks.Hook{struct{}{}}}, {Hooks: []locks.Hook{nil}}} {
			if _, err := locks.New(fr, o); !errors.Is(err, locks.ErrInvalidOptions) {
				t.Errorf("%+v: %v", o, err)
			}
		}
		e, rec := newEngine(t, fr, nil)
		if _, err := e.Add(context.Background(), nil); !errors.Is(err, sbkit.ErrNilMessage) {
			t.Errorf("nil message: %v", err)
		}
		if _, err := e.Add(context.Background(), &azservicebus.ReceivedMessage{}); !errors.Is(err, locks.ErrNoLock) {
			t.Errorf("no lock: %v", err)
		}
		l, err := e.Add(context.Background(), lockedMessage(time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		if err := e.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		if err := e.Close(context.Background()); err != nil {
			t.Fatalf("second Close: %v", err)
		}
		select {
		case <-l.Done():
		default:
			t.Error("Done open after Close")
		}
		if _, _, lost, _ := rec.snapshot(); l.Err() != nil || l.Release() != nil || len(lost) != 0 {
			t.Error("a lock dropped by Close is not lost")
		}
		if _, err := e.Add(context.Background(), lockedMessage(time.Minute)); !errors.Is(err, locks.ErrClosed) {
			t.Errorf("Add after Close: %v", err)
		}
		time.Sleep(time.Hour)
		if len(fr.callTimes()) != 0 {
			t.Error("renewed after Close")
		}
		// The bubble fails if any goroutine of the engine is still running.
	})
}

// A lock added with little time left is renewed at once, and one already expired is lost.
func TestShortAndExpiredLocks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fr := &fakeRenewer{lockDur: time.Minute}
		e, rec := newEngine(t, fr, nil)
		expired := lockedMessage(-time.Second)
		if _, err := e.Add(context.Background(), expired); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		var le *locks.LostError
		_, _, lost, _ := rec.snapshot()
		if len(lost) != 1 || !errors.As(lost[0], &le) || le.Reason != locks.ReasonExpired {
			t.Fatalf("lost %v, want one ReasonExpired", lost)
		}
		if len(fr.callTimes()) != 0 {
			t.Error("expired lock renewed")
		}
	})
}

type panicHook struct{}

func (panicHook) OnRenew(context.Context, locks.Renewal) { panic("hook bug") }

// A panicking hook is recovered: the engine keeps renewing and the other hooks still run,
// with the context given to Add.
func TestHookPanicRecovered(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fr := &fakeRenewer{lockDur: time.Minute}
		e, rec := newEngine(t, fr, &locks.Options{Hooks: []locks.Hook{panicHook{}}})
		l, err := e.Add(context.Background(), lockedMessage(time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(160 * time.Second)
		if renewals, _, _, _ := rec.snapshot(); l.Renewals() != 3 || len(renewals) != 3 {
			t.Errorf("renewals %d, recorded %d; want 3", l.Renewals(), len(renewals))
		}
	})
}
