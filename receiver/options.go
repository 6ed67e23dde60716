package receiver

import (
	"fmt"
	"log/slog"
	"reflect"
	"slices"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/sbkit/sbkit"
	ihooks "github.com/sbkit/sbkit/internal/hooks"
	"github.com/sbkit/sbkit/internal/retry"
	"github.com/sbkit/sbkit/locks"
)

const (
	// DefaultMaxConcurrency is the number of handler goroutines when
	// [Options.MaxConcurrency] is zero: 1, as in the .NET processor, so that a handler
	// written without concurrency in mind stays safe.
	DefaultMaxConcurrency = 1
	// DefaultSettleTimeout bounds one settlement, retries included.
	DefaultSettleTimeout = 30 * time.Second
	// DefaultShutdownGrace is how long running handlers may finish after Run's context
	// ended: 10 s, so that a shutdown fits well within Kubernetes' default 30 s
	// termination grace period.
	DefaultShutdownGrace = 10 * time.Second
)

// Options configure a Processor. A nil *Options and the zero value mean the defaults.
// As everywhere in sbkit, zero means the default, Disable* turns a feature off, and a
// negative value means no limit where no limit makes sense; each field says which.
type Options struct {
	// ReceiveMode must match the receiver's mode. Default
	// [azservicebus.ReceiveModePeekLock]. In [azservicebus.ReceiveModeReceiveAndDelete]
	// no settlement is made and no lock renewed: handler errors are only reported.
	ReceiveMode azservicebus.ReceiveMode
	// MaxConcurrency is the number of goroutines that run the handler. Default
	// DefaultMaxConcurrency (1); negative is an error (the handlers must be bounded).
	MaxConcurrency int
	// PrefetchCount, when positive, is how many received messages may wait for a free
	// handler goroutine (their locks are renewed while they wait). Zero (the default)
	// sizes the prefetch adaptively, about 2 × μ × R: R is the receive round trip and μ
	// the rate at which the handlers and the settlements drain messages, both measured
	// as the processor runs; it is MaxConcurrency until they are measured, and 0 when a
	// handler call is much longer than a receive. Negative is an error (what waits must
	// be bounded); see DisablePrefetch for none.
	//
	// The receive loop makes one ReceiveMessages call at a time (one per receiver with
	// MoreReceivers) and asks for every free place (MaxConcurrency + the prefetch in
	// all), so that one round trip feeds many handlers. A message holds its place from the call that asks for it until its
	// handler returned and its settlement is over: asked for, waiting, running, held by
	// AbandonDelay or settling, it counts, so the processor never holds more locks than
	// its places, however slow the broker is to answer settlements. With the adaptive
	// prefetch, messages held or settling get places on top, and the prefetch and those
	// together are at most 64 × MaxConcurrency: the processor holds at most 65 ×
	// MaxConcurrency messages. Its median latency from receipt to settled is about the
	// handler time and one and a half round trips when the handlers are saturated (half a
	// receive round trip in the buffer, on average, and the settlement's), and about the
	// handler time and one round trip below that, plus half a round trip from the broker
	// (nothing waits: the receive window is 1 ms, see the package documentation). A
	// fixed PrefetchCount trades
	// latency, locks held and deliveries spent at shutdown for throughput that does not
	// depend on averages: choose one when handler times vary too much for an average to
	// describe them, or to bound the locks held below the ceiling. docs/design/prefetch.md
	// in the repository gives the reasoning.
	PrefetchCount int
	// DisablePrefetch holds at most MaxConcurrency messages, running or settling: the
	// lowest latency and the fewest locks, and handlers idle for a receive round trip
	// and a settlement round trip between messages. Default false. PrefetchCount must
	// then be zero.
	DisablePrefetch bool
	// MoreReceivers are further receivers on the processor's entity (for
	// [*azservicebus.Receiver]s, each made by NewReceiverForQueue or
	// NewReceiverForSubscription: each is a link of its own, with its own credit), for
	// long receive round trips. One receiver takes one ReceiveMessages call at a time,
	// and a call waits for its whole batch (see the package documentation): at a round
	// trip of tens of handler calls, places freed during a call wait for the next call
	// and its round trip, and the adaptive prefetch has no slack under its ceiling (32
	// handlers of 5 ms at 50 and 100 ms kept 65 to 80% busy with one receiver on the
	// wire). From when the measured receive round trip is at least 8 handler calls and
	// the processor receives at least half of what its handlers can drain, until the
	// round trip falls below 6 handler calls or the rate below a third, it keeps a call
	// in flight on each receiver, each asking for the places freed since any call began,
	// so that a freed place is asked for sooner. Otherwise a further receiver asks for
	// no new place: it finishes the credits its link has open, then stays idle (a second
	// link brought little or nothing at 4 handler calls, nor below saturation, and
	// lengthened the median). The cost is latency: on the wire, 32 handlers of 5 ms at
	// their highest rate had a median from receipt to settled 6 to 15 ms longer with two
	// receivers at 50 ms, and 17 to 22 ms longer at 100 ms, for 1 to 16 points more of
	// what the handlers can do (docs/benchmarks.md). The places, and so the bound on
	// locks held, are the same. Each message is settled, and its lock renewed, through
	// the receiver it came from (renewed through the processor's receiver when that one
	// does not implement [sbkit.LockRenewer]). The processor closes none of them and
	// keeps its own copy of the slice. New refuses a nil entry, the processor's own
	// receiver and a receiver listed twice (an azservicebus Receiver takes one
	// ReceiveMessages call at a time), comparing receivers whose type is comparable.
	// Default none. A SessionProcessor refuses it: each session has one receiver.
	MoreReceivers []sbkit.MessageReceiver
	// MaxReceiveBatch caps the messages asked for in one ReceiveMessages call. Default
	// (zero), and negative: no cap beyond the free places (and the SDK's 5,000).
	MaxReceiveBatch int
	// DisableAutoComplete stops completing messages whose handler returned nil: the
	// handler settles them itself through [SettlerFrom]. A handler that returns nil
	// without settling gets its message abandoned and [ErrNotSettled] reported. Results
	// made by [sbkit.DeadLetter], [sbkit.Defer] and [sbkit.Skip], and plain errors, are
	// settled as usual. Default false (auto-complete on).
	DisableAutoComplete bool
	// MaxAutoLockRenewalDuration bounds how long a message's lock is renewed after it was
	// received. Default (zero) [locks.DefaultMaxAutoLockRenewalDuration] (5 min);
	// negative renews without a bound.
	MaxAutoLockRenewalDuration time.Duration
	// DisableAutoLockRenewal turns lock renewal off: the receiver then need not implement
	// [sbkit.LockRenewer], and a handler's context ends at its message's lock expiry.
	// Default false (renewal on, in peek-lock mode).
	DisableAutoLockRenewal bool
	// LockRenewal tunes the renewal engine. Default: the engine's defaults.
	LockRenewal LockRenewalOptions
	// SettleConcurrency caps the settlements in flight at once. A handler goroutine is
	// free again as soon as its handler returns: the settlement is handed to a goroutine
	// of its own while it waits for the broker's answer (the SDK's settlement calls block
	// for a round trip; concurrent calls on one receiver are pipelined on its link),
	// started on demand and ended once idle (after a second without work). Settlements
	// beyond the cap wait for one to finish; either way the message keeps its place until
	// its settlement is over, so settlements in flight never exceed the places. Default:
	// every place (MaxConcurrency + PrefetchCount; with the adaptive prefetch 65 ×
	// MaxConcurrency), so that settlement throughput follows the round trip (rate ×
	// settlement time in flight) and never caps the processor's. Negative means no cap,
	// which is the same: the places cap the settlements anyway.
	SettleConcurrency int
	// SettleTimeout bounds one settlement, retries included. Settlements do not end with
	// Run's context: a shutdown still abandons. Default DefaultSettleTimeout (30 s);
	// negative is an error (a settlement that never ends would hold its place forever).
	SettleTimeout time.Duration
	// ShutdownGrace is how long a shutdown started by the end of Run's context lets
	// running handlers finish, as .NET's StopProcessingAsync does: Run then returns
	// within ShutdownGrace, with the guarantees of [Processor.Close] given a context with
	// that deadline. Default DefaultShutdownGrace (10 s); negative waits for handlers
	// without limit. [Processor.Close] keeps explicit control: its context applies too,
	// and the earlier deadline wins.
	ShutdownGrace time.Duration
	// AbandonDelay, if set, returns how long to keep a failed message locked (and renewed)
	// before abandoning it, so that a failing dependency is not hammered by immediate
	// redeliveries. It is called with the message and the handler's error; zero or less
	// abandons at once. The handler goroutine is free during the delay; a shutdown
	// abandons held messages at once. See [ExponentialAbandonDelay]. Default none.
	//
	// A held message keeps its place among the MaxConcurrency + PrefetchCount messages
	// the processor may hold (with the adaptive prefetch: at most 65 × MaxConcurrency,
	// held messages adding to the adaptive size within that ceiling),
	// so the processor never holds more than that: when every place is held, it stops
	// receiving until a hold ends. This is back-pressure on a failing dependency, and the
	// rest of the queue stays with other consumers. Give a fixed PrefetchCount room if a
	// few poison messages must not slow the healthy ones.
	AbandonDelay func(message *azservicebus.ReceivedMessage, err error) time.Duration
	// Redelivery, when set, redelivers failed messages through the broker with a delay
	// (a copy scheduled on the entity) instead of abandoning them, once their immediate
	// attempts are spent, and dead-letters them when its redeliveries are spent: see
	// [RedeliveryOptions] for the guarantees. Default nil: failed messages are
	// abandoned (after AbandonDelay), and [sbkit.RetryAfter] abandons too. A
	// SessionProcessor refuses it: see [SessionOptions].
	Redelivery *RedeliveryOptions
	// Breaker, when set, is a circuit breaker that stops receiving while the handler's
	// dependency is down: see [BreakerOptions]. Default nil (off).
	Breaker *BreakerOptions
	// ReceiveRetry is the policy for failed ReceiveMessages calls. Default: MaxRetries
	// without bound, RetryDelay 100 ms, MaxRetryDelay 30 s: the receive loop retries
	// until Run's context ends, Close is called, or an error is permanent (entity not
	// found, unauthorized, receiver closed), and each failure is reported. A positive
	// MaxRetries ends Run with the last error after that many consecutive failures; a
	// negative one ends it at the first.
	ReceiveRetry sbkit.RetryOptions
	// SettleRetry is the policy for settlements that failed with a transient error.
	// Default: MaxRetries without bound within SettleTimeout, RetryDelay 100 ms,
	// MaxRetryDelay 2 s.
	SettleRetry sbkit.RetryOptions
	// Hooks observe the processor: each element implements any of [ReceiveHook],
	// [HandlerStartHook], [HandlerEndHook], [SettleHook] and [ErrorHook], and also any of
	// the lock engine's [locks.RenewHook], [locks.RenewErrorHook] and [locks.LockLostHook],
	// which receive the engine's events for the processor's messages (a lost lock before
	// the processor cancels the message's handler). An element that implements none of
	// them is an error. Default none.
	Hooks []Hook
	// Logger receives warnings for errors and debug records for settlements. No payload is
	// logged. Default: discard.
	Logger *slog.Logger
}

