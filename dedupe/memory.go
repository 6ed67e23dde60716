package dedupe

import (
	"container/heap"
	"context"
	"fmt"
	"sync"
	"time"
)

// DefaultMaxEntries is MemoryOptions.MaxEntries' default.
const DefaultMaxEntries = 100_000

// MemoryOptions configures a MemoryStore. The zero value (or nil) means defaults.
type MemoryOptions struct {
	// MaxEntries bounds the number of keys held (leases and done marks together).
	// Default (0): DefaultMaxEntries. Negative: an error.
	//
	// Eviction policy: expired entries are dropped first; when the store is still full,
	// the done mark closest to its expiry is evicted (a later duplicate of that message
	// would then be processed again: size the store for the rate of messages times the
	// dedupe window). Live leases are never evicted: when every entry is a live lease,
	// Acquire fails with ErrStoreFull, which the Filter treats as a store error.
	MaxEntries int
}

// MemoryStore is a Store held in this process's memory: duplicates are recognised only
// among the deliveries this process receives, so use a shared store (redisdedupe) when
// several processes receive from one entity.
//
// It is bounded (see MemoryOptions.MaxEntries) and expires entries lazily on every call,
// comparing with time.Now; it starts no goroutine and needs no Close. It is safe for
// concurrent use. Make one with NewMemoryStore; the zero value is not usable.
type MemoryStore struct {
	max int

	mu      sync.Mutex
	entries map[string]*memEntry
	leases  expiryHeap // live leases by expiry
	done    expiryHeap // done marks by expiry
	evicted int64
}

type memEntry struct {
	key     string
	owner   string // "" for a done mark
	expires time.Time
	index   int // position in its heap
}

// NewMemoryStore returns an empty MemoryStore. nil options mean defaults. It returns an
// error wrapping ErrInvalidOptions for a negative MaxEntries.
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
	return &MemoryStore{max: o.MaxEntries, entries: make(map[string]*memEntry)}, nil
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
		heap.Fix(&s.leases, e.index)
		return Acquired, nil
	}
	if len(s.entries) >= s.max {
		if s.done.Len() == 0 {
			return 0, fmt.Errorf("%w: %d live leases", ErrStoreFull, len(s.entries))
		}
		s.remove(&s.done, s.done[0])
		s.evicted++
	}
	e := &memEntry{key: key, owner: owner, expires: now.Add(lease)}
	s.entries[key] = e
	heap.Push(&s.leases, e)
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
		s.remove(&s.leases, e)
	case len(s.entries) >= s.max && s.done.Len() > 0:
		s.remove(&s.done, s.done[0])
		s.evicted++
	case len(s.entries) >= s.max:
		return fmt.Errorf("%w: %d live leases", ErrStoreFull, len(s.entries))
	}
	e = &memEntry{key: key, expires: now.Add(window)}
	s.entries[key] = e
	heap.Push(&s.done, e)
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
		s.remove(&s.leases, e)
	}
	return nil
}

// Len returns the number of live entries (leases and done marks).
func (s *MemoryStore) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.expire(time.Now())
	return len(s.entries)
}

// Evicted returns how many live done marks were evicted to make room since the store
// was made.
func (s *MemoryStore) Evicted() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.evicted
}

// expire drops every entry whose expiry is not after now. s.mu must be held.
func (s *MemoryStore) expire(now time.Time) {
	for _, h := range []*expiryHeap{&s.leases, &s.done} {
		for h.Len() > 0 && !(*h)[0].expires.After(now) {
			s.remove(h, (*h)[0])
		}
	}
}

// remove deletes e from h and from the map. s.mu must be held.
func (s *MemoryStore) remove(h *expiryHeap, e *memEntry) {
	heap.Remove(h, e.index)
	delete(s.entries, e.key)
}

// expiryHeap is a min-heap of entries by expiry (container/heap).
type expiryHeap []*memEntry

func (h expiryHeap) Len() int           { return len(h) }
func (h expiryHeap) Less(i, j int) bool { return h[i].expires.Before(h[j].expires) }
func (h expiryHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index = i
	h[j].index = j
}
func (h *expiryHeap) Push(x any) {
	e := x.(*memEntry)
	e.index = len(*h)
	*h = append(*h, e)
}
func (h *expiryHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	return e
}

var _ Store = (*MemoryStore)(nil)
