package wire

import (
	"context"
	"errors"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	goamqp "github.com/Azure/go-amqp"
	"github.com/sbkit/sbkit/sbtest/internal/amqp"
	"github.com/sbkit/sbkit/sbtest/internal/modelerr"
)

// amqpErrorFor maps an error of the entity model to the AMQP error the service would
// send, so that the SDK maps it back: CodeLockLost to com.microsoft:message-lock-lost,
// ErrMessageTooLarge to amqp:link:message-size-exceeded, a transient fault
// (CodeConnectionLost, CodeTimeout) to com.microsoft:timeout, which the SDK retries by
// itself and finally reports as CodeTimeout, and so on.
func amqpErrorFor(err error) *amqp.Error {
	cond := condInternalError
	var sbErr *azservicebus.Error
	var ae *goamqp.Error
	switch {
	case errors.As(err, &ae): // the service's own condition (sessions): the SDK reads it as is
		return &amqp.Error{Condition: amqp.Symbol(ae.Condition), Description: ae.Description}
	case errors.Is(err, azservicebus.ErrMessageTooLarge):
		cond = condMessageTooLarge
	case errors.As(err, &sbErr):
		switch sbErr.Code {
		case azservicebus.CodeLockLost:
			cond = condLockLost
		case azservicebus.CodeConnectionLost, azservicebus.CodeTimeout:
			cond = condTimeout
		case azservicebus.CodeUnauthorizedAccess:
			cond = condUnauthorized
		case azservicebus.CodeNotFound:
			cond = condNotFound
		case azservicebus.CodeClosed:
			cond = condDetachForced
		}
	case errors.Is(err, modelerr.ErrNotSettleable), errors.Is(err, modelerr.ErrInvalidArgument):
		cond = condNotAllowed
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		cond = condTimeout
	}
	return &amqp.Error{Condition: cond, Description: err.Error()}
}

// $management error conditions: the service names the error of an unsuccessful
// response in an errorCondition application property, which the Python, .NET, Java and
// JavaScript SDKs map to their error types (azure-servicebus 7.x mgmt_handlers.py and
// exceptions.py _ERROR_CODE_TO_ERROR_MAPPING; @azure/core-amqp requestResponseLink.js);
// the Go SDK reads only the status code. Status codes and conditions pair as in
// @azure/core-amqp errors.js ConditionStatusMapper.
const (
	condSessionLockLost amqp.Symbol = "com.microsoft:session-lock-lost"
	condMessageNotFound amqp.Symbol = "com.microsoft:message-not-found"
	condServerBusy      amqp.Symbol = "com.microsoft:server-busy"
	condArgumentError   amqp.Symbol = "com.microsoft:argument-error"
)

// statusFor maps an error of the entity model to a $management status code, error
// condition and description: 410 (Gone) and com.microsoft:message-lock-lost for a lost
// lock, which the SDKs report as lock lost, 404 (amqp:not-found, or
// com.microsoft:message-not-found for a message), 401, 503 (com.microsoft:server-busy)
// for transient faults, which the SDKs retry, 408, 400 and 500.
func statusFor(err error) (int32, amqp.Symbol, string) {
	var sbErr *azservicebus.Error
	var ae *goamqp.Error
	var noMsg *modelerr.MessageNotFound
	switch {
	case errors.Is(err, azservicebus.ErrMessageTooLarge):
		return 400, condMessageTooLarge, err.Error()
	case errors.Is(err, modelerr.ErrInvalidArgument), errors.Is(err, modelerr.ErrNotSettleable):
		return 400, condArgumentError, err.Error()
	case errors.As(err, &ae) && ae.Condition == goamqp.ErrCondNotAllowed:
		return 405, condNotAllowed, ae.Description
	case errors.As(err, &ae):
		return 500, amqp.Symbol(ae.Condition), ae.Description
	case errors.As(err, &noMsg):
		return 404, condMessageNotFound, err.Error()
	case errors.As(err, &sbErr):
		switch sbErr.Code {
		case azservicebus.CodeLockLost:
			return 410, condLockLost, "The lock supplied is invalid. Either the lock expired, or the message has already been removed from the queue."
		case azservicebus.CodeNotFound:
			return 404, condNotFound, err.Error()
		case azservicebus.CodeUnauthorizedAccess:
			return 401, condUnauthorized, err.Error()
		case azservicebus.CodeConnectionLost:
			return 503, condServerBusy, err.Error()
		case azservicebus.CodeTimeout:
			return 408, condTimeout, err.Error()
		}
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return 408, condTimeout, err.Error()
	}
	return 500, condInternalError, err.Error()
}