// LockRenewalOptions tune the processor's lock renewal engine (package locks). The zero
// value means the engine's defaults.
type LockRenewalOptions struct {
	// MaxMargin caps how long before a lock's expiry it is renewed (a third of the lock
	// duration, at most MaxMargin). Default [locks.DefaultMaxMargin] (10 s); negative is
	// an error (a margin without a cap means nothing).
	MaxMargin time.Duration
	// Workers caps the renewal calls in flight at once, each on a goroutine of its own
	// while it waits for the broker (started when the renewal comes due, ended once
	// idle). Default [locks.DefaultWorkers] (256); negative is an error (renewals must
	// not take a goroutine per lock).
	Workers int
	// Retry is the policy for failed renewals. Default: MaxRetries without bound,
	// RetryDelay 250 ms, MaxRetryDelay 5 s; retries stop when the lock expires.
	Retry sbkit.RetryOptions
}

// ExponentialAbandonDelay returns an [Options.AbandonDelay] that holds a failed message for initial
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

// maxReceiveBatch is the most messages one ReceiveMessages call asks for: azservicebus
// refuses more, without retrying, as more than its link's credit (receiver.go,
// defaultLinkRxBuffer, 5,000 in v1.11.0).
const maxReceiveBatch = 5000

type config struct {
	Options
	peekLock bool
	renew    bool // peek-lock with renewal on
	capacity int  // the most places: MaxConcurrency + PrefetchCount, or + ceiling
	adaptive bool // PrefetchCount sized by the estimates
	// ceiling bounds the adaptive prefetch, and the adaptive prefetch, held and settling
	// messages together; prefetchInitial is the prefetch before the first measurements.
	ceiling, prefetchInitial int
	maxBatch                 int
	redelivery               *RedeliveryOptions // nil: off (redelivery.go)
	breaker                  *BreakerOptions    // nil: off (breaker.go)
	receiveRetry             retry.Policy
	settleRetry              retry.Policy
	hooks                    hooks
}

