package dedupe_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/sbkit/sbkit"
	"github.com/sbkit/sbkit/dedupe"
)

// faultyStore is a MemoryStore whose calls fail on demand. While hang is set, every call
// blocks until its context ends (a store that stopped answering), then fails.
type faultyStore struct {
	*dedupe.MemoryStore
	mu                          sync.Mutex
	acquireErr, markErr, relErr error
	hang                        bool
	stolen                      bool // Acquire answers InProgress
	releases                    int
	acquires                    []time.Time // when each Acquire call started
}

func (f *faultyStore) setStolen(v bool) {
	f.mu.Lock()
	f.stolen = v
	f.mu.Unlock()
}

func (f *faultyStore) setHang(h bool) {
	f.mu.Lock()
	f.hang = h
	f.mu.Unlock()
}

// hung blocks until ctx ends when the store hangs, and returns ctx's error.
func (f *faultyStore) hung(ctx context.Context) error {
	f.mu.Lock()
	h := f.hang
	f.mu.Unlock()
	if !h {
		return nil
	}
	<-ctx.Done()
	return ctx.Err()
}

func (f *faultyStore) acquireTimes() []time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.acquires)
}

func newFaulty(t *testing.T) *faultyStore {
	t.Helper()
	m, err := dedupe.NewMemoryStore(nil)
	if err != nil {
		t.Fatal(err)
	}
	return &faultyStore{MemoryStore: m}
}

func (f *faultyStore) set(acquire, mark, rel error) {
	f.mu.Lock()
	f.acquireErr, f.markErr, f.relErr = acquire, mark, rel
	f.mu.Unlock()
}

func (f *faultyStore) Acquire(ctx context.Context, key, owner string, lease time.Duration) (dedupe.State, error) {
	f.mu.Lock()
	err, stolen := f.acquireErr, f.stolen
	f.acquires = append(f.acquires, time.Now())
	f.mu.Unlock()
	if err := f.hung(ctx); err != nil {
		return 0, err
	}
	if stolen {
		return dedupe.InProgress, nil
	}
	if err != nil {
		return 0, err
	}
	return f.MemoryStore.Acquire(ctx, key, owner, lease)
}

func (f *faultyStore) MarkDone(ctx context.Context, key, owner string, window time.Duration) error {
	f.mu.Lock()
	err := f.markErr
	f.mu.Unlock()
	if err := f.hung(ctx); err != nil {
		return err
	}
	if err != nil {
		return err
	}
	return f.MemoryStore.MarkDone(ctx, key, owner, window)
}

func (f *faultyStore) Release(ctx context.Context, key, owner string) error {
	f.mu.Lock()
	err := f.relErr
	f.releases++
	f.mu.Unlock()
	if err != nil {
		return err
	}
	return f.MemoryStore.Release(ctx, key, owner)
}

func memStore() *dedupe.MemoryStore {
	s, err := dedupe.NewMemoryStore(nil)
	if err != nil {
		panic(err)
	}
	return s
}

