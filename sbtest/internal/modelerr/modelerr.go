// Package modelerr holds the errors of sbtest's entity model that its server
// (sbtest/internal/wire) tells apart to answer them as the service does, over AMQP,
// $management and HTTP. The model makes them and the server reads them; neither imports
// the other, so they live here. sbtest exports the sentinels under its own names
// (sbtest.ErrInvalidOptions is ErrInvalidOptions, and so on).
package modelerr

import (
	"errors"
	"fmt"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	goamqp "github.com/Azure/go-amqp"
)

var (
	// ErrInvalidOptions is sbtest.ErrInvalidOptions.
	ErrInvalidOptions = errors.New("sbtest: invalid options")
	// ErrInvalidArgument is sbtest.ErrInvalidArgument.
	ErrInvalidArgument = errors.New("sbtest: invalid argument")
	// ErrNotSettleable is sbtest.ErrNotSettleable.
	ErrNotSettleable = errors.New("sbtest: operation not allowed on this message")
)

// LockLost, Closed and NotFound return the SDK's error with that code, as the SDK's
// clients return it.
func LockLost() error { return &azservicebus.Error{Code: azservicebus.CodeLockLost} }
func Closed() error   { return &azservicebus.Error{Code: azservicebus.CodeClosed} }
func NotFound() error { return &azservicebus.Error{Code: azservicebus.CodeNotFound} }

// MessageNotFound is CodeNotFound for a message rather than an entity: no deferred
// message with sequence number Seq.
type MessageNotFound struct{ Seq int64 }

func (e *MessageNotFound) Error() string {
	return fmt.Sprintf("sbtest: no deferred message with sequence number %d: %v", e.Seq, NotFound())
}

func (e *MessageNotFound) Unwrap() error { return NotFound() }

// CondEntityDisabled is the AMQP condition the service answers for an operation its
// entity's status forbids; the SDK treats it as fatal (not retried) and passes it on as
// an *amqp.Error (azservicebus internal/errors.go).
const CondEntityDisabled = "com.microsoft:entity-disabled"

// NonSessionReceiver is the error of a receiver without a session for an entity that
// requires sessions.
func NonSessionReceiver() error {
	// Source: SDK live test TestSessionReceiver_nonSessionReceiver (condition and description).
	return &goamqp.Error{Condition: goamqp.ErrCondNotAllowed, Description: "It is not possible for an entity that requires sessions to create a non-sessionful message receiver."}
}
