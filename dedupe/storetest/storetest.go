// Package storetest is a conformance suite for implementations of [dedupe.Store]. Run it
// from a test of the implementation:
//
//	func TestConformance(t *testing.T) {
//		storetest.Run(t, func(t *testing.T) dedupe.Store { return clientFor(t) }, nil)
//	}
package storetest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sbkit/sbkit/dedupe"
)

// Options configures Run. nil options mean defaults.
type Options struct {
	// Synctest runs the tests that wait for expiry inside a testing/synctest bubble, so
	// they take no real time. Only for stores whose clock is this process's [time.Now]
	// and that do no network I/O (MemoryStore). Default: false (real sleeps).
	Synctest bool
	// TTL is the lease and window used by the expiry tests; they sleep up to twice as
	// long. Default: 1 minute with Synctest, 200 ms otherwise.
	TTL time.Duration
	// Clients is how many clients race for one key. Default: 8.
	Clients int
}

// Run runs the conformance suite as subtests of t.
//
// newStore(t) must return a client of an empty store private to the test t (for a
// shared store: a unique key prefix per test); called again with the same t it must
// return another client of the same store, as a second worker would have, so that
// clients can race. It may call t.Skip or t.Fatal.
func Run(t *testing.T, newStore func(t *testing.T) dedupe.Store, opts *Options) {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.TTL <= 0 {
		o.TTL = 200 * time.Millisecond
		if o.Synctest {
			o.TTL = time.Minute
		}
	}
	if o.Clients <= 0 {
		o.Clients = 8
	}
	s := &suite{newStore: newStore, o: o}
	t.Run("InvalidArguments", s.invalidArguments)
	t.Run("CancelledContext", s.cancelledContext)
	t.Run("Lifecycle", s.lifecycle)
	s.timed(t, "LeaseExpires", s.leaseExpires)
	s.timed(t, "ReacquireExtendsLease", s.reacquireExtends)
	s.timed(t, "DoneMarkExpires", s.doneExpires)
	s.timed(t, "StaleOwner", s.staleOwner)
	t.Run("ClientsRace", s.clientsRace)
}

type suite struct {
	newStore func(t *testing.T) dedupe.Store
	o        Options
}

func (s *suite) timed(t *testing.T, name string, f func(t *testing.T)) {
	if s.o.Synctest {
		t.Run(name, func(t *testing.T) { synctest.Test(t, f) })
		return
	}
	t.Run(name, f)
}

// step is one store call and its expected outcome.
type step struct {
	op    dedupe.Op
	key   string
	owner string
	want  dedupe.State // for OpAcquire
	err   error        // expected error (errors.Is), nil for none
}

func acq(key, owner string, want dedupe.State) step {
	return step{op: dedupe.OpAcquire, key: key, owner: owner, want: want}
}
func mark(key, owner string, err error) step {
	return step{op: dedupe.OpMarkDone, key: key, owner: owner, err: err}
}
func rel(key, owner string) step { return step{op: dedupe.OpRelease, key: key, owner: owner} }

func (s *suite) do(t *testing.T, st dedupe.Store, i int, p step, lease time.Duration) {
	t.Helper()
	ctx := context.Background()
	var (
		got dedupe.State
		err error
	)
	switch p.op {
	case dedupe.OpAcquire:
		got, err = st.Acquire(ctx, p.key, p.owner, lease)
	case dedupe.OpMarkDone:
		err = st.MarkDone(ctx, p.key, p.owner, lease)
	case dedupe.OpRelease:
		err = st.Release(ctx, p.key, p.owner)
	}
	if p.err != nil {
		if !errors.Is(err, p.err) {
			t.Fatalf("step %d: %s(%q, %q) error = %v, want %v", i, p.op, p.key, p.owner, err, p.err)
		}
		return
	}
	if err != nil {
		t.Fatalf("step %d: %s(%q, %q) error = %v", i, p.op, p.key, p.owner, err)
	}
	if p.op == dedupe.OpAcquire && got != p.want {
		t.Fatalf("step %d: Acquire(%q, %q) = %v, want %v", i, p.key, p.owner, got, p.want)
	}
}