func newConfig(o *Options) (config, error) {
	var c config
	if o != nil {
		c.Options = *o
		c.MoreReceivers = slices.Clone(o.MoreReceivers) // the caller may reuse its slice
	}
	switch c.ReceiveMode {
	case azservicebus.ReceiveModePeekLock:
		c.ReceiveMode, c.peekLock = azservicebus.ReceiveModePeekLock, true
	case azservicebus.ReceiveModeReceiveAndDelete:
	default:
		return c, fmt.Errorf("%w: unknown ReceiveMode %d", ErrInvalidOptions, c.ReceiveMode)
	}
	if c.MaxConcurrency < 0 || c.PrefetchCount < 0 || c.SettleTimeout < 0 {
		return c, fmt.Errorf("%w: negative MaxConcurrency %d, PrefetchCount %d or SettleTimeout %v",
			ErrInvalidOptions, c.MaxConcurrency, c.PrefetchCount, c.SettleTimeout)
	}
	if c.DisablePrefetch && c.PrefetchCount != 0 {
		return c, fmt.Errorf("%w: PrefetchCount %d with DisablePrefetch", ErrInvalidOptions, c.PrefetchCount)
	}
	if lr := c.LockRenewal; lr.MaxMargin < 0 || lr.Workers < 0 {
		return c, fmt.Errorf("%w: LockRenewal MaxMargin %v, Workers %d", ErrInvalidOptions, lr.MaxMargin, lr.Workers)
	}
	if c.MaxConcurrency == 0 {
		c.MaxConcurrency = DefaultMaxConcurrency
	}
	c.adaptive = !c.DisablePrefetch && c.PrefetchCount == 0
	c.capacity = c.MaxConcurrency + c.PrefetchCount
	if c.adaptive {
		c.ceiling = ceilingFactor * c.MaxConcurrency
		c.prefetchInitial = c.MaxConcurrency
		c.capacity = c.MaxConcurrency + c.ceiling
	}
	if c.SettleConcurrency <= 0 {
		c.SettleConcurrency = c.capacity
	}
	c.maxBatch = min(c.capacity, maxReceiveBatch)
	if c.MaxReceiveBatch > 0 {
		c.maxBatch = min(c.maxBatch, c.MaxReceiveBatch)
	}
	if c.SettleTimeout == 0 {
		c.SettleTimeout = DefaultSettleTimeout
	}
	if c.ShutdownGrace == 0 {
		c.ShutdownGrace = DefaultShutdownGrace
	}
	c.renew = c.peekLock && !c.DisableAutoLockRenewal
	c.receiveRetry = retry.Resolve(c.ReceiveRetry, retry.Policy{MaxRetries: retry.Unlimited, RetryDelay: 100 * time.Millisecond, MaxRetryDelay: 30 * time.Second})
	c.settleRetry = retry.Resolve(c.SettleRetry, retry.Policy{MaxRetries: retry.Unlimited, RetryDelay: 100 * time.Millisecond, MaxRetryDelay: 2 * time.Second})
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if err := ihooks.Check(c.Hooks, isHook, hookNames); err != nil {
		return c, fmt.Errorf("%w: %w", ErrInvalidOptions, err)
	}
	c.hooks = newHooks(c.Hooks, c.Logger)
	var err error
	if c.redelivery, err = redeliveryConfig(c.Redelivery, c.peekLock); err != nil {
		return c, err
	}
	if c.breaker, err = breakerConfig(c.Breaker); err != nil {
		return c, err
	}
	return c, nil
}

