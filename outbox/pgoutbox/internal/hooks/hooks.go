// Package hooks implements sbkit's hook convention once: a package's Options.Hooks is a
// []Hook (type Hook any), and each hook implements any of the package's small optional
// interfaces. Check refuses a hook that implements none of them (a misspelt method or
// an outdated signature would otherwise be ignored silently); Select picks the hooks
// that implement one interface; Call runs them, recovering and logging a panic in any
// of them.
//
// The nested modules with hooks (dedupe/pgdedupe, outbox/pgoutbox) hold byte-identical
// copies of this package in their own internal directories: a module never imports
// another module's internal packages, which carry no compatibility promise across
// versions. Edit the core's files (internal/hooks) and copy them over;
// TestInternalCopies, in the core's root package, checks that the copies agree.
package hooks

import (
	"context"
	"fmt"
	"log/slog"
)

// Check returns an error naming the first element of hs that is nil or for which
// implements is false, and the interfaces it could implement (names), or nil when every
// element implements one. Constructors wrap it with their ErrInvalidOptions.
func Check[T any](hs []T, implements func(any) bool, names string) error {
	for i, x := range hs {
		switch {
		case any(x) == nil:
			return fmt.Errorf("hook %d of Options.Hooks is nil", i)
		case !implements(x):
			return fmt.Errorf("hook %d of Options.Hooks (%T) implements none of %s: check its methods' names and signatures", i, x, names)
		}
	}
	return nil
}

// Select returns the elements of hs that implement H, in order. T is the package's Hook
// type (any).
func Select[H, T any](hs []T) []H {
	var out []H
	for _, x := range hs {
		if h, ok := any(x).(H); ok {
			out = append(out, h)
		}
	}
	return out
}

// Call calls on for each of hs, on the caller's goroutine. A panic in a hook is
// recovered and logged on log (as "<prefix>: recovered panic in <name>") and the next
// hook still runs.
func Call[H any](ctx context.Context, log *slog.Logger, prefix, name string, hs []H, on func(H)) {
	for _, h := range hs {
		func() {
			defer func() {
				if p := recover(); p != nil {
					log.ErrorContext(ctx, prefix+": recovered panic in "+name, "panic", fmt.Sprint(p))
				}
			}()
			on(h)
		}()
	}
}