// wrap returns f.Wrap(h), failing the test on an error.
func wrap(t *testing.T, f *dedupe.Filter, h sbkit.Handler) sbkit.Handler {
	t.Helper()
	w, err := f.Wrap(h)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

func msg(id string) *azservicebus.ReceivedMessage {
	return &azservicebus.ReceivedMessage{MessageID: id}
}

// counting returns a handler that counts its runs and returns result.
func counting(runs *atomic.Int64, result error) sbkit.Handler {
	return func(context.Context, *azservicebus.ReceivedMessage) error {
		runs.Add(1)
		return result
	}
}

// mustNew returns a Filter over s, or over a new MemoryStore when s is nil.
func mustNew(t *testing.T, s dedupe.Store, o *dedupe.Options) *dedupe.Filter {
	t.Helper()
	if s == nil {
		s = memStore()
	}
	f, err := dedupe.New(s, o)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func TestNewOptions(t *testing.T) {
	cases := []struct {
		name string
		opts *dedupe.Options
		ok   bool
	}{
		{"nil", nil, true},
		{"zero", &dedupe.Options{}, true},
		{"entity path", &dedupe.Options{Entity: "topic/Subscriptions/sub"}, true},
		{"entity with colon", &dedupe.Options{Entity: "a:b"}, false},
		{"negative lease", &dedupe.Options{LeaseTTL: -1}, false},
		{"negative window", &dedupe.Options{Window: -time.Second}, false},
		{"negative wait: no limit", &dedupe.Options{LeaseWait: -1}, true},
		{"negative poll", &dedupe.Options{LeasePoll: -1}, false},
		{"negative renewal", &dedupe.Options{LeaseRenewal: -1}, false},
		{"renewal not shorter than lease", &dedupe.Options{LeaseTTL: time.Minute, LeaseRenewal: time.Minute}, false},
		{"renewal shorter than lease", &dedupe.Options{LeaseTTL: time.Minute, LeaseRenewal: 59 * time.Second}, true},
		{"negative store timeout", &dedupe.Options{StoreTimeout: -1}, false},
		{"unknown missing-key policy", &dedupe.Options{MissingKey: 7}, false},
		{"unknown contended policy", &dedupe.Options{Contended: 7}, false},
		{"unknown failure policy", &dedupe.Options{StoreFailure: 7}, false},
		{"hook of no interface", &dedupe.Options{Hooks: []dedupe.Hook{func(context.Context, dedupe.Duplicate) {}}}, false},
		{"hook function adapter", &dedupe.Options{Hooks: []dedupe.Hook{dedupe.DuplicateHookFunc(func(context.Context, dedupe.Duplicate) {})}}, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f, err := dedupe.New(memStore(), c.opts)
			if c.ok != (err == nil) || c.ok != (f != nil) {
				t.Fatalf("New = %v, %v; want ok=%v", f, err, c.ok)
			}
			if !c.ok && !errors.Is(err, dedupe.ErrInvalidOptions) {
				t.Fatalf("error %v does not wrap ErrInvalidOptions", err)
			}
		})
	}
}

// TestHandlerResults: only a nil result marks the key done; every other result releases
// the lease so that the next delivery runs the handler again, and is returned unchanged.
func TestHandlerResults(t *testing.T) {
	boom := errors.New("boom")
	cases := []struct {
		name     string
		result   error
		wantDone bool
	}{
		{"nil", nil, true},
		{"error", boom, false},
		{"skip", sbkit.Skip("expired"), false},
		{"dead-letter", sbkit.DeadLetter("r", "d", nil), false},
		{"defer", sbkit.Defer(nil), false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := mustNew(t, nil, nil)
			var runs atomic.Int64
			h := wrap(t, f, counting(&runs, c.result))
			if err := h(context.Background(), msg("m1")); err != c.result {
				t.Fatalf("first delivery = %v, want the handler's %v", err, c.result)
			}
			second := h(context.Background(), msg("m1"))
			wantRuns := int64(2)
			if c.wantDone {
				wantRuns = 1
				if a, se := sbkit.SettlementOf(second); a != sbkit.ActionComplete || se == nil || se.Reason != dedupe.DuplicateReason {
					t.Fatalf("second delivery = %v, want sbkit.Skip(%q)", second, dedupe.DuplicateReason)
				}
			} else if second != c.result {
				t.Fatalf("second delivery = %v, want the handler's %v", second, c.result)
			}
			if runs.Load() != wantRuns {
				t.Fatalf("handler ran %d times, want %d", runs.Load(), wantRuns)
			}
			st := f.Stats()
			if st.Checked != 2 || st.Processed != wantRuns || st.DuplicatesSkipped != 2-wantRuns {
				t.Fatalf("stats = %+v", st)
			}
		})
	}
}

