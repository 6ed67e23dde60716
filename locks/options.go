package locks

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/cenkalti/backoff/v4"
)

const (
	// DefaultMaxAutoLockRenewalDuration is how long a lock is renewed when
	// Options.MaxAutoLockRenewalDuration is nil: 5 minutes, as in the other Service Bus SDKs.
	DefaultMaxAutoLockRenewalDuration = 5 * time.Minute
	// Unlimited, given as MaxAutoLockRenewalDuration (any negative value does the same),
	// renews a lock until it is released or lost.
	Unlimited time.Duration = -1
	// DefaultMaxMargin caps how long before LockedUntil a renewal is made.
	DefaultMaxMargin = 10 * time.Second
	// DefaultWorkers is the number of renewal workers when Options.Workers is zero.
	DefaultWorkers = 8
)

// Options configure an Engine. The zero value (and a nil *Options) means the defaults.
type Options struct {
	// MaxAutoLockRenewalDuration bounds how long after Add a lock keeps being renewed.
	// nil means DefaultMaxAutoLockRenewalDuration (5 min); a pointer to zero disables
	// renewal (the engine then only watches the lock run out); a negative value, such as
	// Unlimited, renews without a bound. When the bound is reached the lock is left to
	// expire and is then reported lost with ReasonLimit.
	MaxAutoLockRenewalDuration *time.Duration
	// MaxMargin caps the margin before LockedUntil at which a renewal is due. The margin is
	// a third of the observed lock duration, at most MaxMargin. Default DefaultMaxMargin
	// (10 s); negative is an error.
	MaxMargin time.Duration
	// Workers is the number of goroutines that make renewal calls. Default DefaultWorkers
	// (8); negative is an error.
	Workers int
	// NewBackOff makes the retry policy for one lock's transient renewal failures. Retries
	// stop anyway when the lock expires. Default: exponential from 250 ms to 5 s, no
	// elapsed-time limit.
	NewBackOff func() backoff.BackOff
	// OnRenewError, if set, is called for every failed renewal attempt that will be
	// retried. It runs on a renewal worker and must be fast and goroutine-safe.
	OnRenewError func(message *azservicebus.ReceivedMessage, err error)
	// Logger receives debug records of renewals and warnings of losses. Default: discard.
	Logger *slog.Logger
}

type config struct {
	limit        time.Duration // <0 unlimited, 0 disabled
	maxMargin    time.Duration
	workers      int
	newBackOff   func() backoff.BackOff
	onRenewError func(*azservicebus.ReceivedMessage, error)
	logger       *slog.Logger
}

func newConfig(o *Options) (config, error) {
	if o == nil {
		o = &Options{}
	}
	c := config{
		limit:        DefaultMaxAutoLockRenewalDuration,
		maxMargin:    o.MaxMargin,
		workers:      o.Workers,
		newBackOff:   o.NewBackOff,
		onRenewError: o.OnRenewError,
		logger:       o.Logger,
	}
	if o.MaxAutoLockRenewalDuration != nil {
		c.limit = *o.MaxAutoLockRenewalDuration
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
	if c.newBackOff == nil {
		c.newBackOff = defaultBackOff
	}
	if c.logger == nil {
		c.logger = slog.New(slog.DiscardHandler)
	}
	return c, nil
}

func defaultBackOff() backoff.BackOff {
	return backoff.NewExponentialBackOff(
		backoff.WithInitialInterval(250*time.Millisecond),
		backoff.WithMaxInterval(5*time.Second),
		backoff.WithMaxElapsedTime(0),
	)
}

// margin returns how long before LockedUntil a lock observed to last period is renewed.
func (c *config) margin(period time.Duration) time.Duration {
	if period <= 0 {
		return 0
	}
	return min(c.maxMargin, period/3)
}
