package dedupe

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// State is what Store.Acquire found for a key.
type State int

const (
	// Acquired means the caller now holds the processing lease on the key.
	Acquired State = iota + 1
	// InProgress means another owner holds a live lease on the key.
	InProgress
	// Done means the key is marked done: the message was processed successfully.
	Done
)

// String returns the state's name in lower case.
func (s State) String() string {
	switch s {
	case Acquired:
		return "acquired"
	case InProgress:
		return "in-progress"
	case Done:
		return "done"
	}
	return fmt.Sprintf("State(%d)", int(s))
}

// Store keeps processing leases and done marks per key. Implementations must be safe for
// concurrent use by many goroutines, and, when shared by many workers, by many processes:
// each method must be atomic with respect to the key. Package storetest checks these
// rules for any implementation.
//
// An entry is either a lease (an owner token and an expiry) or a done mark (an expiry).
// Expired entries behave as absent.
type Store interface {
	// Acquire takes the lease on key for owner, for the duration lease:
	//   - no live entry: a lease for owner is created, Acquired is returned;
	//   - a live lease held by owner: its expiry is reset to lease, Acquired is returned;
	//   - a live lease held by another owner: nothing changes, InProgress is returned;
	//   - a done mark: nothing changes, Done is returned.
	// It returns an error wrapping [ErrInvalidArgument] for an empty key or owner or a
	// non-positive lease, and the context's error when ctx is done.
	Acquire(ctx context.Context, key, owner string, lease time.Duration) (State, error)

	// MarkDone replaces owner's lease on key with a done mark that lives for window.
	// When the key has no live entry (the lease expired and nobody took it) the mark is
	// created anyway; an existing done mark is left as it is and nil is returned. When
	// another owner holds a live lease nothing changes and an error wrapping [ErrNotOwner]
	// is returned. Invalid arguments give an error wrapping [ErrInvalidArgument].
	MarkDone(ctx context.Context, key, owner string, window time.Duration) error

	// Release deletes owner's lease on key. When owner holds no live lease on key (it
	// expired, another owner took it, or the key is done) nothing changes and nil is
	// returned: one owner can never release another's lease or erase a done mark.
	// Invalid arguments give an error wrapping [ErrInvalidArgument].
	Release(ctx context.Context, key, owner string) error
}

// Errors stores return.
var (
	// ErrInvalidArgument is wrapped by store errors for an empty key or owner or a
	// non-positive duration.
	ErrInvalidArgument = errors.New("dedupe: invalid argument")
	// ErrNotOwner is wrapped by MarkDone's error when another owner holds the key's lease.
	ErrNotOwner = errors.New("dedupe: lease held by another owner")
	// ErrStoreFull is wrapped by [MemoryStore].Acquire's error when the store holds
	// MaxEntries live leases and no done mark can be evicted to make room.
	ErrStoreFull = errors.New("dedupe: store full")
)
