package sender

import (
	"fmt"
	"log/slog"
	"math"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/sbkit/sbkit"
	ihooks "github.com/sbkit/sbkit/internal/hooks"
	"github.com/sbkit/sbkit/internal/retry"
)

// Defaults of [Options].
const (
	DefaultMaxInFlightMessages = 1024
	DefaultMaxInFlightBytes    = 16 << 20 // 16 MiB
	DefaultLinger              = 2 * time.Millisecond
	DefaultMaxBatchMessages    = 1000
	DefaultMaxBatchBytes       = 256 << 10 // 256 KiB, the Standard tier's limit
	DefaultMaxRetries          = 5
	DefaultRetryDelay          = 100 * time.Millisecond
	DefaultMaxRetryDelay       = 10 * time.Second
)

// Options configures a [Sender]. The zero value of every field means its documented
// default; a nil *Options means all defaults. A negative value means no limit where no
// limit makes sense (MaxBatchMessages, AttemptTimeout) and is an error wrapping
// [ErrInvalidOptions] elsewhere, as each field says; Retry follows [sbkit.RetryOptions].
type Options struct {
	// MaxInFlightMessages bounds how many accepted messages have no outcome yet (queued
	// in a linger batch, waiting for their key, on the wire or between retries).
	// Default DefaultMaxInFlightMessages (1024); negative is an error (memory must stay
	// bounded however fast the caller produces).
	MaxInFlightMessages int

	// MaxInFlightBytes bounds the estimated size ([sbkit.MessageSize]) of the messages in
	// flight. A message larger than the window takes the whole window and travels alone.
	// Default DefaultMaxInFlightBytes (16 MiB); negative is an error, as for
	// MaxInFlightMessages.
	MaxInFlightBytes int64

	// DisableBatching sends every message with its own SendMessage request. Default
	// false: batching is on when the destination is an [*azservicebus.Sender] or
	// implements [sbkit.BatchSender], and off otherwise.
	DisableBatching bool

	// Linger is how long an unsealed batch waits for more messages after its first one.
	// Flush and Close do not wait for it. Default DefaultLinger (2ms); negative is an
	// error (a batch that waits without limit would never be sent).
	Linger time.Duration

	// MaxBatchMessages seals a batch when it holds this many messages.
	// Default DefaultMaxBatchMessages (1000); negative means no count cap: batches are
	// then sealed by MaxBatchBytes and Linger alone.
	MaxBatchMessages int

	// MaxBatchBytes seals a batch when the estimated size of its messages reaches it, and
	// is passed to NewBatch as [azservicebus.MessageBatchOptions.MaxBytes] when set.
	// Default: the broker's limit for NewBatch, DefaultMaxBatchBytes (256 KiB) for sealing;
	// negative is an error, as for MaxInFlightBytes.
	MaxBatchBytes int64

	// Ordered keeps messages that share a SessionID (or a PartitionKey when there is no
	// SessionID) in order: at most one request per key is in flight. Default false.
	Ordered bool

	// OrderKey, when not nil, refines the key that groups and orders messages: two
	// messages share a batch, and with Ordered keep their order, only when they have the
	// same SessionID (or PartitionKey) and the same OrderKey. So messages without a
	// SessionID or PartitionKey that need their order kept (those of one transaction in an
	// outbox, for example) get one OrderKey; "" means no refinement. It is called once per
	// message, before the message is accepted, and must be fast. Default nil: messages are
	// grouped by SessionID, or PartitionKey, alone.
	OrderKey func(message *azservicebus.Message) string

	// Retry configures the retries of transient failures ([sbkit.IsTransient]); other
	// failures are never retried. A message's retries are also bounded by its context
	// and by Close. Default: MaxRetries 5, RetryDelay 100ms, MaxRetryDelay 10s.
	Retry sbkit.RetryOptions

	// AttemptTimeout bounds each request. A request that times out counts as a transient
	// failure. Default (zero), and negative: no bound but the message's context
	// (batching off) or Close (batches).
	AttemptTimeout time.Duration

	// DefaultTTL is set with [sbkit.SetTTL] on every message that has no TimeToLive.
	// Default 0: messages keep the entity's default TTL. Negative is an error: a
	// message without TTL already lives as long as its entity allows.
	DefaultTTL time.Duration

	// Hooks observe the Sender's events; each implements any of [SendStartHook],
	// [SendResultHook], [SendRetryHook] and [SendBatchHook] (see [Hook]); one that
	// implements none is an error. Default none.
	Hooks []Hook

	// Logger receives retries, failures and recovered panics, never payloads.
	// Default: discards everything.
	Logger *slog.Logger
}

// retryDefaults is the Sender's retry policy for zero fields of Options.Retry.
var retryDefaults = retry.Policy{MaxRetries: DefaultMaxRetries, RetryDelay: DefaultRetryDelay, MaxRetryDelay: DefaultMaxRetryDelay}

func (o *Options) withDefaults() (Options, error) {
	var v Options
	if o != nil {
		v = *o
	}
	var bad string
	switch {
	case v.MaxInFlightMessages < 0:
		bad = fmt.Sprintf("MaxInFlightMessages %d", v.MaxInFlightMessages)
	case v.MaxInFlightBytes < 0:
		bad = fmt.Sprintf("MaxInFlightBytes %d", v.MaxInFlightBytes)
	case v.MaxBatchBytes < 0:
		bad = fmt.Sprintf("MaxBatchBytes %d", v.MaxBatchBytes)
	case v.Linger < 0:
		bad = fmt.Sprintf("Linger %v", v.Linger)
	case v.DefaultTTL < 0:
		bad = fmt.Sprintf("DefaultTTL %v", v.DefaultTTL)
	}
	if bad != "" {
		return v, fmt.Errorf("%w: negative %s", ErrInvalidOptions, bad)
	}
	if err := ihooks.Check(v.Hooks, isHook, hookNames); err != nil {
		return v, fmt.Errorf("%w: %w", ErrInvalidOptions, err)
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
	switch {
	case v.MaxBatchMessages == 0:
		v.MaxBatchMessages = DefaultMaxBatchMessages
	case v.MaxBatchMessages < 0:
		v.MaxBatchMessages = math.MaxInt
	}
	if v.Logger == nil {
		v.Logger = slog.New(slog.DiscardHandler)
	}
	return v, nil
}
