package dedupe

import (
	"errors"
	"fmt"
)

var (
	// ErrLeaseHeld is wrapped by the Filter's result when another worker holds the
	// processing lease on the message's key (it is processing a copy of the message right
	// now) and the lease did not end within Options.LeaseWait. The processor abandons the
	// delivery; the broker delivers it again, and then it is either skipped as a duplicate
	// (the other worker succeeded) or processed (the other worker failed or crashed).
	ErrLeaseHeld = errors.New("dedupe: message is being processed by another worker")
	// ErrMissingKey is the cause of the dead-letter result asked for by MissingKeyDeadLetter.
	ErrMissingKey = errors.New("dedupe: message has no MessageId")
	// ErrInvalidOptions is wrapped by the errors of New and NewMemoryStore for bad options.
	ErrInvalidOptions = errors.New("dedupe: invalid options")
	// ErrNilHandler is returned by the handler Filter.Wrap makes from a nil handler.
	ErrNilHandler = errors.New("dedupe: nil handler")
)

// Op names a Store operation in a StoreError and in Hooks.OnStoreError.
type Op string

// The Store operations.
const (
	OpAcquire  Op = "acquire"
	OpMarkDone Op = "mark-done"
	OpRelease  Op = "release"
	// OpRenew is the Acquire by which a running handler's lease is refreshed.
	OpRenew Op = "renew"
)

// StoreError is a Store call that failed: the Filter returns it (FailClosed) when the
// lease cannot be acquired, and passes it to Hooks.OnStoreError for every failure. It
// wraps the store's error.
type StoreError struct {
	Op  Op
	Key string
	Err error
}

func (e *StoreError) Error() string {
	return fmt.Sprintf("dedupe: store %s %q: %v", e.Op, e.Key, e.Err)
}

func (e *StoreError) Unwrap() error { return e.Err }
