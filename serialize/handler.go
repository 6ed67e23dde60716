package serialize

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/sbkit/sbkit"
)

// DefaultDeadLetterReason is the dead-letter reason for a message that no decoder could
// read.
const DefaultDeadLetterReason = "DeserializationFailed"

// DefaultBodyTooLargeReason is the dead-letter reason for a message whose body exceeds
// the registry's MaxBodySize. It differs from DefaultDeadLetterReason so that operators
// can tell "too big" from "garbled" without reading descriptions.
const DefaultBodyTooLargeReason = "BodyTooLarge"

// DefaultMaxDescriptionLength is the default limit, in bytes, of the dead-letter error
// description. Service Bus keeps the reason and description as message properties, which
// share a limit of a few KiB per message, so 1 KiB leaves room for the rest.
const DefaultMaxDescriptionLength = 1024

// HandlerOption configures Handler and Middleware.
type HandlerOption func(*handlerConfig)

type handlerConfig struct {
	reason   string
	tooLarge string
	maxDesc  int
	onError  func(ctx context.Context, msg *azservicebus.ReceivedMessage, err error)
	logger   *slog.Logger
}

// WithDeadLetterReason sets the dead-letter reason for undecodable messages. Default
// DefaultDeadLetterReason; an empty reason keeps the default.
func WithDeadLetterReason(reason string) HandlerOption {
	return func(c *handlerConfig) {
		if reason != "" {
			c.reason = reason
		}
	}
}

// WithBodyTooLargeReason sets the dead-letter reason for bodies over the size limit.
// Default DefaultBodyTooLargeReason; an empty reason keeps the default.
func WithBodyTooLargeReason(reason string) HandlerOption {
	return func(c *handlerConfig) {
		if reason != "" {
			c.tooLarge = reason
		}
	}
}

// WithMaxDescriptionLength sets the byte limit of the dead-letter description. Default
// DefaultMaxDescriptionLength; n <= 0 keeps the default.
func WithMaxDescriptionLength(n int) HandlerOption {
	return func(c *handlerConfig) {
		if n > 0 {
			c.maxDesc = n
		}
	}
}

// OnDecodeError registers fn to be called, on the handler's goroutine, with every error
// that makes the handler dead-letter a message: a *DecodeError, or an error wrapping
// ErrBodyTooLarge or ErrUnsupportedBody. It must be fast; a panic in it is recovered and
// logged. Default none.
func OnDecodeError(fn func(ctx context.Context, msg *azservicebus.ReceivedMessage, err error)) HandlerOption {
	return func(c *handlerConfig) { c.onError = fn }
}

// WithLogger sets the logger that records dead-lettered messages (message ID, reason and
// the error; never the body) at Warn level. Default: discard.
func WithLogger(l *slog.Logger) HandlerOption {
	return func(c *handlerConfig) {
		if l != nil {
			c.logger = l
		}
	}
}

func newHandlerConfig(opts []HandlerOption) handlerConfig {
	c := handlerConfig{
		reason:   DefaultDeadLetterReason,
		tooLarge: DefaultBodyTooLargeReason,
		maxDesc:  DefaultMaxDescriptionLength,
		logger:   slog.New(slog.DiscardHandler),
	}
	for _, o := range opts {
		if o != nil {
			o(&c)
		}
	}
	return c
}

// Handler adapts a typed function to an sbkit.Handler. Each message is decoded into a new
// T with reg (see Registry.Decode) and passed to h with the message; h's result is the
// handler's result.
//
// A message that cannot be decoded is never passed to h: the handler returns
// sbkit.DeadLetter(reason, description, err) so that the processor dead-letters it at once
// instead of abandoning it until the broker's MaxDeliveryCount runs out. The reason is
// DefaultDeadLetterReason, or DefaultBodyTooLargeReason for a body over the size limit
// (see the options); the description names every attempt and is truncated to
// DefaultMaxDescriptionLength bytes; err (a *DecodeError, or an error wrapping
// ErrBodyTooLarge or ErrUnsupportedBody) is reachable with errors.As from the result and
// is passed to OnDecodeError.
//
// A nil reg or h is not a property of the message: every call then returns ErrNilRegistry
// or ErrNilHandler (which the processor treats as a failure and abandons), and a nil
// message returns sbkit.ErrNilMessage. The handler is safe for concurrent use when h is.
func Handler[T any](reg *Registry, h func(ctx context.Context, v T, msg *azservicebus.ReceivedMessage) error, opts ...HandlerOption) sbkit.Handler {
	cfg := newHandlerConfig(opts)
	return func(ctx context.Context, msg *azservicebus.ReceivedMessage) error {
		if h == nil {
			return ErrNilHandler
		}
		v, err := Decode[T](reg, msg)
		if err != nil {
			return cfg.failure(ctx, msg, err)
		}
		return h(ctx, v, msg)
	}
}

// Middleware decodes each message into a new T before next runs and stores the value in
// the context, where FromContext[T] finds it. Undecodable messages are dead-lettered
// exactly as by Handler, and next does not run. Options as for Handler.
func Middleware[T any](reg *Registry, opts ...HandlerOption) sbkit.Middleware {
	cfg := newHandlerConfig(opts)
	return func(next sbkit.Handler) sbkit.Handler {
		return func(ctx context.Context, msg *azservicebus.ReceivedMessage) error {
			if next == nil {
				return ErrNilHandler
			}
			v, err := Decode[T](reg, msg)
			if err != nil {
				return cfg.failure(ctx, msg, err)
			}
			return next(context.WithValue(ctx, valueKey[T]{}, v), msg)
		}
	}
}

type valueKey[T any] struct{}

// FromContext returns the value that Middleware[T] decoded for the current message, and
// whether there is one.
func FromContext[T any](ctx context.Context) (T, bool) {
	v, ok := ctx.Value(valueKey[T]{}).(T)
	return v, ok
}

// failure turns a decode error into the handler's result.
func (c *handlerConfig) failure(ctx context.Context, msg *azservicebus.ReceivedMessage, err error) error {
	var derr *DecodeError
	var reason, desc string
	switch {
	case errors.As(err, &derr):
		reason, desc = c.reason, derr.Description(c.maxDesc)
	case errors.Is(err, ErrBodyTooLarge):
		reason, desc = c.tooLarge, Truncate(err.Error(), c.maxDesc)
	case errors.Is(err, ErrUnsupportedBody):
		reason, desc = c.reason, Truncate(err.Error(), c.maxDesc)
	default:
		return err // a bad argument, not a bad message
	}
	c.logger.WarnContext(ctx, "serialize: dead-lettering undecodable message",
		"messageID", msg.MessageID, "reason", reason, "error", desc)
	c.notify(ctx, msg, err)
	return sbkit.DeadLetter(reason, desc, err)
}

func (c *handlerConfig) notify(ctx context.Context, msg *azservicebus.ReceivedMessage, err error) {
	if c.onError == nil {
		return
	}
	defer func() {
		if p := recover(); p != nil {
			c.logger.ErrorContext(ctx, "serialize: OnDecodeError hook panicked", "panic", fmt.Sprint(p))
		}
	}()
	c.onError(ctx, msg, err)
}
