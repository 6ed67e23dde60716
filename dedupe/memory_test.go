package dedupe_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sbkit/sbkit/dedupe"
	"github.com/sbkit/sbkit/dedupe/storetest"
)

// sharedMemory hands every caller with the same *testing.T the same MemoryStore, as the
// conformance suite's contract asks.
type sharedMemory struct {
	mu     sync.Mutex
	stores map[*testing.T]*dedupe.MemoryStore
}

func (m *sharedMemory) get(t *testing.T) dedupe.Store {
	m.mu.Lock()
	defer m.mu.Unlock()
	if s, ok := m.stores[t]; ok {
		return s
	}
	s, err := dedupe.NewMemoryStore(nil)
	if err != nil {
		t.Fatal(err)
	}
	m.stores[t] = s
	return s
}

func TestMemoryStoreConformance(t *testing.T) {
	m := &sharedMemory{stores: map[*testing.T]*dedupe.MemoryStore{}}
	storetest.Run(t, m.get, &storetest.Options{Synctest: true})
}

func TestNewMemoryStoreOptions(t *testing.T) {
	cases := []struct {
		name    string
		opts    *dedupe.MemoryOptions
		wantErr bool
	}{
		{"nil", nil, false},
		{"zero", &dedupe.MemoryOptions{}, false},
		{"bounded", &dedupe.MemoryOptions{MaxEntries: 1}, false},
		{"negative", &dedupe.MemoryOptions{MaxEntries: -1}, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s, err := dedupe.NewMemoryStore(c.opts)
			if c.wantErr {
				if !errors.Is(err, dedupe.ErrInvalidOptions) || s != nil {
					t.Fatalf("NewMemoryStore = %v, %v; want nil, ErrInvalidOptions", s, err)
				}
				return
			}
			if err != nil || s == nil {
				t.Fatalf("NewMemoryStore = %v, %v", s, err)
			}
		})
	}
}

func mustAcquire(t *testing.T, s dedupe.Store, key, owner string, lease time.Duration, want dedupe.State) {
	t.Helper()
	got, err := s.Acquire(context.Background(), key, owner, lease)
	if err != nil || got != want {
		t.Fatalf("Acquire(%q, %q) = %v, %v; want %v", key, owner, got, err, want)
	}
}

func TestMemoryStoreEvictsOldestDoneMark(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		s, _ := dedupe.NewMemoryStore(&dedupe.MemoryOptions{MaxEntries: 3})
		for i, window := range []time.Duration{3 * time.Hour, time.Hour, 2 * time.Hour} {
			key := fmt.Sprint("done-", i)
			mustAcquire(t, s, key, "a", time.Minute, dedupe.Acquired)
			if err := s.MarkDone(ctx, key, "a", window); err != nil {
				t.Fatal(err)
			}
		}
		// Full: a new lease evicts the done mark nearest its expiry (done-1).
		mustAcquire(t, s, "new", "a", time.Minute, dedupe.Acquired)
		if st := s.Stats(); st.Evicted != 1 || st.Leases != 1 || st.DoneMarks != 2 {
			t.Fatalf("Stats = %+v, want 1 evicted, 1 lease, 2 done marks", st)
		}
		mustAcquire(t, s, "done-0", "b", time.Minute, dedupe.Done)
		mustAcquire(t, s, "done-2", "b", time.Minute, dedupe.Done)
		// done-1 was evicted, so it is acquirable again, evicting done-2 this time.
		mustAcquire(t, s, "done-1", "b", time.Minute, dedupe.Acquired)
		mustAcquire(t, s, "done-0", "c", time.Minute, dedupe.Done)
		mustAcquire(t, s, "new", "c", time.Minute, dedupe.InProgress) // leases are never evicted
	})
}

func TestMemoryStoreFullOfLeases(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		s, _ := dedupe.NewMemoryStore(&dedupe.MemoryOptions{MaxEntries: 2})
		mustAcquire(t, s, "k1", "a", time.Minute, dedupe.Acquired)
		mustAcquire(t, s, "k2", "a", 2*time.Minute, dedupe.Acquired)
		if _, err := s.Acquire(ctx, "k3", "a", time.Minute); !errors.Is(err, dedupe.ErrStoreFull) {
			t.Fatalf("Acquire on a store full of leases: %v, want ErrStoreFull", err)
		}
		if err := s.MarkDone(ctx, "k3", "a", time.Minute); !errors.Is(err, dedupe.ErrStoreFull) {
			t.Fatalf("MarkDone of a new key on a store full of leases: %v, want ErrStoreFull", err)
		}
		// Marking a held lease done needs no room.
		if err := s.MarkDone(ctx, "k2", "a", time.Hour); err != nil {
			t.Fatal(err)
		}
		// Once k1's lease expires, its room is free again without any eviction.
		time.Sleep(time.Minute + time.Second)
		mustAcquire(t, s, "k3", "a", time.Minute, dedupe.Acquired)
		if st := s.Stats(); st.Evicted != 0 || st.Leases != 1 || st.DoneMarks != 1 {
			t.Fatalf("Stats = %+v, want 0 evicted (expired entries are dropped first), 1 lease, 1 done mark", st)
		}
		mustAcquire(t, s, "k2", "b", time.Minute, dedupe.Done)
	})
}
