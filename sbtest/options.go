package sbtest

import (
	"fmt"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus/admin"
	"github.com/sbkit/sbkit"
)

const (
	// DefaultLockDuration is the LockDuration of an entity that sets none.
	DefaultLockDuration = 60 * time.Second
	// MaxLockDuration is the largest LockDuration Service Bus accepts.
	MaxLockDuration = 5 * time.Minute
	// DefaultMaxDeliveryCount is the MaxDeliveryCount of an entity that sets none.
	DefaultMaxDeliveryCount = 10
	// DefaultMaxMessageSize is the MaxMessageSize of a namespace that sets none: 256 KiB,
	// the Standard tier's limit.
	DefaultMaxMessageSize = 256 * 1024
	// MaxDeliveryCountExceededReason is the dead-letter reason of a message whose delivery
	// count exceeded the entity's MaxDeliveryCount, as the service sets it.
	MaxDeliveryCountExceededReason = "MaxDeliveryCountExceeded"
)

// EntityOptions configures a queue, topic or subscription. The zero value (and nil) means
// defaults. On a topic only DefaultTTL and DuplicateDetectionWindow matter; on a
// subscription DuplicateDetectionWindow is ignored (the topic detects duplicates).
type EntityOptions struct {
	// LockDuration is how long a peek-lock lasts; default 60s, at most 5 minutes.
	LockDuration time.Duration
	// MaxDeliveryCount is how many deliveries a message gets before the broker
	// dead-letters it with reason MaxDeliveryCountExceeded; default 10.
	MaxDeliveryCount int
	// DefaultTTL is the entity's default time-to-live and caps every message's own TTL
	// ([sbkit.EffectiveTTL]); 0 means none ([sbkit.MaxTTL]). A subscription's effective
	// default is sbkit.SubscriptionDefaultTTL(topic's, subscription's).
	DefaultTTL time.Duration
	// DeadLetterOnExpiration moves expired messages to the dead-letter queue with reason
	// [sbkit.TTLExpiredReason] instead of dropping them.
	DeadLetterOnExpiration bool
	// DuplicateDetectionWindow, when positive, makes the broker drop a message whose
	// non-empty MessageID was accepted within the window; the send still succeeds.
	// 0 means off.
	DuplicateDetectionWindow time.Duration
	// RequiresSession makes a queue or subscription session-aware: every message sent
	// to it must have a SessionID, only session receivers (AcceptSession*,
	// AcceptNextSession*) read its main queue, and a session's messages are delivered in
	// order to the one receiver holding its lock. Its dead-letter queue is read by plain
	// receivers. Default false; ignored on a topic.
	RequiresSession bool
	// ForwardTo, when not empty, names the queue or topic every message arriving in
	// this queue or subscription is passed on to (auto-forwarding, forward.go); the
	// entity itself keeps none. Default: none.
	ForwardTo string
	// ForwardDeadLetteredMessagesTo, when not empty, names the queue or topic the
	// entity's dead-lettered messages go to instead of its dead-letter queue, with
	// DeadLetterSource set. Default: none.
	ForwardDeadLetteredMessagesTo string
	// DefaultRule, when not nil, is the only rule a subscription is created with, instead
	// of DefaultRuleName's true filter, as the SDK admin client's
	// SubscriptionProperties.DefaultRule asks ("Topic filters and actions"). The
	// subscription has it from its first instant: a message sent to the topic while the
	// subscription is created is routed by it. An empty Name means DefaultRuleName; a bad
	// name, filter or action is ErrInvalidOptions and creates nothing. Used by
	// Topic.NewSubscription only; Options reports it as nil.
	DefaultRule *admin.RuleProperties
}

func (o *EntityOptions) normalize() (EntityOptions, error) {
	var n EntityOptions
	if o != nil {
		n = *o
	}
	n.DefaultRule = nil // read by NewSubscription before it normalizes
	switch {
	case n.LockDuration < 0 || n.LockDuration > MaxLockDuration:
		return n, fmt.Errorf("%w: LockDuration %v not in [0, %v]", ErrInvalidOptions, n.LockDuration, MaxLockDuration)
	case n.MaxDeliveryCount < 0:
		return n, fmt.Errorf("%w: negative MaxDeliveryCount %d", ErrInvalidOptions, n.MaxDeliveryCount)
	case n.DefaultTTL < 0:
		return n, fmt.Errorf("%w: negative DefaultTTL %v", ErrInvalidOptions, n.DefaultTTL)
	case n.DuplicateDetectionWindow < 0:
		return n, fmt.Errorf("%w: negative DuplicateDetectionWindow %v", ErrInvalidOptions, n.DuplicateDetectionWindow)
	}
	if n.LockDuration == 0 {
		n.LockDuration = DefaultLockDuration
	}
	if n.MaxDeliveryCount == 0 {
		n.MaxDeliveryCount = DefaultMaxDeliveryCount
	}
	if n.DefaultTTL == 0 {
		n.DefaultTTL = sbkit.MaxTTL
	}
	return n, nil
}
