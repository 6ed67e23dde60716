package dedupe

import (
	"context"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	ihooks "github.com/sbkit/sbkit/internal/hooks"
)

// Hook observes a [Filter]'s events (see [Options.Hooks]). A Hook implements any of
// [FreshHook], [DuplicateHook], [ContendedHook], [LeaseLostHook] and [StoreErrorHook];
// [New] refuses a value that implements none (an error wrapping [ErrInvalidOptions]), so
// that a misspelt method is not silently ignored. Hooks are called synchronously, on the
// handler's goroutine (a lease refresh's on a timer's goroutine), possibly concurrently:
// they must be fast and must not block. A panic in a hook is recovered and logged.
type Hook any

// hookNames are the interfaces a [Hook] may implement, for errors.
const hookNames = "FreshHook, DuplicateHook, ContendedHook, LeaseLostHook, StoreErrorHook"

// isHook reports whether x implements one of the interfaces of hookNames.
func isHook(x any) bool {
	switch x.(type) {
	case FreshHook, DuplicateHook, ContendedHook, LeaseLostHook, StoreErrorHook:
		return true
	}
	return false
}

// FreshHook observes every delivery whose key was free: the lease is taken and the
// handler is about to run.
type FreshHook interface {
	OnFresh(ctx context.Context, e Fresh)
}

// FreshHookFunc adapts a function to a [FreshHook].
type FreshHookFunc func(ctx context.Context, e Fresh)

// OnFresh calls f.
func (f FreshHookFunc) OnFresh(ctx context.Context, e Fresh) { f(ctx, e) }

// DuplicateHook observes every delivery skipped because its key is done.
type DuplicateHook interface {
	OnDuplicate(ctx context.Context, e Duplicate)
}

// ContendedHook observes every delivery that found its key leased by another owner, once,
// before it waits ([ContendedWait]) or is abandoned ([ContendedAbandon]). The delivery's
// outcome follows as a [Fresh] or [Duplicate] event, or as an abandon wrapping
// [ErrLeaseHeld].
type ContendedHook interface {
	OnContended(ctx context.Context, e Contended)
}

// ContendedHookFunc adapts a function to a [ContendedHook].
type ContendedHookFunc func(ctx context.Context, e Contended)

// OnContended calls f.
func (f ContendedHookFunc) OnContended(ctx context.Context, e Contended) { f(ctx, e) }

// LeaseLostHook observes every running handler whose lease was lost, just before its
// context is cancelled with e.Cause.
type LeaseLostHook interface {
	OnLeaseLost(ctx context.Context, e LeaseLost)
}

// LeaseLostHookFunc adapts a function to a [LeaseLostHook].
type LeaseLostHookFunc func(ctx context.Context, e LeaseLost)

// OnLeaseLost calls f.
func (f LeaseLostHookFunc) OnLeaseLost(ctx context.Context, e LeaseLost) { f(ctx, e) }

// StoreErrorHook observes every failed store call, retried or not. A failed
// [OpMarkDone] after a successful handler is reported only here (and in
// [Stats.MarkDoneErrors]): the delivery is still completed.
type StoreErrorHook interface {
	OnStoreError(ctx context.Context, err *StoreError)
}

// Fresh is the event of [FreshHook].
type Fresh struct {
	Key     string                        // the message's key
	Message *azservicebus.ReceivedMessage // the delivery
	// Waited is how long the delivery was held before the lease was taken (waiting for
	// another owner's lease, or for the store to answer); zero when it was taken at once.
	Waited time.Duration
}

// Duplicate is the event of [DuplicateHook].
type Duplicate struct {
	Key     string                        // the message's key
	Message *azservicebus.ReceivedMessage // the delivery
	// Waited is as in [Fresh].
	Waited time.Duration
}

// Contended is the event of [ContendedHook].
type Contended struct {
	Key     string                        // the message's key
	Message *azservicebus.ReceivedMessage // the delivery
	// Policy is what the delivery does now: wait, or abandon at once.
	Policy ContendedPolicy
}

// LeaseLost is the event of [LeaseLostHook].
type LeaseLost struct {
	Key     string                        // the message's key
	Message *azservicebus.ReceivedMessage // the delivery
	// Cause wraps [ErrLeaseLost] and says why: the key was found taken, or no refresh
	// succeeded within [Options.LeaseTTL] (with the last store error).
	Cause error
	// Held is how long the handler had run under the lease.
	Held time.Duration
}

// DuplicateHookFunc adapts a function to a [DuplicateHook].
type DuplicateHookFunc func(ctx context.Context, e Duplicate)

// OnDuplicate calls fn.
func (fn DuplicateHookFunc) OnDuplicate(ctx context.Context, e Duplicate) { fn(ctx, e) }

// StoreErrorHookFunc adapts a function to a [StoreErrorHook].
type StoreErrorHookFunc func(ctx context.Context, err *StoreError)

// OnStoreError calls fn.
func (fn StoreErrorHookFunc) OnStoreError(ctx context.Context, err *StoreError) { fn(ctx, err) }

// hooks are Options.Hooks sorted by interface.
type hooks struct {
	fresh      []FreshHook
	duplicate  []DuplicateHook
	contended  []ContendedHook
	leaseLost  []LeaseLostHook
	storeError []StoreErrorHook
}

func newHooks(hs []Hook) hooks {
	return hooks{
		fresh:      ihooks.Select[FreshHook](hs),
		duplicate:  ihooks.Select[DuplicateHook](hs),
		contended:  ihooks.Select[ContendedHook](hs),
		leaseLost:  ihooks.Select[LeaseLostHook](hs),
		storeError: ihooks.Select[StoreErrorHook](hs),
	}
}

// callHooks calls on for each hook, recovering and logging a panic in any of them.
func callHooks[H any](f *Filter, ctx context.Context, name string, hs []H, on func(H)) {
	ihooks.Call(ctx, f.o.Logger, "dedupe", name, hs, on)
}
