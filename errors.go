package sbkit

import (
	"context"
	"errors"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
)

// ErrLockLost is the cause given to a handler's context when sbkit knows that the
// message's lock is gone: the broker said so, the lock expired before it could be renewed,
// the renewal limit was reached, or the connection dropped. [IsLockLost] reports true for it.
var ErrLockLost = errors.New("sbkit: message lock lost")

// IsLockLost reports whether err means that a message's lock is no longer held: [ErrLockLost],
// or an [*azservicebus.Error] with Code CodeLockLost, anywhere in err's chain.
func IsLockLost(err error) bool {
	return errors.Is(err, ErrLockLost) || hasCode(err, azservicebus.CodeLockLost)
}

// IsTransient reports whether retrying the operation that returned err may succeed: an
// [*azservicebus.Error] with Code CodeConnectionLost or CodeTimeout, or an error that says
// so itself through a Temporary() bool or Timeout() bool method (as net.Error does).
// Context errors, [azservicebus.ErrMessageTooLarge], unauthorized, not found, closed and
// lock-lost errors are never transient, and neither is an error sbkit cannot classify:
// retrying blindly would turn a bug into a duplicate.
func IsTransient(err error) bool {
	if err == nil || IsPermanent(err) {
		return false
	}
	if hasCode(err, azservicebus.CodeConnectionLost) || hasCode(err, azservicebus.CodeTimeout) {
		return true
	}
	var temp interface{ Temporary() bool }
	if errors.As(err, &temp) && temp.Temporary() {
		return true
	}
	var timeout interface{ Timeout() bool }
	return errors.As(err, &timeout) && timeout.Timeout()
}

// IsPermanent reports whether err can never be cured by retrying: a cancelled or expired
// context, [azservicebus.ErrMessageTooLarge], [ErrLockLost], or an [*azservicebus.Error] with
// Code CodeUnauthorizedAccess, CodeNotFound, CodeClosed or CodeLockLost.
func IsPermanent(err error) bool {
	switch {
	case err == nil:
		return false
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded),
		errors.Is(err, azservicebus.ErrMessageTooLarge), errors.Is(err, ErrLockLost):
		return true
	}
	var sbErr *azservicebus.Error
	if !errors.As(err, &sbErr) {
		return false
	}
	switch sbErr.Code {
	case azservicebus.CodeUnauthorizedAccess, azservicebus.CodeNotFound, azservicebus.CodeClosed, azservicebus.CodeLockLost:
		return true
	}
	return false
}

func hasCode(err error, code azservicebus.Code) bool {
	var sbErr *azservicebus.Error
	return errors.As(err, &sbErr) && sbErr.Code == code
}