func (s *suite) invalidArguments(t *testing.T) {
	st := s.newStore(t)
	ctx := context.Background()
	calls := []struct {
		name string
		call func() error
	}{
		{"Acquire empty key", func() error { _, err := st.Acquire(ctx, "", "o", time.Second); return err }},
		{"Acquire empty owner", func() error { _, err := st.Acquire(ctx, "k", "", time.Second); return err }},
		{"Acquire zero lease", func() error { _, err := st.Acquire(ctx, "k", "o", 0); return err }},
		{"Acquire negative lease", func() error { _, err := st.Acquire(ctx, "k", "o", -time.Second); return err }},
		{"MarkDone empty key", func() error { return st.MarkDone(ctx, "", "o", time.Second) }},
		{"MarkDone empty owner", func() error { return st.MarkDone(ctx, "k", "", time.Second) }},
		{"MarkDone zero window", func() error { return st.MarkDone(ctx, "k", "o", 0) }},
		{"MarkDone negative window", func() error { return st.MarkDone(ctx, "k", "o", -1) }},
		{"Release empty key", func() error { return st.Release(ctx, "", "o") }},
		{"Release empty owner", func() error { return st.Release(ctx, "k", "") }},
	}
	for _, c := range calls {
		if err := c.call(); !errors.Is(err, dedupe.ErrInvalidArgument) {
			t.Errorf("%s: error = %v, want ErrInvalidArgument", c.name, err)
		}
	}
	// Nothing was stored by the rejected calls.
	if got, err := st.Acquire(ctx, "k", "o2", time.Minute); err != nil || got != dedupe.Acquired {
		t.Errorf("Acquire after invalid calls = %v, %v; want acquired", got, err)
	}
}

func (s *suite) cancelledContext(t *testing.T) {
	st := s.newStore(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := st.Acquire(ctx, "k", "a", time.Minute); !errors.Is(err, context.Canceled) {
		t.Errorf("Acquire with cancelled ctx: error = %v, want context.Canceled", err)
	}
	if err := st.MarkDone(ctx, "k", "a", time.Minute); !errors.Is(err, context.Canceled) {
		t.Errorf("MarkDone with cancelled ctx: error = %v, want context.Canceled", err)
	}
	if err := st.Release(ctx, "k", "a"); !errors.Is(err, context.Canceled) {
		t.Errorf("Release with cancelled ctx: error = %v, want context.Canceled", err)
	}
	if got, err := st.Acquire(context.Background(), "k", "b", time.Minute); err != nil || got != dedupe.Acquired {
		t.Errorf("Acquire after cancelled calls = %v, %v; want acquired (nothing stored)", got, err)
	}
}

func (s *suite) lifecycle(t *testing.T) {
	A, I, D := dedupe.Acquired, dedupe.InProgress, dedupe.Done
	cases := []struct {
		name  string
		steps []step
	}{
		{"acquire then contended", []step{acq("k", "a", A), acq("k", "b", I), acq("k", "c", I)}},
		{"owner reacquires", []step{acq("k", "a", A), acq("k", "a", A), acq("k", "b", I)}},
		{"done is seen by all", []step{acq("k", "a", A), mark("k", "a", nil), acq("k", "b", D), acq("k", "a", D)}},
		{"release lets another acquire", []step{acq("k", "a", A), rel("k", "a"), acq("k", "b", A), acq("k", "a", I)}},
		{"other owner cannot release", []step{acq("k", "a", A), rel("k", "b"), acq("k", "c", I)}},
		{"other owner cannot mark", []step{acq("k", "a", A), mark("k", "b", dedupe.ErrNotOwner), acq("k", "c", I), mark("k", "a", nil), acq("k", "c", D)}},
		{"release keeps done mark", []step{acq("k", "a", A), mark("k", "a", nil), rel("k", "a"), rel("k", "b"), acq("k", "c", D)}},
		{"mark is idempotent", []step{acq("k", "a", A), mark("k", "a", nil), mark("k", "a", nil), mark("k", "b", nil), acq("k", "c", D)}},
		{"mark without lease", []step{mark("k", "a", nil), acq("k", "b", D)}},
		{"release without lease", []step{rel("k", "a"), acq("k", "b", A)}},
		{"keys are independent", []step{acq("k1", "a", A), acq("k2", "b", A), mark("k1", "a", nil), acq("k2", "c", I), acq("k1", "c", D), rel("k2", "b"), acq("k2", "c", A)}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			st := s.newStore(t)
			for i, p := range c.steps {
				s.do(t, st, i, p, time.Hour)
			}
		})
	}
}

