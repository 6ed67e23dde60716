package dedupe

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
)

// Defaults of Options.
const (
	DefaultLeaseTTL     = time.Minute
	DefaultWindow       = time.Hour
	DefaultLeasePoll    = 500 * time.Millisecond
	DefaultStoreTimeout = 5 * time.Second
)

// Reasons carried by the Filter's settlement markers.
const (
	// DuplicateReason is the sbkit.Skip reason of a delivery whose key is marked done.
	DuplicateReason = "duplicate"
	// MissingKeyReason is the dead-letter reason of MissingKeyDeadLetter.
	MissingKeyReason = "MissingMessageId"
)

// MissingKeyPolicy says what the Filter does with a message that has no key (an empty
// MessageId, or an empty result of Options.Key).
type MissingKeyPolicy int

const (
	// MissingKeyProcess runs the handler without duplicate protection (the default),
	// counted in Stats.Unprotected.
	MissingKeyProcess MissingKeyPolicy = iota
	// MissingKeyDeadLetter dead-letters the message with reason MissingKeyReason, without
	// running the handler: for entities where every sender must set a MessageId.
	MissingKeyDeadLetter
)

// ContendedPolicy says what a delivery does when another owner holds the lease on its key.
type ContendedPolicy int

const (
	// ContendedWait (the default) polls the store every LeasePoll for up to LeaseWait,
	// holding the message (its lock is renewed by the processor). When the other worker
	// succeeds the delivery is skipped as a duplicate; when it fails or its lease expires
	// the delivery is processed; when LeaseWait passes it is abandoned (ErrLeaseHeld).
	// Waiting avoids burning delivery counts in a tight abandon loop while a crashed
	// worker's lease runs out, at the price of a concurrency slot while it waits.
	ContendedWait ContendedPolicy = iota
	// ContendedAbandon abandons at once with an error wrapping ErrLeaseHeld. Each abandon
	// increments the delivery count; the broker dead-letters after MaxDeliveryCount.
	ContendedAbandon
)

// FailurePolicy says what the Filter does when the store cannot be reached (Acquire
// returns an error).
type FailurePolicy int

const (
	// FailClosed (the default) returns a *StoreError, so the delivery is abandoned and
	// retried later: no duplicate is processed, but a long outage burns delivery counts
	// and ends in the dead-letter queue after MaxDeliveryCount.
	FailClosed FailurePolicy = iota
	// FailOpen runs the handler without duplicate protection (counted in
	// Stats.Unprotected): no message waits for the store, duplicates may be processed.
	FailOpen
)

// Options configures a Filter. nil options, and zero fields, mean the documented defaults.
type Options struct {
	// Entity namespaces the default key: "<Entity>:<MessageId>". Service Bus entity
	// paths never contain ':', so keys of different entities never collide. Leave it
	// empty only when the store serves a single entity. It must not contain ':'.
	Entity string

	// Key returns a message's key; "" means the message has no key (see MissingKey).
	// Default: Entity + ":" + MessageID, or "" when MessageID is empty. A custom Key
	// replaces the default entirely (Entity is then unused: namespace keys yourself when
	// a store is shared). It must be fast and safe for concurrent use.
	Key func(message *azservicebus.ReceivedMessage) string

	// MissingKey is the policy for messages without a key. Default: MissingKeyProcess.
	MissingKey MissingKeyPolicy

	// LeaseTTL is how long a processing lease lives without a refresh. While the
	// handler runs the lease is refreshed every LeaseRenewal, so LeaseTTL need not
	// exceed the handler's run; it bounds how long a crashed worker's lease holds back
	// the redelivery of its message. With DisableLeaseRenewal it must exceed the longest
	// handler run: a lease that expires while its handler still runs lets a concurrent
	// duplicate be processed. Default: DefaultLeaseTTL (1 min).
	LeaseTTL time.Duration

	// LeaseRenewal is the interval at which a running handler's lease is refreshed
	// (an Acquire by the same owner, on a timer: no goroutine per message while idle).
	// It must be shorter than LeaseTTL. Default: LeaseTTL / 3.
	LeaseRenewal time.Duration

	// DisableLeaseRenewal turns lease refreshes off. Default: false (refreshes on).
	DisableLeaseRenewal bool

	// Window is how long a done mark lives: a duplicate arriving later is processed
	// again. It must exceed the time a redelivery can take (the lock duration, plus the
	// sender's retry horizon for duplicates sent twice). Default: DefaultWindow (1 h).
	Window time.Duration

	// Contended is the policy for a key leased by another owner. Default: ContendedWait.
	Contended ContendedPolicy

	// LeaseWait bounds ContendedWait. Default: LeaseTTL (long enough for a crashed
	// worker's lease to run out).
	LeaseWait time.Duration

	// LeasePoll is the interval between store checks under ContendedWait. Default:
	// DefaultLeasePoll (500 ms).
	LeasePoll time.Duration

	// StoreFailure is the policy when Acquire fails. Default: FailClosed.
	StoreFailure FailurePolicy

	// StoreTimeout bounds every store call. MarkDone and Release run on a context that
	// keeps the handler context's values but not its cancellation (a lost lock must not
	// prevent recording a success). Default: DefaultStoreTimeout (5 s).
	StoreTimeout time.Duration

	// Hooks are called on notable events. Default: none.
	Hooks Hooks

	// Logger receives warnings about store errors (keys, never payloads).
	// Default: nil, which discards.
	Logger *slog.Logger
}

// Hooks are optional callbacks, called synchronously on the handler's goroutine: they
// must be fast and safe for concurrent use. Nil fields are skipped.
type Hooks struct {
	// OnDuplicate is called when a delivery is skipped because its key is done.
	OnDuplicate func(ctx context.Context, key string, message *azservicebus.ReceivedMessage)
	// OnContended is called once per delivery that found its key leased by another owner.
	OnContended func(ctx context.Context, key string, message *azservicebus.ReceivedMessage)
	// OnStoreError is called for every failed store call, with a *StoreError. A failed
	// OpMarkDone after a successful handler is reported only here: the delivery is still
	// completed (see Filter).
	OnStoreError func(ctx context.Context, err *StoreError)
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
		{"LeaseWait", &r.LeaseWait, 0},
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
	if r.LeaseWait == 0 {
		r.LeaseWait = r.LeaseTTL
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
	if r.Key == nil {
		prefix := r.Entity + ":"
		r.Key = func(m *azservicebus.ReceivedMessage) string {
			if m.MessageID == "" {
				return ""
			}
			return prefix + m.MessageID
		}
	}
	if r.Logger == nil {
		r.Logger = slog.New(slog.DiscardHandler)
	}
	return r, nil
}
