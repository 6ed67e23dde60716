package serialize

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/sbkit/sbkit"
	ihooks "github.com/sbkit/sbkit/internal/hooks"
)

// DefaultDeadLetterReason is the dead-letter reason for a message that no decoder could
// read ([HandlerOptions.DeadLetterReason]).
const DefaultDeadLetterReason = "DeserializationFailed"

// DefaultBodyTooLargeReason is the dead-letter reason for a message whose body exceeds
// the registry's MaxBodySize. It differs from DefaultDeadLetterReason so that operators
// can tell "too big" from "garbled" without reading descriptions.
const DefaultBodyTooLargeReason = "BodyTooLarge"

// DefaultMaxDescriptionLength is the default limit, in bytes, of the dead-letter error
// description. Service Bus keeps the reason and description as message properties, which
// share a limit of a few KiB per message, so 1 KiB leaves room for the rest.
const DefaultMaxDescriptionLength = 1024

// HandlerOptions configures [Handler] and [Middleware]. nil options, and zero fields,
// mean the documented defaults.
type HandlerOptions struct {
	// DeadLetterReason is the dead-letter reason for undecodable messages.
	// Default (""): [DefaultDeadLetterReason].
	DeadLetterReason string
	// BodyTooLargeReason is the dead-letter reason for bodies over the registry's size
	// limit. Default (""): [DefaultBodyTooLargeReason].
	BodyTooLargeReason string
	// MaxDescriptionLength is the byte limit of the dead-letter description.
	// Default (0): [DefaultMaxDescriptionLength]; negative is an error (Service Bus
	// limits the size of a message's properties, so there is no "unlimited").
	MaxDescriptionLength int
	// Hooks observe every message the handler dead-letters because it cannot be
	// decoded: each implements [DecodeErrorHook] (see [Hook]), or the constructor fails.
	// Default: none.
	Hooks []Hook
	// Logger records dead-lettered messages (message ID, reason and the error; never
	// the body) at Warn level. Default: nil, which discards.
	Logger *slog.Logger
}

// Hook observes a handler's events (see [HandlerOptions.Hooks]). A Hook implements
// [DecodeErrorHook]; [Handler] and [Middleware] refuse a value that does not (an error
// wrapping [ErrInvalidOptions]), so that a misspelt method is not silently ignored. Hooks are called synchronously on
// the handler's goroutine, possibly concurrently: they must be fast. A panic in a hook
// is recovered and logged.
type Hook any

// DecodeErrorHook observes every message that a [Handler] or [Middleware] dead-letters
// because it cannot be decoded, just before the handler returns the dead-letter result.
type DecodeErrorHook interface {
	OnDecodeError(ctx context.Context, err *UndecodableError)
}

// UndecodableError is a message that a [Handler] or [Middleware] dead-letters because it
// cannot be decoded: the cause of the dead-letter result they return, and what the
// [DecodeErrorHook]s receive. It wraps why.
type UndecodableError struct {
	// Message is the delivery that could not be decoded.
	Message *azservicebus.ReceivedMessage
	// Err is why: a [*DecodeError], or an error wrapping [ErrBodyTooLarge] or
	// [ErrUnsupportedBody].
	Err error
	// Reason and Description are the dead-letter reason and (truncated) description.
	Reason, Description string
}

// Error names the message and the dead-letter reason, then why.
func (e *UndecodableError) Error() string {
	id := ""
	if e.Message != nil {
		id = e.Message.MessageID
	}
	return fmt.Sprintf("serialize: message %q dead-lettered (%s): %v", id, e.Reason, e.Err)
}

// Unwrap returns why.
func (e *UndecodableError) Unwrap() error { return e.Err }

// DecodeErrorHookFunc adapts a function to a [DecodeErrorHook].
type DecodeErrorHookFunc func(ctx context.Context, err *UndecodableError)

// OnDecodeError calls fn.
func (fn DecodeErrorHookFunc) OnDecodeError(ctx context.Context, err *UndecodableError) {
	fn(ctx, err)
}

type handlerConfig struct {
	reason   string
	tooLarge string
	maxDesc  int
	hooks    []DecodeErrorHook
	logger   *slog.Logger
}

