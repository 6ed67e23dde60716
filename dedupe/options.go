package dedupe

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/sbkit/sbkit"
	ihooks "github.com/sbkit/sbkit/internal/hooks"
	"github.com/sbkit/sbkit/internal/retry"
)

// Defaults of Options.
const (
	DefaultLeaseTTL     = time.Minute
	DefaultWindow       = time.Hour
	DefaultLeasePoll    = 500 * time.Millisecond
	DefaultStoreTimeout = 5 * time.Second
)

// defaultRetry is the default of [Options.Retry].
var defaultRetry = retry.Policy{MaxRetries: 7, RetryDelay: 500 * time.Millisecond, MaxRetryDelay: 8 * time.Second}

// Reasons carried by the Filter's settlement markers.
const (
	// DuplicateReason is the [sbkit.Skip] reason of a delivery whose key is marked done.
	DuplicateReason = "duplicate"
	// MissingKeyReason is the dead-letter reason of [MissingKeyDeadLetter].
	MissingKeyReason = "MissingMessageId"
)

// MissingKeyPolicy says what the Filter does with a message that has no key (an empty
// MessageId, or an empty result of [Options.Key]).
type MissingKeyPolicy int

const (
	// MissingKeyProcess runs the handler without duplicate protection (the default),
	// counted in Stats.Unprotected.
	MissingKeyProcess MissingKeyPolicy = iota
	// MissingKeyDeadLetter dead-letters the message with reason [MissingKeyReason], without
	// running the handler: for entities where every sender must set a MessageId.
	MissingKeyDeadLetter
)

// ContendedPolicy says what a delivery does when another owner holds the lease on its key.
type ContendedPolicy int

const (
	// ContendedWait (the default) polls the store every LeasePoll for up to LeaseWait,
	// holding the message (its lock is renewed by the processor). When the other worker
	// succeeds the delivery is skipped as a duplicate; when it fails or its lease expires
	// the delivery is processed; when LeaseWait passes it is abandoned ([ErrLeaseHeld]).
	// Waiting avoids burning delivery counts in a tight abandon loop while a crashed
	// worker's lease runs out, at the price of a concurrency slot while it waits.
	ContendedWait ContendedPolicy = iota
	// ContendedAbandon abandons at once with an error wrapping [ErrLeaseHeld]. Each abandon
	// increments the delivery count; the broker dead-letters after MaxDeliveryCount.
	ContendedAbandon
)

// FailurePolicy says what the Filter does when the store cannot be reached (Acquire
// returns an error).
type FailurePolicy int

const (
	// FailClosed (the default) never runs the handler without a lease. A failed Acquire
	// is retried with backoff ([Options.Retry]) while the delivery is held, so that a
	// store outage of a few seconds costs no delivery count; when the retries run out
	// (or the handler's context ends, say because the lock was lost) the Filter returns a
	// *[StoreError] and the delivery is abandoned.
	//
	// Worst case, with the default Retry: a delivery is held for about 31 s of delays
	// (500 ms doubling up to 8 s, 7 retries; at most 47 s with jitter) plus up to 8 ×
	// StoreTimeout when every call hangs until its timeout, then abandoned: one delivery
	// count per hold. An outage shorter than the hold costs nothing; a longer one costs
	// one delivery count per message per hold, so with the broker's default
	// MaxDeliveryCount of 10 a message reaches the dead-letter queue only after an outage
	// of roughly 5 minutes or more. A held delivery occupies its handler slot, so the
	// processor stops receiving new messages while the store is down.
	FailClosed FailurePolicy = iota
	// FailOpen runs the handler without duplicate protection (counted in
	// Stats.Unprotected): no message waits for the store, duplicates may be processed.
	FailOpen
)

