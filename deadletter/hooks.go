package deadletter

import (
	"context"
	"log/slog"

	ihooks "github.com/sbkit/sbkit/internal/hooks"
)

// Hook observes an operation's progress. A Hook implements [ProgressHook]; an operation
// refuses a value that does not (an error wrapping [ErrInvalidOptions]), so that a
// misspelt method is not silently ignored. Hooks are called on the operation's
// goroutine: they must be fast. A panic in a hook is recovered and logged.
type Hook any

// ProgressHook sees the operation's [Stats] after each batch of messages it received or
// peeked, and once more when it ends (then Stopped is set).
type ProgressHook interface {
	OnProgress(ctx context.Context, s Stats)
}

// ProgressHookFunc adapts a function to a [ProgressHook].
type ProgressHookFunc func(ctx context.Context, s Stats)

// OnProgress calls f.
func (f ProgressHookFunc) OnProgress(ctx context.Context, s Stats) { f(ctx, s) }

func isHook(h any) bool { _, ok := h.(ProgressHook); return ok }

type progress struct {
	hooks  []ProgressHook
	logger *slog.Logger
}

func newProgress(hs []Hook, logger *slog.Logger) (progress, error) {
	if err := ihooks.Check(hs, isHook, "ProgressHook"); err != nil {
		return progress{}, err
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return progress{hooks: ihooks.Select[ProgressHook](hs), logger: logger}, nil
}

func (p progress) report(ctx context.Context, s Stats) {
	ihooks.Call(ctx, p.logger, "deadletter", "ProgressHook", p.hooks, func(h ProgressHook) { h.OnProgress(ctx, s) })
}
