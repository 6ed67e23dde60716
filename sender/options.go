package sender

import (
	"errors"
	"fmt"
	"log/slog"
	"time"
)

// Defaults of Options.
const (
	DefaultMaxInFlightMessages = 1024
	DefaultMaxInFlightBytes    = 16 << 20 // 16 MiB
	DefaultLinger              = 2 * time.Millisecond
	DefaultMaxBatchMessages    = 1000
	DefaultMaxBatchBytes       = 256 << 10 // 256 KiB, the Standard tier's limit
	DefaultMaxRetries          = 5
	DefaultInitialInterval     = 100 * time.Millisecond
	DefaultMaxInterval         = 10 * time.Second
	DefaultMultiplier          = 2.0
	DefaultRandomizationFactor = 0.5
	DefaultMaxElapsedTime      = time.Minute
)

// Options configures a Sender. The zero value of every field means its documented default;
// a nil *Options means all defaults. Negative sizes and durations are errors.
type Options struct {
	// MaxInFlightMessages bounds how many accepted messages have no outcome yet (queued
	// in a linger batch, waiting for their key, on the wire or between retries).
	// Default DefaultMaxInFlightMessages (1024).
	MaxInFlightMessages int

	// MaxInFlightBytes bounds the estimated size (see Size) of the messages in flight.
	// A message larger than the window takes the whole window and travels alone.
	// Default DefaultMaxInFlightBytes (16 MiB).
	MaxInFlightBytes int64

	// DisableBatching sends every message with its own SendMessage request even when the
	// destination implements sbkit.BatchSender. Batching is always off when it does not.
	DisableBatching bool

	// Linger is how long an unsealed batch waits for more messages after its first one.
	// Default DefaultLinger (2ms).
	Linger time.Duration

	// MaxBatchMessages seals a batch when it holds this many messages.
	// Default DefaultMaxBatchMessages (1000).
	MaxBatchMessages int

	// MaxBatchBytes seals a batch when the estimated size of its messages reaches it, and
	// is passed to NewBatch as MessageBatchOptions.MaxBytes when set. Default: the
	// broker's limit for NewBatch, DefaultMaxBatchBytes (256 KiB) for sealing.
	MaxBatchBytes uint64

	// Ordered keeps messages that share a SessionID (or a PartitionKey when there is no
	// SessionID) in order: at most one request per key is in flight. Default false.
	Ordered bool

	// Retry configures the retries of transient failures.
	Retry RetryOptions

	// AttemptTimeout bounds each request. A request that times out counts as a transient
	// failure. Default 0: requests are bounded only by the message's context (batching
	// off) or by Close (batches).
	AttemptTimeout time.Duration

	// DefaultTTL is set with sbkit.SetTTL on every message that has no TimeToLive.
	// Default 0: messages keep the entity's default TTL.
	DefaultTTL time.Duration

	// OnResult, when set, is called once with the outcome of every accepted message,
	// before its Result's Done channel is closed, on the goroutine that learnt the
	// outcome. It must be fast and must not block, and must not call Flush or Close (they
	// wait for the message being reported); a panic in it is recovered and logged.
	OnResult func(*Result)

	// Hooks receive events; each may implement any of ResultHook, RetryHook and
	// BatchHook. Hooks must be fast and must not block; panics are recovered and logged.
	Hooks []Hook

	// Logger receives retries, failures and recovered panics, never payloads.
	// Default: discards everything.
	Logger *slog.Logger
}

// RetryOptions configures retries of transient failures (sbkit.IsTransient). Other
// failures are never retried.
type RetryOptions struct {
	// MaxRetries is how many times a message is retried after its first attempt.
	// Default DefaultMaxRetries (5); a negative value disables retries.
	MaxRetries int
	// InitialInterval is the first backoff. Default DefaultInitialInterval (100ms).
	InitialInterval time.Duration
	// MaxInterval caps each backoff. Default DefaultMaxInterval (10s).
	MaxInterval time.Duration
	// Multiplier grows the backoff after each retry. Default DefaultMultiplier (2);
	// values below 1 are errors.
	Multiplier float64
	// RandomizationFactor jitters each backoff by ± this fraction.
	// Default DefaultRandomizationFactor (0.5); must be in [0, 1].
	RandomizationFactor float64
	// MaxElapsedTime stops retrying once this long has passed since the first failure of
	// a request. Default DefaultMaxElapsedTime (1 min).
	MaxElapsedTime time.Duration
}

func (o *Options) withDefaults() (Options, error) {
	var v Options
	if o != nil {
		v = *o
	}
	switch {
	case v.MaxInFlightMessages < 0:
		return v, fmt.Errorf("sender: negative MaxInFlightMessages %d", v.MaxInFlightMessages)
	case v.MaxInFlightBytes < 0:
		return v, fmt.Errorf("sender: negative MaxInFlightBytes %d", v.MaxInFlightBytes)
	case v.Linger < 0:
		return v, fmt.Errorf("sender: negative Linger %v", v.Linger)
	case v.MaxBatchMessages < 0:
		return v, fmt.Errorf("sender: negative MaxBatchMessages %d", v.MaxBatchMessages)
	case v.AttemptTimeout < 0:
		return v, fmt.Errorf("sender: negative AttemptTimeout %v", v.AttemptTimeout)
	case v.DefaultTTL < 0:
		return v, fmt.Errorf("sender: negative DefaultTTL %v", v.DefaultTTL)
	}
	if v.MaxInFlightMessages == 0 {
		v.MaxInFlightMessages = DefaultMaxInFlightMessages
	}
	if v.MaxInFlightBytes == 0 {
		v.MaxInFlightBytes = DefaultMaxInFlightBytes
	}
	if v.Linger == 0 {
		v.Linger = DefaultLinger
	}
	if v.MaxBatchMessages == 0 {
		v.MaxBatchMessages = DefaultMaxBatchMessages
	}
	if v.Logger == nil {
		v.Logger = slog.New(slog.DiscardHandler)
	}
	r := &v.Retry
	switch {
	case r.InitialInterval < 0, r.MaxInterval < 0, r.MaxElapsedTime < 0:
		return v, errors.New("sender: negative retry interval")
	case r.Multiplier != 0 && r.Multiplier < 1:
		return v, fmt.Errorf("sender: retry Multiplier %v below 1", r.Multiplier)
	case r.RandomizationFactor < 0 || r.RandomizationFactor > 1:
		return v, fmt.Errorf("sender: retry RandomizationFactor %v outside [0, 1]", r.RandomizationFactor)
	}
	if r.MaxRetries == 0 {
		r.MaxRetries = DefaultMaxRetries
	} else if r.MaxRetries < 0 {
		r.MaxRetries = 0
	}
	if r.InitialInterval == 0 {
		r.InitialInterval = DefaultInitialInterval
	}
	if r.MaxInterval == 0 {
		r.MaxInterval = DefaultMaxInterval
	}
	if r.Multiplier == 0 {
		r.Multiplier = DefaultMultiplier
	}
	if r.RandomizationFactor == 0 {
		r.RandomizationFactor = DefaultRandomizationFactor
	}
	if r.MaxElapsedTime == 0 {
		r.MaxElapsedTime = DefaultMaxElapsedTime
	}
	return v, nil
}
