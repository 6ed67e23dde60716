package sbkit

import (
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
)

// MaxTTL is the time-to-live of a message or entity that sets none: the largest
// [time.Duration], as Service Bus uses the largest signed 64-bit value.
const MaxTTL = time.Duration(math.MaxInt64)

// TTLExpiredReason is the dead-letter reason Service Bus gives a message that expired, and
// the one sbkit uses when it dead-letters an expired message itself.
const TTLExpiredReason = "TTLExpiredException"

// ErrInvalidTTL is returned (wrapped) by [SetTTL] for a time-to-live that is zero or
// negative.
var ErrInvalidTTL = errors.New("sbkit: time-to-live must be positive")

// ErrInvalidSchedule is returned by [SetSchedule] for the zero time.
var ErrInvalidSchedule = errors.New("sbkit: scheduled enqueue time is the zero time")

// maxTime is the latest [time.Time] that arithmetic here returns instead of overflowing.
var maxTime = time.Unix(math.MaxInt64-62135596801, 999999999).UTC()

// ExpiresAt returns enqueued + ttl: the instant a message stops being deliverable. A ttl of
// zero or less means no TTL ([MaxTTL]). The sum saturates at the latest representable time
// instead of overflowing.
func ExpiresAt(enqueued time.Time, ttl time.Duration) time.Time {
	if ttl <= 0 {
		ttl = MaxTTL
	}
	if enqueued.After(maxTime.Add(-ttl)) {
		return maxTime
	}
	return enqueued.Add(ttl)
}

// EffectiveTTL returns the time-to-live the broker applies to a message: the message's own
// TTL when set, capped silently at the entity's default; the entity's default when the
// message sets none. An entity default of zero or less means none ([MaxTTL]).
func EffectiveTTL(messageTTL *time.Duration, entityDefault time.Duration) time.Duration {
	if entityDefault <= 0 {
		entityDefault = MaxTTL
	}
	if messageTTL == nil || *messageTTL <= 0 || *messageTTL > entityDefault {
		return entityDefault
	}
	return *messageTTL
}

// SubscriptionDefaultTTL returns the default time-to-live that applies to messages in a
// subscription: the smaller of the topic's and the subscription's, since a topic TTL
// smaller than the subscription's wins. Zero or less means none for either.
func SubscriptionDefaultTTL(topicDefault, subscriptionDefault time.Duration) time.Duration {
	if topicDefault <= 0 {
		topicDefault = MaxTTL
	}
	if subscriptionDefault <= 0 {
		subscriptionDefault = MaxTTL
	}
	return min(topicDefault, subscriptionDefault)
}

// EnqueueTime returns when a message sent at sentAt is enqueued: its
// ScheduledEnqueueTime when that is later than sentAt, sentAt otherwise. A scheduled
// message's TTL counts from this time, not from when it was sent.
func EnqueueTime(message *azservicebus.Message, sentAt time.Time) time.Time {
	if message != nil && message.ScheduledEnqueueTime != nil && message.ScheduledEnqueueTime.After(sentAt) {
		return *message.ScheduledEnqueueTime
	}
	return sentAt
}

// MessageExpiresAt returns when a received message expires: its ExpiresAt when the broker
// set it, otherwise EnqueuedTime + TimeToLive. ok is false when neither can be known.
//
// A TimeToLive of zero or less means the message carried no TTL, and its expiry is
// unknown: Service Bus sends no ttl in the AMQP header of a message sent without one
// (the entity's default applies at the broker), and the SDK then reports TimeToLive 0 and
// ExpiresAt equal to EnqueuedTime. Service Bus accepts no zero TTL, so no real expiry is
// lost by ignoring it.
func MessageExpiresAt(message *azservicebus.ReceivedMessage) (expiresAt time.Time, ok bool) {
	switch {
	case message == nil:
		return time.Time{}, false
	case message.TimeToLive != nil && *message.TimeToLive <= 0:
		return time.Time{}, false
	case message.ExpiresAt != nil:
		return *message.ExpiresAt, true
	case message.EnqueuedTime != nil && message.TimeToLive != nil:
		return ExpiresAt(*message.EnqueuedTime, *message.TimeToLive), true
	}
	return time.Time{}, false
}

// Remaining returns how long a received message has before it expires, as seen at now:
// negative once expired, [MaxTTL] when its expiry cannot be known.
func Remaining(message *azservicebus.ReceivedMessage, now time.Time) time.Duration {
	expiresAt, ok := MessageExpiresAt(message)
	if !ok {
		return MaxTTL
	}
	return expiresAt.Sub(now)
}

// IsExpired reports whether a received message's expiry is at or before now. A message
// whose expiry cannot be known is not expired. A message can be expired and still locked
// by its receiver: Service Bus lets the lock holder settle it normally.
func IsExpired(message *azservicebus.ReceivedMessage, now time.Time) bool {
	expiresAt, ok := MessageExpiresAt(message)
	return ok && !now.Before(expiresAt)
}

// SetTTL sets an outgoing message's TimeToLive. It returns [ErrNilMessage] for a nil message
// and [ErrInvalidTTL] for a ttl of zero or less. The broker caps the TTL at the entity's
// default silently.
func SetTTL(message *azservicebus.Message, ttl time.Duration) error {
	if message == nil {
		return ErrNilMessage
	}
	if ttl <= 0 {
		return fmt.Errorf("%w: %v", ErrInvalidTTL, ttl)
	}
	message.TimeToLive = &ttl
	return nil
}

// SetSchedule sets an outgoing message's ScheduledEnqueueTime, so that the broker makes it
// available only at that time; its TTL starts counting then. It returns [ErrNilMessage] for
// a nil message and [ErrInvalidSchedule] for the zero time.
func SetSchedule(message *azservicebus.Message, enqueueAt time.Time) error {
	if message == nil {
		return ErrNilMessage
	}
	if enqueueAt.IsZero() {
		return ErrInvalidSchedule
	}
	t := enqueueAt.UTC()
	message.ScheduledEnqueueTime = &t
	return nil
}
