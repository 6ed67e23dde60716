package dedupe

import (
	"errors"
	"fmt"
)

var (
	// ErrLeaseHeld is wrapped by the Filter's result when another worker holds the
	// processing lease on the message's key (it is processing a copy of the message right
	// now) and the lease did not end within [Options.LeaseWait]. The processor abandons the
	// delivery; the broker delivers it again, and then it is either skipped as a duplicate
	// (the other worker succeeded) or processed (the other worker failed or crashed).
	ErrLeaseHeld = errors.New("dedupe: message is being processed by another worker")
	// ErrMissingKey is the cause of the dead-letter result asked for by [MissingKeyDeadLetter].
	ErrMissingKey = errors.New("dedupe: message has no MessageId")
	// ErrInvalidOptions is wrapped by the errors of New and [NewMemoryStore] for bad options.
	ErrInvalidOptions = errors.New("dedupe: invalid options")
	// ErrNilStore is returned by New for a nil [Store].
	ErrNilStore = errors.New("dedupe: nil store")
	// ErrLeaseLost is wrapped by the cause of a running handler's context when the Filter
	// knows that the handler no longer holds its processing lease: a refresh found the key
	// taken by another owner or marked done, or no refresh succeeded before the lease ran
	// out (the store was unreachable for LeaseTTL). Another worker may be processing a
	// copy of the message, so the handler should stop: test with
	// errors.Is(context.Cause(ctx), [ErrLeaseLost]). A plain error returned by a handler
	// whose lease was lost is wrapped with the cause, so the Filter's result wraps
	// [ErrLeaseLost] too.
	ErrLeaseLost = errors.New("dedupe: processing lease lost")
)

// Op names a [Store] operation in a [StoreError].
type Op string

// The Store operations.
const (
	OpAcquire  Op = "acquire"
	OpMarkDone Op = "mark-done"
	OpRelease  Op = "release"
	// OpRenew is the Acquire by which a running handler's lease is refreshed.
	OpRenew Op = "renew"
)

// StoreError is a [Store] call that failed: the [Filter] returns it ([FailClosed]) when
// the lease cannot be acquired, and passes it to the [StoreErrorHook]s for every
// failure. It wraps the store's error.
type StoreError struct {
	// Op is the Store call that failed.
	Op Op
	// Key is the message's key.
	Key string
	// Attempt counts the failed calls in a row for this key and operation: 1 for the
	// first, more for retries (Acquire under [FailClosed], lease refreshes).
	Attempt int
	// Err is the store's error.
	Err error
}

// Error names the operation and the key, then the store's error.
func (e *StoreError) Error() string {
	return fmt.Sprintf("dedupe: store %s %q: %v", e.Op, e.Key, e.Err)
}

// Unwrap returns the store's error.
func (e *StoreError) Unwrap() error { return e.Err }