func (s *suite) leaseExpires(t *testing.T) {
	st, ttl := s.newStore(t), s.o.TTL
	s.do(t, st, 0, acq("k", "crashed", dedupe.Acquired), ttl)
	s.do(t, st, 1, acq("k", "b", dedupe.InProgress), ttl)
	time.Sleep(ttl * 3 / 2)
	s.do(t, st, 2, acq("k", "b", dedupe.Acquired), time.Hour)
	// The crashed owner comes back late: it can neither release nor mark b's lease.
	s.do(t, st, 3, rel("k", "crashed"), ttl)
	s.do(t, st, 4, mark("k", "crashed", dedupe.ErrNotOwner), ttl)
	s.do(t, st, 5, acq("k", "c", dedupe.InProgress), ttl)
}

func (s *suite) reacquireExtends(t *testing.T) {
	st, ttl := s.newStore(t), s.o.TTL
	s.do(t, st, 0, acq("k", "a", dedupe.Acquired), ttl)
	time.Sleep(ttl * 6 / 10)
	s.do(t, st, 1, acq("k", "a", dedupe.Acquired), ttl)
	time.Sleep(ttl * 6 / 10) // past the first expiry, within the second
	s.do(t, st, 2, acq("k", "b", dedupe.InProgress), ttl)
	time.Sleep(ttl)
	s.do(t, st, 3, acq("k", "b", dedupe.Acquired), ttl)
}

func (s *suite) doneExpires(t *testing.T) {
	st, ttl := s.newStore(t), s.o.TTL
	s.do(t, st, 0, acq("k", "a", dedupe.Acquired), time.Hour)
	s.do(t, st, 1, mark("k", "a", nil), ttl) // the window replaces the lease's expiry
	s.do(t, st, 2, acq("k", "b", dedupe.Done), ttl)
	time.Sleep(ttl * 3 / 2)
	s.do(t, st, 3, acq("k", "b", dedupe.Acquired), ttl)
}

func (s *suite) staleOwner(t *testing.T) {
	st, ttl := s.newStore(t), s.o.TTL
	// A lease that expired unclaimed can still be marked done by its owner: the work
	// was done, and nobody else is doing it.
	s.do(t, st, 0, acq("k", "slow", dedupe.Acquired), ttl)
	time.Sleep(ttl * 3 / 2)
	s.do(t, st, 1, mark("k", "slow", nil), time.Hour)
	s.do(t, st, 2, acq("k", "b", dedupe.Done), ttl)
}

func (s *suite) clientsRace(t *testing.T) {
	clients := make([]dedupe.Store, s.o.Clients)
	for i := range clients {
		clients[i] = s.newStore(t)
	}
	const rounds = 20
	for r := range rounds {
		key := fmt.Sprintf("race-%d", r)
		var (
			wg       sync.WaitGroup
			mu       sync.Mutex
			acquired []string
			start    = make(chan struct{})
		)
		for i, c := range clients {
			for g := range 2 { // two goroutines per client
				owner := fmt.Sprintf("w%d-%d", i, g)
				wg.Go(func() {
					<-start
					got, err := c.Acquire(context.Background(), key, owner, time.Hour)
					if err != nil {
						t.Errorf("Acquire(%q, %q): %v", key, owner, err)
						return
					}
					if got == dedupe.Acquired {
						mu.Lock()
						acquired = append(acquired, owner)
						mu.Unlock()
					} else if got != dedupe.InProgress {
						t.Errorf("Acquire(%q, %q) = %v, want acquired or in-progress", key, owner, got)
					}
				})
			}
		}
		close(start)
		wg.Wait()
		if len(acquired) != 1 {
			t.Fatalf("round %d: %d owners acquired %q: %v, want exactly one", r, len(acquired), key, acquired)
		}
		// Everyone races to mark and release: only the winner's lease is turned into a
		// done mark (the others get ErrNotOwner before it, nil after it), no release
		// erases anything, and then every client sees the key done.
		for i, c := range clients {
			for g := range 2 {
				owner := fmt.Sprintf("w%d-%d", i, g)
				wg.Go(func() {
					err := c.MarkDone(context.Background(), key, owner, time.Hour)
					switch {
					case owner == acquired[0] && err != nil:
						t.Errorf("winner MarkDone: %v", err)
					case err != nil && !errors.Is(err, dedupe.ErrNotOwner):
						t.Errorf("MarkDone(%q, %q): %v, want nil or ErrNotOwner", key, owner, err)
					}
					if err := c.Release(context.Background(), key, owner); err != nil {
						t.Errorf("Release(%q, %q): %v", key, owner, err)
					}
				})
			}
		}
		wg.Wait()
		for i, c := range clients {
			if got, err := c.Acquire(context.Background(), key, "late", time.Hour); err != nil || got != dedupe.Done {
				t.Fatalf("round %d client %d: Acquire after race = %v, %v; want done", r, i, got, err)
			}
		}
	}
}
