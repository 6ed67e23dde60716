package sbtest

import (
	"errors"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/sbkit/sbkit/sbtest/internal/modelerr"
)

var (
	// ErrInvalidOptions is returned by NewQueue, NewTopic and NewSubscription for options
	// out of range (a negative duration, a LockDuration above 5 minutes, a negative
	// MaxDeliveryCount) and for an empty name.
	ErrInvalidOptions = modelerr.ErrInvalidOptions
	// ErrExists is returned when creating an entity whose name is taken.
	ErrExists = errors.New("sbtest: entity already exists")
	// ErrInvalidArgument is returned for a bad argument to an operation, such as
	// maxMessages <= 0 in ReceiveMessages.
	ErrInvalidArgument = modelerr.ErrInvalidArgument
	// ErrNotSettleable is returned when dead-lettering a message that is already in a
	// dead-letter queue.
	ErrNotSettleable = modelerr.ErrNotSettleable
)

// ServiceError is an error of the service by its code, for faults: errors.As finds an
// [*azservicebus.Error] with that Code in it (a new one each time), so it is classified
// as the SDK's errors are (sbkit.IsTransient, sbkit.IsPermanent), and a Server sends it
// to clients as the service would. Its values are constants: nothing can change them,
// and errors.Is(err, TransientError) tells them apart.
type ServiceError azservicebus.Code

const (
	// TransientError is the error an injected Fault returns when its Err is nil: a lost
	// connection (CodeConnectionLost), which sbkit.IsTransient reports as retryable.
	TransientError = ServiceError(azservicebus.CodeConnectionLost)
	// PermanentError is a ready-made non-retryable error for faults: unauthorized access
	// (CodeUnauthorizedAccess).
	PermanentError = ServiceError(azservicebus.CodeUnauthorizedAccess)
)

// Error reads as the SDK's *azservicebus.Error with e's Code and no detail.
func (e ServiceError) Error() string {
	return (&azservicebus.Error{Code: azservicebus.Code(e)}).Error()
}

// As sets target, an **azservicebus.Error, to a new *azservicebus.Error with e's Code.
func (e ServiceError) As(target any) bool {
	p, ok := target.(**azservicebus.Error)
	if ok {
		*p = &azservicebus.Error{Code: azservicebus.Code(e)}
	}
	return ok
}

var (
	errLockLost = modelerr.LockLost
	errClosed   = modelerr.Closed
	errNotFound = modelerr.NotFound
)

// deferredNotFound fails a receive of deferred messages by sequence number, as the
// service does for a number it has no deferred message for (SDK: CodeNotFound).
func deferredNotFound(seq int64) error {
	return &modelerr.MessageNotFound{Seq: seq}
}
