package locks

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	ihooks "github.com/sbkit/sbkit/internal/hooks"
)

// Hook observes an Engine's events. A Hook implements any of [RenewHook],
// [RenewErrorHook] and [LockLostHook]; [New] refuses a value that implements none (an
// error wrapping [ErrInvalidOptions]), so that a misspelt method is not silently
// ignored. Hooks
// are called synchronously on the engine's goroutines, possibly concurrently, with the
// context given to [Engine.Add]: they must be fast, must not block and must not call
// [Lock.Release]. A panic in a hook is recovered and logged.
type Hook any

// hookNames are the interfaces a [Hook] may implement, for errors.
const hookNames = "RenewHook, RenewErrorHook, LockLostHook"

// isHook reports whether x implements one of the interfaces of hookNames.
func isHook(x any) bool {
	switch x.(type) {
	case RenewHook, RenewErrorHook, LockLostHook:
		return true
	}
	return false
}

// RenewHook observes every successful renewal.
type RenewHook interface {
	OnRenew(ctx context.Context, e Renewal)
}

// RenewHookFunc adapts a function to a [RenewHook].
type RenewHookFunc func(ctx context.Context, e Renewal)

// OnRenew calls f.
func (f RenewHookFunc) OnRenew(ctx context.Context, e Renewal) { f(ctx, e) }

// Renewal is a successful renewal of a message's lock.
type Renewal struct {
	// Message is the message whose lock was renewed. Do not read its LockedUntil.
	Message *azservicebus.ReceivedMessage
	// SessionID is the session of a session lock (Message is nil then); "" otherwise.
	SessionID string
	// LockedUntil is the new expiry.
	LockedUntil time.Time
	// Renewals is how many times the lock was renewed, this one included.
	Renewals int
	// Duration is how long the renewal call took.
	Duration time.Duration
}

// RenewErrorHook observes every failed renewal attempt.
type RenewErrorHook interface {
	OnRenewError(ctx context.Context, err *RenewError)
}

// RenewErrorHookFunc adapts a function to a [RenewErrorHook].
type RenewErrorHookFunc func(ctx context.Context, err *RenewError)

// OnRenewError calls f.
func (f RenewErrorHookFunc) OnRenewError(ctx context.Context, err *RenewError) { f(ctx, err) }

// RenewError is one failed renewal attempt, as a [RenewErrorHook] receives it. It wraps
// the renewal's error.
type RenewError struct {
	// Message is the message whose lock could not be renewed. Do not read its LockedUntil.
	Message *azservicebus.ReceivedMessage
	// SessionID is the session of a session lock (Message is nil then); "" otherwise.
	SessionID string
	// Err is the renewal's error.
	Err error
	// Attempt counts the consecutive failed attempts for this lock, from 1.
	Attempt int
	// WillRetry is true when another attempt is scheduled; false when the lock is (or
	// will be, at its expiry) reported lost.
	WillRetry bool
	// Duration is how long the renewal call took.
	Duration time.Duration
}

// Error names the lock and the attempt, then the renewal's error.
func (e *RenewError) Error() string {
	what := "message lock"
	switch {
	case e.SessionID != "":
		what = "lock of session " + strconv.Quote(e.SessionID)
	case e.Message != nil && e.Message.MessageID != "":
		what = "lock of message " + strconv.Quote(e.Message.MessageID)
	}
	return "locks: renewing the " + what + " failed (attempt " + strconv.Itoa(e.Attempt) + "): " + fmt.Sprint(e.Err)
}

// Unwrap returns the renewal's error.
func (e *RenewError) Unwrap() error { return e.Err }

// LockLostHook observes every lost lock, once per lock.
type LockLostHook interface {
	OnLockLost(ctx context.Context, e LockLoss)
}

// LockLostHookFunc adapts a function to a [LockLostHook].
type LockLostHookFunc func(ctx context.Context, e LockLoss)

// OnLockLost calls f.
func (f LockLostHookFunc) OnLockLost(ctx context.Context, e LockLoss) { f(ctx, e) }

// LockLoss is a lost lock.
type LockLoss struct {
	// Message is the message whose lock was lost.
	Message *azservicebus.ReceivedMessage
	// SessionID is the session of a session lock (Message is nil then); "" otherwise.
	SessionID string
	// Cause says why; errors.Is(Cause, [sbkit.ErrLockLost]) is true.
	Cause *LostError
}

// hooks are an engine's hooks sorted by interface.
type hooks struct {
	renew  []RenewHook
	errs   []RenewErrorHook
	lost   []LockLostHook
	logger *slog.Logger
}

func newHooks(hs []Hook, logger *slog.Logger) hooks {
	return hooks{
		renew:  ihooks.Select[RenewHook](hs),
		errs:   ihooks.Select[RenewErrorHook](hs),
		lost:   ihooks.Select[LockLostHook](hs),
		logger: logger,
	}
}

func (h *hooks) onRenew(ctx context.Context, e Renewal) {
	ihooks.Call(ctx, h.logger, "locks", "RenewHook", h.renew, func(x RenewHook) { x.OnRenew(ctx, e) })
}

func (h *hooks) onRenewError(ctx context.Context, e *RenewError) {
	ihooks.Call(ctx, h.logger, "locks", "RenewErrorHook", h.errs, func(x RenewErrorHook) { x.OnRenewError(ctx, e) })
}

func (h *hooks) onLockLost(ctx context.Context, e LockLoss) {
	ihooks.Call(ctx, h.logger, "locks", "LockLostHook", h.lost, func(x LockLostHook) { x.OnLockLost(ctx, e) })
}