func newHandlerConfig(reg *Registry, opts *HandlerOptions) (handlerConfig, error) {
	if reg == nil {
		return handlerConfig{}, ErrNilRegistry
	}
	var o HandlerOptions
	if opts != nil {
		o = *opts
	}
	if o.MaxDescriptionLength < 0 {
		return handlerConfig{}, fmt.Errorf("%w: negative MaxDescriptionLength %d", ErrInvalidOptions, o.MaxDescriptionLength)
	}
	isHook := func(x any) bool { _, ok := x.(DecodeErrorHook); return ok }
	if err := ihooks.Check(o.Hooks, isHook, "DecodeErrorHook"); err != nil {
		return handlerConfig{}, fmt.Errorf("%w: %w", ErrInvalidOptions, err)
	}
	c := handlerConfig{
		reason:   cmp.Or(o.DeadLetterReason, DefaultDeadLetterReason),
		tooLarge: cmp.Or(o.BodyTooLargeReason, DefaultBodyTooLargeReason),
		maxDesc:  cmp.Or(o.MaxDescriptionLength, DefaultMaxDescriptionLength),
		hooks:    ihooks.Select[DecodeErrorHook](o.Hooks),
		logger:   o.Logger,
	}
	if c.logger == nil {
		c.logger = slog.New(slog.DiscardHandler)
	}
	return c, nil
}

// Handler adapts a typed function to an [sbkit.Handler]. Each message is decoded into a
// new T with reg (see [Registry.Decode]) and passed to h with the message; h's result is
// the handler's result.
//
// A message that cannot be decoded is never passed to h: the handler returns
// [sbkit.DeadLetter](reason, description, err) so that the processor dead-letters it at
// once instead of abandoning it until the broker's MaxDeliveryCount runs out. The reason
// is [DefaultDeadLetterReason], or [DefaultBodyTooLargeReason] for a body over the size
// limit (see [HandlerOptions]); the description names every attempt and is truncated to
// [DefaultMaxDescriptionLength] bytes; the result's cause is an [*UndecodableError],
// which the [DecodeErrorHook]s receive too, and which wraps why (a [*DecodeError], or an
// error wrapping [ErrBodyTooLarge] or [ErrUnsupportedBody]): [errors.As] reaches each. A nil message returns [sbkit.ErrNilMessage].
//
// A nil reg fails here with [ErrNilRegistry], a nil h with an error wrapping
// [sbkit.ErrNilHandler], and bad options with one wrapping [ErrInvalidOptions]; nil
// options mean defaults. The handler is safe for concurrent use when h is.
func Handler[T any](reg *Registry, h func(ctx context.Context, v T, msg *azservicebus.ReceivedMessage) error, opts *HandlerOptions) (sbkit.Handler, error) {
	if h == nil {
		return nil, fmt.Errorf("serialize: nil handler function: %w", sbkit.ErrNilHandler)
	}
	cfg, err := newHandlerConfig(reg, opts)
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context, msg *azservicebus.ReceivedMessage) error {
		v, err := Decode[T](reg, msg)
		if err != nil {
			return cfg.failure(ctx, msg, err)
		}
		return h(ctx, v, msg)
	}, nil
}

// Middleware decodes each message into a new T before next runs and stores the value in
// the context, where [ValueFrom][T] finds it. Undecodable messages are dead-lettered
// exactly as by [Handler], and next does not run. Errors and options as for Handler;
// the middleware panics with an error wrapping [sbkit.ErrNilHandler] when it is applied
// to a nil next (a programming error, found when the chain is built).
func Middleware[T any](reg *Registry, opts *HandlerOptions) (sbkit.Middleware, error) {
	cfg, err := newHandlerConfig(reg, opts)
	if err != nil {
		return nil, err
	}
	return func(next sbkit.Handler) sbkit.Handler {
		if next == nil {
			panic(fmt.Errorf("serialize: Middleware: %w", sbkit.ErrNilHandler))
		}
		return func(ctx context.Context, msg *azservicebus.ReceivedMessage) error {
			v, err := Decode[T](reg, msg)
			if err != nil {
				return cfg.failure(ctx, msg, err)
			}
			return next(context.WithValue(ctx, valueKey[T]{}, v), msg)
		}
	}, nil
}

type valueKey[T any] struct{}

// ValueFrom returns the value that Middleware[T] decoded for the current message, and
// whether there is one.
func ValueFrom[T any](ctx context.Context) (T, bool) {
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
		reason, desc = c.tooLarge, truncate(err.Error(), c.maxDesc)
	case errors.Is(err, ErrUnsupportedBody):
		reason, desc = c.reason, truncate(err.Error(), c.maxDesc)
	default:
		return err // a bad argument, not a bad message
	}
	c.logger.WarnContext(ctx, "serialize: dead-lettering undecodable message",
		"messageID", msg.MessageID, "reason", reason, "error", desc)
	uerr := &UndecodableError{Message: msg, Err: err, Reason: reason, Description: desc}
	c.notify(ctx, uerr)
	return sbkit.DeadLetter(reason, desc, uerr)
}

func (c *handlerConfig) notify(ctx context.Context, e *UndecodableError) {
	ihooks.Call(ctx, c.logger, "serialize", "DecodeErrorHook", c.hooks, func(h DecodeErrorHook) { h.OnDecodeError(ctx, e) })
}