// Options configures a Filter. nil options, and zero fields, mean the documented defaults.
// A negative duration is an error wrapping [ErrInvalidOptions], except LeaseWait's, which
// means no limit.
type Options struct {
	// Entity namespaces the default key: "<Entity>:<MessageId>". Service Bus entity
	// paths never contain ':', so keys of different entities never collide. Leave it
	// empty only when the store serves a single entity. It must not contain ':'.
	Entity string

	// Key returns a message's key; "" means the message has no key (see MissingKey).
	// Default: [MessageIDKey](Entity): Entity + ":" + MessageID (a redelivered copy's
	// original's, see MessageIDKey), or "" when MessageID is
	// empty. A custom Key replaces the default entirely (Entity is then unused: namespace
	// keys yourself when a store is shared). It must be fast and safe for concurrent use.
	Key func(message *azservicebus.ReceivedMessage) string

	// MissingKey is the policy for messages without a key. Default: [MissingKeyProcess].
	MissingKey MissingKeyPolicy

	// LeaseTTL is how long a processing lease lives without a refresh. While the
	// handler runs the lease is refreshed every LeaseRenewal, so LeaseTTL need not
	// exceed the handler's run; it bounds how long a crashed worker's lease holds back
	// the redelivery of its message. When no refresh succeeds for LeaseTTL (counted
	// from the start of the last successful store call, so the store's copy never
	// outlives the Filter's), or a refresh finds the key taken, the lease is lost: the
	// handler's context is cancelled with a cause wrapping [ErrLeaseLost], since another
	// worker may now process the message. With DisableLeaseRenewal the same happens
	// LeaseTTL after the lease was taken, so LeaseTTL must then exceed the longest
	// handler run. Default: [DefaultLeaseTTL] (1 min); negative is an error (a lease
	// without end would hold back a crashed worker's message forever).
	LeaseTTL time.Duration

	// LeaseRenewal is the interval at which a running handler's lease is refreshed
	// (an Acquire by the same owner, on a timer: no goroutine per message while idle).
	// It must be shorter than LeaseTTL. Default: LeaseTTL / 3; negative is an error.
	LeaseRenewal time.Duration

	// DisableLeaseRenewal turns lease refreshes off (the lease still ends the handler's
	// context when it runs out). Default: false (refreshes on).
	DisableLeaseRenewal bool

	// Window is how long a done mark lives: a duplicate arriving later is processed
	// again. It must exceed the time a redelivery can take (the lock duration, plus the
	// sender's retry horizon for duplicates sent twice). Default: [DefaultWindow] (1 h);
	// negative is an error (stores keep a mark for a window, not for ever).
	Window time.Duration

	// Contended is the policy for a key leased by another owner. Default: [ContendedWait].
	Contended ContendedPolicy

	// LeaseWait bounds [ContendedWait]. Default: LeaseTTL (long enough for a crashed
	// worker's lease to run out). Negative means no limit: the delivery waits as long as
	// another owner holds the lease, or until the handler's context ends (the
	// processor's lock renewal limit, a shutdown).
	LeaseWait time.Duration

	// LeasePoll is the interval between store checks under [ContendedWait]. Default:
	// [DefaultLeasePoll] (500 ms); negative is an error.
	LeasePoll time.Duration

	// StoreFailure is the policy when Acquire fails. Default: [FailClosed].
	StoreFailure FailurePolicy

	// Retry is how a failed store call is retried: Acquire under [FailClosed] (the
	// delivery is held meanwhile, see [FailClosed]) and lease refreshes. A failed refresh
	// is retried after the same delays, but always within the lease's remaining time
	// (never later than half of it) and until the lease runs out, whatever MaxRetries
	// says. Default: MaxRetries 7, RetryDelay 500 ms, MaxRetryDelay 8 s.
	Retry sbkit.RetryOptions

	// StoreTimeout bounds every store call. MarkDone and Release run on a context that
	// keeps the handler context's values but not its cancellation (a lost lock must not
	// prevent recording a success). Default: [DefaultStoreTimeout] (5 s); negative is
	// an error (a store call without a bound could hold a finished handler forever).
	StoreTimeout time.Duration

	// Hooks observe the Filter's events: each implements any of [FreshHook],
	// [DuplicateHook], [ContendedHook], [LeaseLostHook] and [StoreErrorHook] (see
	// [Hook]); one that implements none is an error. Default: none.
	Hooks []Hook

	// Logger receives warnings about store errors and lost leases (keys, never
	// payloads). Default: nil, which discards.
	Logger *slog.Logger
}

