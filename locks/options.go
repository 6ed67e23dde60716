package locks

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/sbkit/sbkit"
	ihooks "github.com/sbkit/sbkit/internal/hooks"
	"github.com/sbkit/sbkit/internal/retry"
)

const (
	// DefaultMaxAutoLockRenewalDuration is how long a lock is renewed when
	// [Options.MaxAutoLockRenewalDuration] is zero: 5 minutes, as in the other Service Bus
	// SDKs.
	DefaultMaxAutoLockRenewalDuration = 5 * time.Minute
	// DefaultMaxMargin caps how long before LockedUntil a renewal is made.
	DefaultMaxMargin = 10 * time.Second
	// DefaultWorkers is the most renewal calls in flight at once when [Options.Workers]
	// is zero: 256, so that a burst of locks due together (a receive call's messages are
	// locked at the same moment) does not queue behind a few calls. At a 100 ms round
	// trip that renews 2,560 locks a second, 1,000 due at once within 0.4 s, well within
	// the margin of the shortest lock the service allows (5 s, renewed 1.7 s early).
	DefaultWorkers = 256
)

// Options configure an Engine. The zero value (and a nil *Options) means the defaults.
type Options struct {
	// MaxAutoLockRenewalDuration bounds how long after Add a lock keeps being renewed.
	// Default (zero) DefaultMaxAutoLockRenewalDuration (5 min); negative renews without a
	// bound. When the bound is reached the lock is left to expire and is then reported
	// lost with ReasonLimit.
	MaxAutoLockRenewalDuration time.Duration
	// MaxMargin caps the margin before LockedUntil at which a renewal is due. The margin is
	// a third of the observed lock duration, at most MaxMargin. Default DefaultMaxMargin
	// (10 s); negative is an error.
	MaxMargin time.Duration
	// Workers caps the renewal calls in flight at once. Each call waits for the broker's
	// answer on a goroutine of its own, started when the renewal comes due and ended once
	// idle (after a second without work), so an engine with no renewal due has none;
	// renewals due beyond the cap wait for a call to finish. Default DefaultWorkers
	// (256); negative is an error.
	Workers int
	// Retry is the policy for one lock's failed renewals (any error but a lost lock or a
	// permanent one). Default: MaxRetries without bound, RetryDelay 250 ms, MaxRetryDelay
	// 5 s. Retries stop anyway when the lock expires, which is then reported lost.
	Retry sbkit.RetryOptions
	// Hooks observe renewals, renewal errors and lost locks: each element implements any
	// of [RenewHook], [RenewErrorHook] and [LockLostHook]; one that implements none is
	// an error. Default none.
	Hooks []Hook
	// Logger receives debug records of renewals and warnings of losses. Default: discard.
	Logger *slog.Logger
}

// defaultRetry is the engine's retry policy when Options.Retry is zero.
var defaultRetry = retry.Policy{MaxRetries: retry.Unlimited, RetryDelay: 250 * time.Millisecond, MaxRetryDelay: 5 * time.Second}

type config struct {
	limit     time.Duration // <0 unlimited
	maxMargin time.Duration
	workers   int
	retry     retry.Policy
	hooks     hooks
	logger    *slog.Logger
}

func newConfig(o *Options) (config, error) {
	if o == nil {
		o = &Options{}
	}
	c := config{
		limit:     o.MaxAutoLockRenewalDuration,
		maxMargin: o.MaxMargin,
		workers:   o.Workers,
		retry:     retry.Resolve(o.Retry, defaultRetry),
		logger:    o.Logger,
	}
	if c.limit == 0 {
		c.limit = DefaultMaxAutoLockRenewalDuration
	}
	switch {
	case c.maxMargin < 0:
		return c, fmt.Errorf("%w: negative MaxMargin %v", ErrInvalidOptions, c.maxMargin)
	case c.maxMargin == 0:
		c.maxMargin = DefaultMaxMargin
	}
	switch {
	case c.workers < 0:
		return c, fmt.Errorf("%w: negative Workers %d", ErrInvalidOptions, c.workers)
	case c.workers == 0:
		c.workers = DefaultWorkers
	}
	if c.logger == nil {
		c.logger = slog.New(slog.DiscardHandler)
	}
	if err := ihooks.Check(o.Hooks, isHook, hookNames); err != nil {
		return c, fmt.Errorf("%w: %w", ErrInvalidOptions, err)
	}
	c.hooks = newHooks(o.Hooks, c.logger)
	return c, nil
}

// margin returns how long before LockedUntil a lock observed to last period is renewed.
func (c *config) margin(period time.Duration) time.Duration {
	if period <= 0 {
		return 0
	}
	return min(c.maxMargin, period/3)
}
