package sbkit

import (
	"context"
	"errors"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/Azure/go-amqp"
)

// ErrLockLost is the cause given to a handler's context when sbkit knows that the
// message's lock is gone: the broker said so, the lock expired before it could be renewed,
// the renewal limit was reached, or the connection dropped. [IsLockLost] reports true for it.
var ErrLockLost = errors.New("sbkit: message lock lost")

// IsLockLost reports whether err means that a message's lock is no longer held: [ErrLockLost],
// an [*azservicebus.Error] with Code CodeLockLost, or an [*amqp.Error] with the
// condition com.microsoft:message-lock-lost, anywhere in err's chain.
func IsLockLost(err error) bool {
	return errors.Is(err, ErrLockLost) || hasCode(err, azservicebus.CodeLockLost) || hasCondition(err, condLockLost)
}

// condLockLost is Service Bus's AMQP condition for a lost lock.
const condLockLost = amqp.ErrCond("com.microsoft:message-lock-lost")

// fatalConditions are the AMQP conditions the SDK treats as fatal (it neither retries
// nor recovers the link: amqpConditionsToRecoveryKind in azservicebus's
// internal/errors.go) and that no retry of the same operation cures. The SDK returns
// most of them bare, as an [*amqp.Error] (or in the [*amqp.LinkError] of a detach),
// not as an [*azservicebus.Error] with a Code: a send on a link the broker detached for
// a deleted entity fails with amqp:not-found. Two of the SDK's fatal conditions are
// left out: amqp:resource-limit-exceeded (an entity's quota, cured as its messages are
// consumed) and com.microsoft:session-cannot-be-locked (another receiver holds the
// session for now).
var fatalConditions = map[amqp.ErrCond]bool{
	amqp.ErrCondNotFound:            true,
	amqp.ErrCondUnauthorizedAccess:  true,
	amqp.ErrCondMessageSizeExceeded: true,
	amqp.ErrCondNotAllowed:          true,
	"com.microsoft:entity-disabled": true,
	condLockLost:                    true,
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
// context, [azservicebus.ErrMessageTooLarge], [ErrLockLost], an [*azservicebus.Error] with
// Code CodeUnauthorizedAccess, CodeNotFound, CodeClosed or CodeLockLost, or an
// [*amqp.Error] (bare, or in an [*amqp.LinkError]) with a condition the SDK treats as
// fatal: amqp:not-found, amqp:unauthorized-access, amqp:link:message-size-exceeded,
// amqp:not-allowed, com.microsoft:entity-disabled or com.microsoft:message-lock-lost.
func IsPermanent(err error) bool {
	switch {
	case err == nil:
		return false
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded),
		errors.Is(err, azservicebus.ErrMessageTooLarge), errors.Is(err, ErrLockLost):
		return true
	}
	var amqpErr *amqp.Error
	if errors.As(err, &amqpErr) && fatalConditions[amqpErr.Condition] {
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

func hasCondition(err error, c amqp.ErrCond) bool {
	var amqpErr *amqp.Error
	return errors.As(err, &amqpErr) && amqpErr.Condition == c
}

func hasCode(err error, code azservicebus.Code) bool {
	var sbErr *azservicebus.Error
	return errors.As(err, &sbErr) && sbErr.Code == code
}