// MessageIDKey returns the default of [Options.Key] for entity: a function that returns
// entity + ":" + the message's MessageID, or "" when the MessageID is empty. The MessageID
// of a copy made by a processor's delayed redelivery (package receiver) is its
// original's ([sbkit.OriginalMessageID]): every copy of one message is the same work, so
// a second copy of one attempt (scheduled twice when a completion failed) is skipped once
// the first was handled. Filters that
// share a store (a [Filter] and pgdedupe's TxFilter on one table) must derive keys the
// same way; this is that one derivation. The function is safe for concurrent use.
func MessageIDKey(entity string) func(message *azservicebus.ReceivedMessage) string {
	prefix := entity + ":"
	return func(m *azservicebus.ReceivedMessage) string {
		id := sbkit.OriginalMessageID(m)
		if id == "" {
			return ""
		}
		return prefix + id
	}
}

func (o *Options) withDefaults() (Options, error) {
	var r Options
	if o != nil {
		r = *o
	}
	for _, d := range []struct {
		name string
		v    *time.Duration
		def  time.Duration
	}{
		{"LeaseTTL", &r.LeaseTTL, DefaultLeaseTTL},
		{"Window", &r.Window, DefaultWindow},
		{"LeaseRenewal", &r.LeaseRenewal, 0},
		{"LeasePoll", &r.LeasePoll, DefaultLeasePoll},
		{"StoreTimeout", &r.StoreTimeout, DefaultStoreTimeout},
	} {
		if *d.v < 0 {
			return r, fmt.Errorf("%w: negative %s %v", ErrInvalidOptions, d.name, *d.v)
		}
		if *d.v == 0 {
			*d.v = d.def
		}
	}
	switch {
	case r.LeaseWait == 0:
		r.LeaseWait = r.LeaseTTL
	case r.LeaseWait < 0:
		r.LeaseWait = -1 // no limit
	}
	if r.LeaseRenewal == 0 {
		r.LeaseRenewal = r.LeaseTTL / 3
	}
	if r.LeaseRenewal >= r.LeaseTTL {
		return r, fmt.Errorf("%w: LeaseRenewal %v not shorter than LeaseTTL %v", ErrInvalidOptions, r.LeaseRenewal, r.LeaseTTL)
	}
	for _, c := range r.Entity {
		if c == ':' {
			return r, fmt.Errorf("%w: Entity %q contains ':'", ErrInvalidOptions, r.Entity)
		}
	}
	if r.MissingKey != MissingKeyProcess && r.MissingKey != MissingKeyDeadLetter {
		return r, fmt.Errorf("%w: unknown MissingKey policy %d", ErrInvalidOptions, r.MissingKey)
	}
	if r.Contended != ContendedWait && r.Contended != ContendedAbandon {
		return r, fmt.Errorf("%w: unknown Contended policy %d", ErrInvalidOptions, r.Contended)
	}
	if r.StoreFailure != FailClosed && r.StoreFailure != FailOpen {
		return r, fmt.Errorf("%w: unknown StoreFailure policy %d", ErrInvalidOptions, r.StoreFailure)
	}
	if err := ihooks.Check(r.Hooks, isHook, hookNames); err != nil {
		return r, fmt.Errorf("%w: %w", ErrInvalidOptions, err)
	}
	if r.Key == nil {
		r.Key = MessageIDKey(r.Entity)
	}
	if r.Logger == nil {
		r.Logger = slog.New(slog.DiscardHandler)
	}
	return r, nil
}
