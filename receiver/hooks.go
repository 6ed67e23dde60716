package receiver

import (
	"context"
	"log/slog"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/sbkit/sbkit"
	ihooks "github.com/sbkit/sbkit/internal/hooks"
	"github.com/sbkit/sbkit/locks"
)

// Hook observes a Processor's events. A Hook implements any of [ReceiveHook],
// [HandlerStartHook], [HandlerEndHook], [SettleHook] and [ErrorHook] (and of the lock
// engine's hooks, see [Options.Hooks]); [New] and [NewSessionProcessor] refuse a value that
// implements none (an error wrapping [ErrInvalidOptions]), so that a misspelt method is
// not silently ignored. Hooks are called synchronously on the processor's goroutines,
// possibly concurrently: they must be fast, must not block and must not call
// [Processor.Close]. A panic in a hook is recovered and logged.
type Hook any

// hookNames are the interfaces a [Hook] may implement, for errors.
const hookNames = "ReceiveHook, HandlerStartHook, HandlerEndHook, SettleHook, ErrorHook, locks.RenewHook, locks.RenewErrorHook, locks.LockLostHook"

// isHook reports whether x implements one of the interfaces of hookNames.
func isHook(x any) bool {
	switch x.(type) {
	case ReceiveHook, HandlerStartHook, HandlerEndHook, SettleHook, ErrorHook,
		locks.RenewHook, locks.RenewErrorHook, locks.LockLostHook:
		return true
	}
	return false
}

// isLockHook reports whether x implements one of the lock engine's hook interfaces.
func isLockHook(x any) bool {
	switch x.(type) {
	case locks.RenewHook, locks.RenewErrorHook, locks.LockLostHook:
		return true
	}
	return false
}

// ReceiveHook observes every ReceiveMessages call. ctx carries Run's context's values.
type ReceiveHook interface {
	OnReceive(ctx context.Context, e ReceiveCall)
}

// ReceiveHookFunc adapts a function to a [ReceiveHook].
type ReceiveHookFunc func(ctx context.Context, e ReceiveCall)

// OnReceive calls f.
func (f ReceiveHookFunc) OnReceive(ctx context.Context, e ReceiveCall) { f(ctx, e) }

// ReceiveCall is one ReceiveMessages call.
type ReceiveCall struct {
	// Requested is how many messages the call asked for.
	Requested int
	// Received is how many it returned.
	Received int
	// Err is the call's error, nil on success.
	Err error
	// Duration is how long the call took.
	Duration time.Duration
}

// HandlerStartHook observes each handler call before it starts. It returns the context
// the handler runs with: ctx itself, or one derived from it (for example with a trace
// span); nil means ctx. Start hooks are chained in order, each given the previous one's
// context, and the [HandlerEndHook]s and [SettleHook]s of the message get the last one.
type HandlerStartHook interface {
	OnHandlerStart(ctx context.Context, e HandlerStart) context.Context
}

// HandlerStartHookFunc adapts a function to a [HandlerStartHook].
type HandlerStartHookFunc func(ctx context.Context, e HandlerStart) context.Context

// OnHandlerStart calls f.
func (f HandlerStartHookFunc) OnHandlerStart(ctx context.Context, e HandlerStart) context.Context {
	return f(ctx, e)
}

// HandlerStart is a handler call about to start.
type HandlerStart struct {
	// Message is the message handed to the handler.
	Message *azservicebus.ReceivedMessage
}

// HandlerEndHook observes each handler call after it returned (or panicked).
type HandlerEndHook interface {
	OnHandlerEnd(ctx context.Context, e HandlerEnd)
}

// HandlerEndHookFunc adapts a function to a [HandlerEndHook].
type HandlerEndHookFunc func(ctx context.Context, e HandlerEnd)

// OnHandlerEnd calls f.
func (f HandlerEndHookFunc) OnHandlerEnd(ctx context.Context, e HandlerEnd) { f(ctx, e) }

