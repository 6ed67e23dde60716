package receiver

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/cenkalti/backoff/v4"

	"github.com/sbkit/sbkit/locks"
)

const (
	// DefaultMaxConcurrency is the number of handler goroutines when
	// Options.MaxConcurrency is zero: 1, as in the .NET processor, so that a handler
	// written without concurrency in mind stays safe.
	DefaultMaxConcurrency = 1
	// NoPrefetch, as Options.PrefetchCount, receives only as many messages as there are
	// free handler goroutines.
	NoPrefetch = -1
	// DefaultSettleTimeout bounds one settlement, retries included.
	DefaultSettleTimeout = 30 * time.Second
)

// Options configure a Processor. A nil *Options and the zero value mean the defaults.
type Options struct {
	// ReceiveMode must match the receiver's mode. Default azservicebus.ReceiveModePeekLock.
	// In ReceiveModeReceiveAndDelete no settlement is made and no lock renewed: handler
	// errors are only reported.
	ReceiveMode azservicebus.ReceiveMode
	// MaxConcurrency is the number of goroutines that run the handler. Default
	// DefaultMaxConcurrency (1); negative is an error.
	MaxConcurrency int
	// PrefetchCount is how many received messages may wait for a free handler goroutine.
	// Their locks are renewed while they wait. Default 4 × MaxConcurrency; NoPrefetch for
	// none; other negative values are an error. The receive loop asks each ReceiveMessages
	// call for every free place (MaxConcurrency + PrefetchCount in all), so that one round
	// trip feeds many handlers. Messages asked for by a call in flight hold places too, so
	// when a receive round trip is longer than a handler call, handlers starve unless
	// PrefetchCount is at least about 2 × MaxConcurrency × round trip / handler time; the
	// default covers a round trip of up to twice the handler time.
	PrefetchCount int
	// MaxReceiveBatch caps the messages asked for in one ReceiveMessages call. Default: no
	// cap beyond the free places; negative is an error.
	MaxReceiveBatch int
	// DisableAutoComplete stops completing messages whose handler returned nil: the
	// handler settles them itself through SettlerFrom(ctx). A handler that returns nil
	// without settling gets its message abandoned and ErrNotSettled reported. Results made
	// by sbkit.DeadLetter, sbkit.Defer and sbkit.Skip, and plain errors, are settled as
	// usual. Default false (auto-complete on).
	DisableAutoComplete bool
	// MaxAutoLockRenewalDuration bounds how long a message's lock is renewed after it was
	// received. nil means locks.DefaultMaxAutoLockRenewalDuration (5 min); a pointer to
	// zero disables renewal (then the receiver need not implement sbkit.LockRenewer, and a
	// handler's context ends at the lock's expiry); a negative value (locks.Unlimited)
	// renews without a bound.
	MaxAutoLockRenewalDuration *time.Duration
	// LockRenewal tunes the renewal engine (margin, workers, backoff). Its
	// MaxAutoLockRenewalDuration, OnRenewError and Logger are ignored: the processor's are
	// used. Default: locks' defaults.
	LockRenewal *locks.Options
	// SettleConcurrency is the number of goroutines that settle messages, so that a
	// handler goroutine is free again as soon as its handler returns. Default
	// max(8, 2 × MaxConcurrency); negative is an error.
	SettleConcurrency int
	// SettleTimeout bounds one settlement, transient retries included. Settlements do not
	// end with Run's context: a shutdown still abandons. Default DefaultSettleTimeout
	// (30 s); negative is an error.
	SettleTimeout time.Duration
	// AbandonDelay, if set, returns how long to keep a failed message locked (and renewed)
	// before abandoning it, so that a failing dependency is not hammered by immediate
	// redeliveries. It is called with the message and the handler's error; zero or less
	// abandons at once. The handler goroutine is free during the delay; a shutdown
	// abandons held messages at once. See ExponentialAbandonDelay.
	AbandonDelay func(message *azservicebus.ReceivedMessage, err error) time.Duration
	// ReceiveBackOff makes the retry policy for failed ReceiveMessages calls. Default:
	// exponential from 100 ms to 30 s, forever (permanent errors end Run instead).
	ReceiveBackOff func() backoff.BackOff
	// SettleBackOff makes the retry policy for transient settlement failures, bounded by
	// SettleTimeout. Default: exponential from 100 ms to 2 s.
	SettleBackOff func() backoff.BackOff
	// OnError, if set, is called for every error with its source, like .NET's
	// ProcessErrorAsync. It runs on processor goroutines, concurrently; it must be fast
	// and must not block.
	OnError func(err *Error)
	// Logger receives warnings for errors and debug records for settlements. No payload is
	// logged. Default: discard.
	Logger *slog.Logger
}

