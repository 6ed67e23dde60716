package locks

import (
	"errors"
	"fmt"
	"time"

	"github.com/sbkit/sbkit"
)

var (
	// ErrClosed is returned by Add after Close.
	ErrClosed = errors.New("locks: engine closed")
	// ErrNoLock is returned by Add for a message without LockedUntil: it holds no
	// peek-lock (for example it was received in ReceiveAndDelete mode).
	ErrNoLock = errors.New("locks: message holds no lock (LockedUntil is nil)")
	// ErrNilRenewer is returned by Add from an engine made without a LockRenewer.
	ErrNilRenewer = errors.New("locks: nil LockRenewer")
	// ErrInvalidOptions is wrapped by New's errors for out-of-range options.
	ErrInvalidOptions = errors.New("locks: invalid options")
)

// Reason says why a lock was lost.
type Reason int

const (
	// ReasonLockLost: the broker answered a renewal with CodeLockLost.
	ReasonLockLost Reason = iota + 1
	// ReasonExpired: the lock's LockedUntil passed before a renewal succeeded.
	ReasonExpired
	// ReasonConnectionLost: renewals failed because the connection dropped, and locks do
	// not survive a connection.
	ReasonConnectionLost
	// ReasonLimit: MaxAutoLockRenewalDuration was reached (or renewal is disabled) and the
	// lock then expired.
	ReasonLimit
	// ReasonRenewFailed: a renewal failed with an error that retrying cannot cure (not
	// found, unauthorized, closed).
	ReasonRenewFailed
)

// String describes the reason in words, for error messages and logs.
func (r Reason) String() string {
	switch r {
	case ReasonLockLost:
		return "broker reported the lock lost"
	case ReasonExpired:
		return "lock expired before it could be renewed"
	case ReasonConnectionLost:
		return "connection dropped"
	case ReasonLimit:
		return "renewal limit reached"
	case ReasonRenewFailed:
		return "renewal failed permanently"
	}
	return fmt.Sprintf("Reason(%d)", int(r))
}

// LostError is the cause of a lost lock. errors.Is(err, [sbkit.ErrLockLost]) and
// [sbkit.IsLockLost] report true for it; [errors.As] reaches the broker's error, if any.
type LostError struct {
	// Reason says why the lock was lost.
	Reason Reason
	// SessionID is the session whose lock was lost; "" for a message lock.
	SessionID string
	// LockedUntil is the last expiry the engine knew for the lock.
	LockedUntil time.Time
	// Err is the last renewal error, or nil.
	Err error
}

// Error says whose lock was lost and why, with the last known expiry and renewal error.
func (e *LostError) Error() string {
	msg := "locks: message lock lost: " + e.Reason.String()
	if e.SessionID != "" {
		msg = "locks: lock of session " + e.SessionID + " lost: " + e.Reason.String()
	}
	if !e.LockedUntil.IsZero() {
		msg += " (locked until " + e.LockedUntil.UTC().Format(time.RFC3339Nano) + ")"
	}
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg
}

// Unwrap returns [sbkit.ErrLockLost] and the renewal error, if any.
func (e *LostError) Unwrap() []error {
	if e.Err == nil {
		return []error{sbkit.ErrLockLost}
	}
	return []error{sbkit.ErrLockLost, e.Err}
}
