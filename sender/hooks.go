package sender

import (
	"context"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	ihooks "github.com/sbkit/sbkit/internal/hooks"
)

// Hook observes a Sender's events. A Hook implements any of [SendStartHook],
// [SendResultHook], [SendRetryHook] and [SendBatchHook]; [New] refuses a value that
// implements none (an error wrapping [ErrInvalidOptions]), so that a misspelt method is
// not silently ignored. Hooks are called synchronously, in the order of
// [Options.Hooks], possibly from many goroutines at once: they must be fast, must not
// block and must not call the Sender's Flush or Close (which wait for the message being
// reported). A panic in a hook is recovered and logged.
type Hook any

// SendStartHook sees every non-nil message given to [Sender.Send], [Sender.SendAsync],
// [Sender.TrySend], [Sender.SendAll] or [Sender.Schedule], before the Sender accepts it,
// on the caller's goroutine and with the caller's ctx. The message already has its
// MessageID. The hook may modify the message, for example to inject trace context into
// its ApplicationProperties: the Sender measures its size afterwards. Every message a
// SendStartHook saw gets exactly one [SendResult].
//
// OnSendStart returns the context the message is sent with: ctx itself, or one derived
// from it (for example carrying a trace span); nil means ctx. Start hooks are chained in
// order, each given the previous one's context, and the last one is the message's
// context from then on: it bounds the wait for room and the message (see the package
// documentation), and the message's [SendRetryHook] and [SendResultHook] calls get it.
type SendStartHook interface {
	OnSendStart(ctx context.Context, e SendStart) context.Context
}

// SendStartHookFunc adapts a function to a [SendStartHook].
type SendStartHookFunc func(ctx context.Context, e SendStart) context.Context

// OnSendStart calls f.
func (f SendStartHookFunc) OnSendStart(ctx context.Context, e SendStart) context.Context {
	return f(ctx, e)
}

// SendStart is the event of [SendStartHook].
type SendStart struct {
	// Message is the message about to be accepted.
	Message *azservicebus.Message
}

// SendResultHook sees the outcome of every message a [SendStartHook] saw, exactly once:
// the broker accepted it, or it failed, or it was not accepted at all (window full,
// Sender closed, ctx ended; then Attempts is 0 and the caller also got the error). For
// an accepted message it runs before the message's [Result] completes, on the goroutine
// that learnt the outcome; ctx is the context the message was sent with.
type SendResultHook interface {
	OnSendResult(ctx context.Context, e SendResult)
}

// SendResult is the event of [SendResultHook].
type SendResult struct {
	// Message is the message.
	Message *azservicebus.Message
	// MessageID is the message's ID.
	MessageID string
	// Attempts is how many requests carried the message; 0 when it was never sent.
	Attempts int
	// Duration is the time from acceptance to the outcome; 0 when it was not accepted.
	Duration time.Duration
	// Rejected is true when the message was not accepted (window full, Sender closed, ctx
	// ended before acceptance): it counts in [Stats.Rejected], not in Sent or Failed.
	Rejected bool
	// Err is nil when the broker accepted the message, a *[SendError] otherwise.
	Err error
}

// SendResultHookFunc adapts a function to a [SendResultHook]: the common case of one
// result callback, as in Options{Hooks: []Hook{sender.SendResultHookFunc(f)}}.
type SendResultHookFunc func(ctx context.Context, e SendResult)

// OnSendResult calls f.
func (f SendResultHookFunc) OnSendResult(ctx context.Context, e SendResult) { f(ctx, e) }

// SendRetryHook sees every retry of every message, before the delay: a batch of n
// messages that is retried calls it n times. ctx is the context the message was sent
// with.
type SendRetryHook interface {
	OnSendRetry(ctx context.Context, e SendRetry)
}

// SendRetryHookFunc adapts a function to a [SendRetryHook].
type SendRetryHookFunc func(ctx context.Context, e SendRetry)

// OnSendRetry calls f.
func (f SendRetryHookFunc) OnSendRetry(ctx context.Context, e SendRetry) { f(ctx, e) }

// SendRetry is the event of [SendRetryHook].
type SendRetry struct {
	// Message is the message that will be retried.
	Message *azservicebus.Message
	// MessageID is the message's ID.
	MessageID string
	// Attempt is the number of the attempt that failed, from 1.
	Attempt int
	// Messages is how many messages the failed request carried (1 when not batched).
	Messages int
	// Delay is the wait before the next attempt.
	Delay time.Duration
	// Err is the transient error of the failed attempt.
	Err error
}

// SendBatchHook sees every batch request, once it has ended. A batch carries messages of
// many callers, so ctx is the Sender's own context, which carries no caller's values and
// ends when Close gives up waiting.
type SendBatchHook interface {
	OnSendBatch(ctx context.Context, e SendBatch)
}

// SendBatchHookFunc adapts a function to a [SendBatchHook].
type SendBatchHookFunc func(ctx context.Context, e SendBatch)

// OnSendBatch calls f.
func (f SendBatchHookFunc) OnSendBatch(ctx context.Context, e SendBatch) { f(ctx, e) }

// SendBatch is the event of [SendBatchHook].
type SendBatch struct {
	// Messages is how many messages the batch carried.
	Messages int
	// Bytes is the batch's size as the SDK measured it ([azservicebus.MessageBatch.NumBytes]).
	Bytes int64
	// Duration is how long the request took.
	Duration time.Duration
	// Err is the request's error; nil when the broker accepted the batch.
	Err error
}

// hooks holds a Sender's hooks by interface.
type hooks struct {
	start  []SendStartHook
	result []SendResultHook
	retry  []SendRetryHook
	batch  []SendBatchHook
}

// hookNames are the interfaces a [Hook] may implement, for errors.
const hookNames = "SendStartHook, SendResultHook, SendRetryHook, SendBatchHook"

// isHook reports whether x implements one of the interfaces of hookNames.
func isHook(x any) bool {
	switch x.(type) {
	case SendStartHook, SendResultHook, SendRetryHook, SendBatchHook:
		return true
	}
	return false
}

// newHooks sorts hs by interface; New has checked them with isHook.
func newHooks(hs []Hook) hooks {
	return hooks{
		start:  ihooks.Select[SendStartHook](hs),
		result: ihooks.Select[SendResultHook](hs),
		retry:  ihooks.Select[SendRetryHook](hs),
		batch:  ihooks.Select[SendBatchHook](hs),
	}
}
