package sbotel

import (
	"context"
	"errors"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"go.opentelemetry.io/otel/attribute"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"

	"github.com/sbkit/sbkit"
	"github.com/sbkit/sbkit/receiver"
	"github.com/sbkit/sbkit/sender"
)

// errorType is the error.type of err, of low cardinality: the Service Bus error code of
// an [*azservicebus.Error] (unauthorized, connlost, locklost, timeout, notfound,
// closed), or locklost, full, closed, canceled, deadline_exceeded, message_too_large,
// timeout (an attempt that timed out), panic (a handler's), and otherwise the error's
// Go type as semconv.ErrorType gives it.
func errorType(err error) string {
	var sbErr *azservicebus.Error
	var timeout interface{ Timeout() bool }
	switch {
	case err == nil:
		return ""
	case errors.As(err, &sbErr):
		return string(sbErr.Code)
	case errors.Is(err, sbkit.ErrLockLost):
		return string(azservicebus.CodeLockLost)
	case errors.Is(err, sender.ErrFull):
		return "full"
	case errors.Is(err, sender.ErrClosed), errors.Is(err, receiver.ErrClosed):
		return "closed"
	case errors.Is(err, context.Canceled):
		return "canceled"
	case errors.Is(err, context.DeadlineExceeded):
		return "deadline_exceeded"
	case errors.Is(err, azservicebus.ErrMessageTooLarge):
		return "message_too_large"
	case errors.As(err, &timeout) && timeout.Timeout():
		return "timeout"
	}
	var panicErr *receiver.PanicError
	if errors.As(err, &panicErr) {
		return "panic"
	}
	var sendErr *sender.SendError
	if errors.As(err, &sendErr) && sendErr.Err != nil {
		err = sendErr.Err
	}
	return semconv.ErrorType(err).Value.AsString()
}

// errorAttr is the error.type attribute of err.
func errorAttr(err error) attribute.KeyValue { return semconv.ErrorTypeKey.String(errorType(err)) }