// checkMoreReceivers refuses, with ErrInvalidOptions, a nil entry of more, and own or
// any receiver listed twice: an azservicebus Receiver refuses a second ReceiveMessages
// call while one is under way ("receiver is already receiving", not permanent), so both
// receive loops would fail and retry forever. Receivers are told apart by pointer (an
// *azservicebus.Receiver is one); those of other kinds are accepted unchecked, as
// comparing them could panic (a struct holding a func in an interface field).
func checkMoreReceivers(own sbkit.MessageReceiver, more []sbkit.MessageReceiver) error {
	seen := make(map[sbkit.MessageReceiver]bool, len(more)+1)
	if reflect.TypeOf(own).Kind() == reflect.Pointer {
		seen[own] = true
	}
	for i, x := range more {
		if x == nil {
			return fmt.Errorf("%w: MoreReceivers[%d] is nil", ErrInvalidOptions, i)
		}
		if reflect.TypeOf(x).Kind() != reflect.Pointer {
			continue
		}
		if seen[x] {
			return fmt.Errorf("%w: MoreReceivers[%d] is the processor's receiver or listed twice", ErrInvalidOptions, i)
		}
		seen[x] = true
	}
	return nil
}

// lockOptions are the options of the processor's lock engine: first goes before the
// hooks of Options.Hooks, last (if not nil) after them.
func (c *config) lockOptions(first, last locks.Hook) *locks.Options {
	hs := []locks.Hook{first}
	for _, h := range c.Hooks {
		if isLockHook(h) {
			hs = append(hs, h)
		}
	}
	if last != nil {
		hs = append(hs, last)
	}
	return &locks.Options{
		MaxAutoLockRenewalDuration: c.MaxAutoLockRenewalDuration,
		MaxMargin:                  c.LockRenewal.MaxMargin,
		Workers:                    c.LockRenewal.Workers,
		Retry:                      c.LockRenewal.Retry,
		Hooks:                      hs,
		Logger:                     c.Logger,
	}
}