// HandlerEnd is a handler call that returned.
type HandlerEnd struct {
	// Message is the message the handler was given.
	Message *azservicebus.ReceivedMessage
	// Err is the handler's result; a recovered panic is a [*PanicError].
	Err error
	// Action is the settlement the result asks for ([sbkit.SettlementOf]).
	Action sbkit.Action
	// Duration is how long the handler ran.
	Duration time.Duration
}

// SettleHook observes every settlement the processor makes, once per message, after its
// last attempt (a handler's own settlements through [SettlerFrom] included).
type SettleHook interface {
	OnSettle(ctx context.Context, e Settlement)
}

// SettleHookFunc adapts a function to a [SettleHook].
type SettleHookFunc func(ctx context.Context, e Settlement)

// OnSettle calls f.
func (f SettleHookFunc) OnSettle(ctx context.Context, e Settlement) { f(ctx, e) }

// Settlement is the outcome of settling one message.
type Settlement struct {
	// Message is the settled message. Do not read its LockedUntil field.
	Message *azservicebus.ReceivedMessage
	// Action is the settlement made.
	Action sbkit.Action
	// DeadLetterReason is the reason given, for [sbkit.ActionDeadLetter].
	DeadLetterReason string
	// Err is nil when the broker accepted the settlement, else the last error (the
	// message then counts as LocksLost or LeftLocked, see [Stats]).
	Err error
	// Attempts is how many settlement calls were made.
	Attempts int
	// Duration is how long the settlement took, retries included.
	Duration time.Duration
}

// ErrorHook observes every error the processor reports, with its source, like .NET's
// ProcessErrorAsync.
type ErrorHook interface {
	OnError(ctx context.Context, err *Error)
}

// ErrorHookFunc adapts a function to an [ErrorHook]: the common case of one error
// callback, as in Hooks: []receiver.Hook{receiver.ErrorHookFunc(f)}.
type ErrorHookFunc func(ctx context.Context, err *Error)

// OnError calls f(ctx, err).
func (f ErrorHookFunc) OnError(ctx context.Context, err *Error) { f(ctx, err) }

// hooks are a processor's hooks sorted by interface.
type hooks struct {
	receive []ReceiveHook
	start   []HandlerStartHook
	end     []HandlerEndHook
	settle  []SettleHook
	errs    []ErrorHook
	logger  *slog.Logger
}

func newHooks(hs []Hook, logger *slog.Logger) hooks {
	return hooks{
		receive: ihooks.Select[ReceiveHook](hs),
		start:   ihooks.Select[HandlerStartHook](hs),
		end:     ihooks.Select[HandlerEndHook](hs),
		settle:  ihooks.Select[SettleHook](hs),
		errs:    ihooks.Select[ErrorHook](hs),
		logger:  logger,
	}
}

func (h *hooks) onReceive(ctx context.Context, e ReceiveCall) {
	ihooks.Call(ctx, h.logger, "receiver", "ReceiveHook", h.receive, func(x ReceiveHook) { x.OnReceive(ctx, e) })
}

func (h *hooks) onHandlerStart(ctx context.Context, e HandlerStart) context.Context {
	ihooks.Call(ctx, h.logger, "receiver", "HandlerStartHook", h.start, func(x HandlerStartHook) {
		if next := x.OnHandlerStart(ctx, e); next != nil {
			ctx = next
		}
	})
	return ctx
}

func (h *hooks) onHandlerEnd(ctx context.Context, e HandlerEnd) {
	ihooks.Call(ctx, h.logger, "receiver", "HandlerEndHook", h.end, func(x HandlerEndHook) { x.OnHandlerEnd(ctx, e) })
}

func (h *hooks) onSettle(ctx context.Context, e Settlement) {
	ihooks.Call(ctx, h.logger, "receiver", "SettleHook", h.settle, func(x SettleHook) { x.OnSettle(ctx, e) })
}

func (h *hooks) onError(ctx context.Context, e *Error) {
	ihooks.Call(ctx, h.logger, "receiver", "ErrorHook", h.errs, func(x ErrorHook) { x.OnError(ctx, e) })
}
