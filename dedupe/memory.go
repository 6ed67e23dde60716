package dedupe

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/sbkit/sbkit/internal/heapq"
)

// DefaultMaxEntries is [MemoryOptions.MaxEntries]' default.
const DefaultMaxEntries = 100_000

// MemoryOptions configures a [MemoryStore]. The zero value (or nil) means defaults.
type MemoryOptions struct {
	// MaxEntries bounds the number of keys held (leases and done marks together).
	// Default (0): [DefaultMaxEntries]. Negative is an error (the store is bounded).
	//
	// Eviction policy: expired entries are dropped first; when the store is still full,
	// the done mark closest to its expiry is evicted (a later duplicate of that message
	// would then be processed again: size the store for the rate of messages times the
	// dedupe window). Live leases are never evicted: when every entry is a live lease,
	// Acquire fails with [ErrStoreFull], which the Filter treats as a store error.
	MaxEntries int
}

// MemoryStore is a Store held in this process's memory: duplicates are recognised only
// among the deliveries this process receives, so use a shared store (redisdedupe) when
// several processes receive from one entity.
//
// It is bounded (see [MemoryOptions.MaxEntries]) and expires entries lazily on every call,
// comparing with [time.Now]; it starts no goroutine and needs no Close. It is safe for
// concurrent use. Make one with [NewMemoryStore]; the zero value is not usable.
type MemoryStore struct {
	max int

	mu      sync.Mutex
	entries map[string]*memEntry
	leases  *heapq.Heap[*memEntry] // live leases by expiry
	done    *heapq.Heap[*memEntry] // done marks by expiry
	evicted int64
}

// MemoryStats is a snapshot of a [MemoryStore].
type MemoryStats struct {
	// Leases is the number of live processing leases now.
	Leases int64
	// DoneMarks is the number of live done marks now.
	DoneMarks int64
	// Evicted counts live done marks evicted to make room since the store was made
	// (see [MemoryOptions.MaxEntries]).
	Evicted int64
}

type memEntry struct {
	key     string
	owner   string // "" for a done mark
	expires time.Time
	index   int // position in its heap
}

// NewMemoryStore returns an empty [MemoryStore]. nil options mean defaults. It returns an
// error wrapping [ErrInvalidOptions] for a negative MaxEntries.
func NewMemoryStore(opts *MemoryOptions) (*MemoryStore, error) {
	var o MemoryOptions
	if opts != nil {
		o = *opts
	}
	if o.MaxEntries < 0 {
		return nil, fmt.Errorf("%w: negative MaxEntries %d", ErrInvalidOptions, o.MaxEntries)
	}
	if o.MaxEntries == 0 {
		o.MaxEntries = DefaultMaxEntries
	}
	return &MemoryStore{max: o.MaxEntries, entries: make(map[string]*memEntry), leases: newExpiryHeap(), done: newExpiryHeap()}, nil
}

func newExpiryHeap() *heapq.Heap[*memEntry] {
	return heapq.New(func(a, b *memEntry) bool { return a.expires.Before(b.expires) }, func(e *memEntry, i int) { e.index = i })
}

// Acquire implements Store.
func (s *MemoryStore) Acquire(ctx context.Context, key, owner string, lease time.Duration) (State, error) {
	if err := CheckArgs(key, owner, lease); err != nil {
		return 0, err
	}
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	s.expire(now)
	if e, ok := s.entries[key]; ok {
		switch {
		case e.owner == "":
			return Done, nil
		case e.owner != owner:
			return InProgress, nil
		}
		e.expires = now.Add(lease)
		s.leases.Fix(e.index)
		return Acquired, nil
	}
	if len(s.entries) >= s.max {
		if s.done.Len() == 0 {
			return 0, fmt.Errorf("%w: %d live leases", ErrStoreFull, len(s.entries))
		}
		s.evictDone()
	}
	e := &memEntry{key: key, owner: owner, expires: now.Add(lease)}
	s.entries[key] = e
	s.leases.Push(e)
	return Acquired, nil
}

// MarkDone implements Store.
func (s *MemoryStore) MarkDone(ctx context.Context, key, owner string, window time.Duration) error {
	if err := CheckArgs(key, owner, window); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	s.expire(now)
	e, ok := s.entries[key]
	switch {
	case ok && e.owner == "":
		return nil
	case ok && e.owner != owner:
		return fmt.Errorf("%w: key %q", ErrNotOwner, key)
	case ok:
		s.remove(s.leases, e)
	case len(s.entries) >= s.max && s.done.Len() > 0:
		s.evictDone()
	case len(s.entries) >= s.max:
		return fmt.Errorf("%w: %d live leases", ErrStoreFull, len(s.entries))
	}
	e = &memEntry{key: key, expires: now.Add(window)}
	s.entries[key] = e
	s.done.Push(e)
	return nil
}

// Release implements Store.
func (s *MemoryStore) Release(ctx context.Context, key, owner string) error {
	if err := CheckArgs(key, owner, 1); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.expire(time.Now())
	if e, ok := s.entries[key]; ok && e.owner == owner {
		s.remove(s.leases, e)
	}
	return nil
}

// Stats returns a snapshot of the store, after dropping expired entries.
func (s *MemoryStore) Stats() MemoryStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.expire(time.Now())
	return MemoryStats{Leases: int64(s.leases.Len()), DoneMarks: int64(s.done.Len()), Evicted: s.evicted}
}

// expire drops every entry whose expiry is not after now. s.mu must be held.
func (s *MemoryStore) expire(now time.Time) {
	for _, h := range []*heapq.Heap[*memEntry]{s.leases, s.done} {
		for {
			e, ok := h.Peek()
			if !ok || e.expires.After(now) {
				break
			}
			s.remove(h, e)
		}
	}
}

// evictDone drops the done mark closest to its expiry. s.mu must be held; s.done must
// not be empty.
func (s *MemoryStore) evictDone() {
	e, _ := s.done.Peek()
	s.remove(s.done, e)
	s.evicted++
}

// remove deletes e from h and from the map. s.mu must be held.
func (s *MemoryStore) remove(h *heapq.Heap[*memEntry], e *memEntry) {
	h.Remove(e.index)
	delete(s.entries, e.key)
}

var _ Store = (*MemoryStore)(nil)