func TestPanicReleasesLease(t *testing.T) {
	f := mustNew(t, nil, nil)
	var runs atomic.Int64
	panicking := wrap(t, f, func(context.Context, *azservicebus.ReceivedMessage) error {
		runs.Add(1)
		panic("handler bug")
	})
	func() {
		defer func() {
			if r := recover(); r != "handler bug" {
				t.Fatalf("recovered %v, want the handler's panic to continue", r)
			}
		}()
		_ = panicking(context.Background(), msg("m1"))
	}()
	if err := wrap(t, f, counting(&runs, nil))(context.Background(), msg("m1")); err != nil {
		t.Fatalf("redelivery after panic = %v, want processed", err)
	}
	if runs.Load() != 2 {
		t.Fatalf("runs = %d, want 2", runs.Load())
	}
}

func TestKeys(t *testing.T) {
	cases := []struct {
		name        string
		opts        dedupe.Options
		a, b        *azservicebus.ReceivedMessage
		wantSkipped bool
	}{
		{"same id", dedupe.Options{Entity: "q"}, msg("x"), msg("x"), true},
		{"different ids", dedupe.Options{Entity: "q"}, msg("x"), msg("y"), false},
		// A copy made by a processor's delayed redelivery is the same work as its
		// original, and as every other copy of it.
		{"original and its copy", dedupe.Options{Entity: "q"}, msg("x"), redeliveredCopy("x", 1), true},
		{"two copies of one attempt", dedupe.Options{Entity: "q"}, redeliveredCopy("x", 2), redeliveredCopy("x", 2), true},
		{"copies of two attempts", dedupe.Options{Entity: "q"}, redeliveredCopy("x", 1), redeliveredCopy("x", 2), true},
		{"copies of two messages", dedupe.Options{Entity: "q"}, redeliveredCopy("x", 1), redeliveredCopy("y", 1), false},
		{"custom key", dedupe.Options{Key: func(m *azservicebus.ReceivedMessage) string {
			return *m.CorrelationID
		}}, &azservicebus.ReceivedMessage{MessageID: "x", CorrelationID: new("c")},
			&azservicebus.ReceivedMessage{MessageID: "y", CorrelationID: new("c")}, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := mustNew(t, nil, &c.opts)
			var runs atomic.Int64
			h := wrap(t, f, counting(&runs, nil))
			if err := h(context.Background(), c.a); err != nil {
				t.Fatal(err)
			}
			err := h(context.Background(), c.b)
			if a, _ := sbkit.SettlementOf(err); c.wantSkipped != (err != nil && a == sbkit.ActionComplete) {
				t.Fatalf("second = %v, want skipped=%v", err, c.wantSkipped)
			}
		})
	}
}

// TestEntitiesDoNotCollide: one store shared by two entities keeps their keys apart.
func TestEntitiesDoNotCollide(t *testing.T) {
	s, _ := dedupe.NewMemoryStore(nil)
	var runs atomic.Int64
	for _, entity := range []string{"orders", "topic/Subscriptions/audit"} {
		if err := wrap(t, mustNew(t, s, &dedupe.Options{Entity: entity}), counting(&runs, nil))(context.Background(), msg("m1")); err != nil {
			t.Fatalf("%s: %v", entity, err)
		}
	}
	if runs.Load() != 2 {
		t.Fatalf("runs = %d, want 2", runs.Load())
	}
}

func TestMissingKey(t *testing.T) {
	cases := []struct {
		name     string
		policy   dedupe.MissingKeyPolicy
		wantRuns int64
		want     sbkit.Action
	}{
		{"process", dedupe.MissingKeyProcess, 2, sbkit.ActionComplete},
		{"dead-letter", dedupe.MissingKeyDeadLetter, 0, sbkit.ActionDeadLetter},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := mustNew(t, nil, &dedupe.Options{MissingKey: c.policy})
			var runs atomic.Int64
			h := wrap(t, f, counting(&runs, nil))
			for range 2 {
				err := h(context.Background(), msg(""))
				a, se := sbkit.SettlementOf(err)
				if a != c.want {
					t.Fatalf("result %v asks for %v, want %v", err, a, c.want)
				}
				if a == sbkit.ActionDeadLetter && (se.Reason != dedupe.MissingKeyReason || !errors.Is(err, dedupe.ErrMissingKey)) {
					t.Fatalf("dead-letter %+v, want reason %q wrapping ErrMissingKey", se, dedupe.MissingKeyReason)
				}
			}
			st := f.Stats()
			if runs.Load() != c.wantRuns || st.Unkeyed != 2 || st.Unprotected != c.wantRuns || st.Checked != 0 {
				t.Fatalf("runs = %d, stats = %+v", runs.Load(), st)
			}
		})
	}
}