// ExponentialAbandonDelay returns an AbandonDelay that holds a failed message for initial
// on its first delivery and doubles with each further delivery (DeliveryCount), up to max.
func ExponentialAbandonDelay(initial, max time.Duration) func(*azservicebus.ReceivedMessage, error) time.Duration {
	return func(message *azservicebus.ReceivedMessage, _ error) time.Duration {
		if message == nil || initial <= 0 {
			return 0
		}
		d := initial
		for i := uint32(1); i < message.DeliveryCount && d < max; i++ {
			d *= 2
		}
		return min(d, max)
	}
}

type config struct {
	Options
	peekLock   bool
	renewLimit time.Duration // 0: no renewal
	capacity   int           // MaxConcurrency + prefetch
	maxBatch   int
}

func newConfig(o *Options) (config, error) {
	var c config
	if o != nil {
		c.Options = *o
	}
	switch c.ReceiveMode {
	case azservicebus.ReceiveModePeekLock:
		c.ReceiveMode, c.peekLock = azservicebus.ReceiveModePeekLock, true
	case azservicebus.ReceiveModeReceiveAndDelete:
	default:
		return c, fmt.Errorf("%w: unknown ReceiveMode %d", ErrInvalidOptions, c.ReceiveMode)
	}
	if c.MaxConcurrency < 0 || c.PrefetchCount < NoPrefetch || c.MaxReceiveBatch < 0 ||
		c.SettleConcurrency < 0 || c.SettleTimeout < 0 {
		return c, fmt.Errorf("%w: MaxConcurrency %d, PrefetchCount %d, MaxReceiveBatch %d, SettleConcurrency %d, SettleTimeout %v",
			ErrInvalidOptions, c.MaxConcurrency, c.PrefetchCount, c.MaxReceiveBatch, c.SettleConcurrency, c.SettleTimeout)
	}
	if lr := c.LockRenewal; lr != nil && (lr.MaxMargin < 0 || lr.Workers < 0) {
		return c, fmt.Errorf("%w: LockRenewal MaxMargin %v, Workers %d", ErrInvalidOptions, lr.MaxMargin, lr.Workers)
	}
	if c.MaxConcurrency == 0 {
		c.MaxConcurrency = DefaultMaxConcurrency
	}
	switch c.PrefetchCount {
	case 0:
		c.PrefetchCount = 4 * c.MaxConcurrency
	case NoPrefetch:
		c.PrefetchCount = 0
	}
	c.capacity = c.MaxConcurrency + c.PrefetchCount
	c.maxBatch = c.capacity
	if c.MaxReceiveBatch > 0 {
		c.maxBatch = min(c.maxBatch, c.MaxReceiveBatch)
	}
	if c.SettleConcurrency == 0 {
		c.SettleConcurrency = max(8, 2*c.MaxConcurrency)
	}
	if c.SettleTimeout == 0 {
		c.SettleTimeout = DefaultSettleTimeout
	}
	if c.peekLock {
		c.renewLimit = locks.DefaultMaxAutoLockRenewalDuration
		if c.MaxAutoLockRenewalDuration != nil {
			c.renewLimit = *c.MaxAutoLockRenewalDuration
		}
	}
	if c.ReceiveBackOff == nil {
		c.ReceiveBackOff = func() backoff.BackOff {
			return backoff.NewExponentialBackOff(backoff.WithInitialInterval(100*time.Millisecond),
				backoff.WithMaxInterval(30*time.Second), backoff.WithMaxElapsedTime(0))
		}
	}
	if c.SettleBackOff == nil {
		c.SettleBackOff = func() backoff.BackOff {
			return backoff.NewExponentialBackOff(backoff.WithInitialInterval(100*time.Millisecond),
				backoff.WithMaxInterval(2*time.Second), backoff.WithMaxElapsedTime(0))
		}
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c, nil
}