// TestNilFailsAtConstruction: a nil store or handler is refused when the Filter or the
// handler is made, never per message.
func TestNilFailsAtConstruction(t *testing.T) {
	if f, err := dedupe.New(nil, nil); f != nil || !errors.Is(err, dedupe.ErrNilStore) {
		t.Fatalf("New(nil store) = %v, %v; want ErrNilStore", f, err)
	}
	f := mustNew(t, nil, nil)
	if h, err := f.Wrap(nil); h != nil || !errors.Is(err, sbkit.ErrNilHandler) {
		t.Fatalf("Wrap(nil) = %p, %v; want ErrNilHandler", h, err)
	}
	defer func() {
		if err, _ := recover().(error); !errors.Is(err, sbkit.ErrNilHandler) {
			t.Fatalf("Middleware()(nil) panicked with %v, want ErrNilHandler", err)
		}
	}()
	f.Middleware()(nil)
}

func TestBadInput(t *testing.T) {
	f := mustNew(t, nil, nil)
	var runs atomic.Int64
	if err := wrap(t, f, counting(&runs, nil))(context.Background(), nil); !errors.Is(err, sbkit.ErrNilMessage) {
		t.Fatalf("nil message: %v, want ErrNilMessage", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := wrap(t, f, counting(&runs, nil))(ctx, msg("m"))
	if !errors.Is(err, context.Canceled) || runs.Load() != 0 {
		t.Fatalf("cancelled context: %v (runs %d), want context.Canceled without running", err, runs.Load())
	}
	var se *dedupe.StoreError
	if errors.As(err, &se) || f.Stats().StoreErrors != 0 {
		t.Fatalf("a cancelled context was counted as a store error: %v", err)
	}
	if a, _ := sbkit.SettlementOf(err); a != sbkit.ActionAbandon {
		t.Fatalf("cancelled context asks for %v, want abandon", a)
	}
}

func TestStoreFailurePolicy(t *testing.T) {
	cases := []struct {
		name      string
		policy    dedupe.FailurePolicy
		wantRuns  int64
		wantCalls int64 // failed store calls
	}{
		{"fail closed", dedupe.FailClosed, 0, 8}, // the first call and 7 retries
		{"fail open", dedupe.FailOpen, 1, 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := storeDownFor(t, -1)
				var hooked []*dedupe.StoreError
				f := mustNew(t, s, &dedupe.Options{StoreFailure: c.policy, Hooks: []dedupe.Hook{
					dedupe.StoreErrorHookFunc(func(_ context.Context, err *dedupe.StoreError) { hooked = append(hooked, err) }),
				}})
				var runs atomic.Int64
				err := wrap(t, f, counting(&runs, nil))(context.Background(), msg("m"))
				if runs.Load() != c.wantRuns {
					t.Fatalf("runs = %d, want %d", runs.Load(), c.wantRuns)
				}
				if c.policy == dedupe.FailClosed {
					var se *dedupe.StoreError
					if !errors.As(err, &se) || se.Op != dedupe.OpAcquire || !errors.Is(err, errStoreDown) {
						t.Fatalf("result = %v, want a *StoreError for acquire wrapping the cause", err)
					}
					if a, _ := sbkit.SettlementOf(err); a != sbkit.ActionAbandon {
						t.Fatalf("fail-closed result asks for %v, want abandon", a)
					}
				} else if err != nil {
					t.Fatalf("fail-open result = %v, want the handler's nil", err)
				}
				st := f.Stats()
				if len(hooked) != int(c.wantCalls) || st.StoreErrors != c.wantCalls || st.Unprotected != c.wantRuns {
					t.Fatalf("hooked %v, stats %+v", hooked, st)
				}
				for i, e := range hooked {
					if e.Attempt != i+1 {
						t.Fatalf("hooked error %d has Attempt %d, want %d", i, e.Attempt, i+1)
					}
				}
			})
		})
	}
}

// TestMarkDoneFailure: the handler succeeded, so the delivery is still completed; the
// failure is reported; the lease stays until it expires.
func TestMarkDoneFailure(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newFaulty(t)
		s.set(nil, errors.New("redis: timeout"), nil)
		var hooked atomic.Int64
		f := mustNew(t, s, &dedupe.Options{LeaseTTL: time.Minute, Contended: dedupe.ContendedAbandon, Hooks: []dedupe.Hook{
			dedupe.StoreErrorHookFunc(func(_ context.Context, err *dedupe.StoreError) {
				if err.Op == dedupe.OpMarkDone {
					hooked.Add(1)
				}
			}),
		}})
		var runs atomic.Int64
		h := wrap(t, f, counting(&runs, nil))
		if err := h(context.Background(), msg("m")); err != nil {
			t.Fatalf("result = %v, want nil (completed despite the failed mark)", err)
		}
		if st := f.Stats(); hooked.Load() != 1 || st.MarkDoneErrors != 1 || st.StoreErrors != 1 || st.Succeeded != 1 {
			t.Fatalf("hooked %d, stats %+v", hooked.Load(), st)
		}
		s.set(nil, nil, nil)
		if err := h(context.Background(), msg("m")); !errors.Is(err, dedupe.ErrLeaseHeld) {
			t.Fatalf("redelivery within the lease = %v, want ErrLeaseHeld", err)
		}
		time.Sleep(time.Minute + time.Second)
		if err := h(context.Background(), msg("m")); err != nil || runs.Load() != 2 {
			t.Fatalf("redelivery after the lease = %v, runs %d; want processed again", err, runs.Load())
		}
	})
}

func TestReleaseFailureKeepsHandlerResult(t *testing.T) {
	s := newFaulty(t)
	s.set(nil, nil, errors.New("redis: timeout"))
	f := mustNew(t, s, nil)
	boom := errors.New("boom")
	var runs atomic.Int64
	if err := wrap(t, f, counting(&runs, boom))(context.Background(), msg("m")); err != boom {
		t.Fatalf("result = %v, want the handler's error", err)
	}
	if st := f.Stats(); st.StoreErrors != 1 || s.releases != 1 {
		t.Fatalf("stats %+v, releases %d", st, s.releases)
	}
}

// TestLockLostDuringHandler: the handler's context is cancelled (lock lost) but the
// handler finished its work: the done mark is still written, so the redelivery that
// follows the lost lock is skipped.
func TestLockLostDuringHandler(t *testing.T) {
	f := mustNew(t, nil, nil)
	ctx, cancel := context.WithCancelCause(context.Background())
	var runs atomic.Int64
	h := wrap(t, f, func(context.Context, *azservicebus.ReceivedMessage) error {
		runs.Add(1)
		cancel(sbkit.ErrLockLost)
		return nil
	})
	if err := h(ctx, msg("m")); err != nil {
		t.Fatal(err)
	}
	if err := h(context.Background(), msg("m")); err == nil || runs.Load() != 1 {
		t.Fatalf("redelivery = %v, runs %d; want skipped", err, runs.Load())
	}
	if f.Stats().DuplicatesSkipped != 1 {
		t.Fatalf("stats %+v", f.Stats())
	}
}

// redeliveredCopy is the attempt-th copy of the message originalID, as package receiver's
// delayed redelivery schedules it.
func redeliveredCopy(originalID string, attempt int) *azservicebus.ReceivedMessage {
	return &azservicebus.ReceivedMessage{
		MessageID: sbkit.RedeliveryMessageID(originalID, attempt),
		ApplicationProperties: map[string]any{
			sbkit.RedeliveryAttemptProperty:    int64(attempt),
			sbkit.RedeliveryOriginalIDProperty: originalID,
		},
	}
}
