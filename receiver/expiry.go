package receiver

import (
	"context"
	"fmt"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/sbkit/sbkit"
)

// ExpiredPolicy says what the Expiry middleware does with a message that has already
// expired when it reaches the handler. Service Bus lets the holder of a lock settle an
// expired message normally: what to do is the application's choice.
type ExpiredPolicy int

const (
	// ExpiredSkip completes the message without calling the handler ([sbkit.Skip]): what
	// the broker does with an expired message of an entity without dead-lettering on
	// expiration, which drops it ("Message expiration (Time to Live)",
	// https://learn.microsoft.com/azure/service-bus-messaging/message-expiration). On an
	// entity with dead-lettering on expiration the broker would have kept a copy in the
	// dead-letter queue: use ExpiredDeadLetter there, or the message is lost. The zero
	// value.
	ExpiredSkip ExpiredPolicy = iota
	// ExpiredDeadLetter dead-letters the message with reason [sbkit.TTLExpiredReason], as
	// an entity with dead-lettering on expiration does ("Message expiration (Time to
	// Live)"). The policy for such entities.
	ExpiredDeadLetter
	// ExpiredProcess calls the handler anyway.
	ExpiredProcess
)

// ExpiryOptions configure the Expiry middleware. The zero value (and nil) skips expired
// messages and leaves the handler's context alone.
type ExpiryOptions struct {
	// Policy is what happens to an already-expired message. Default ExpiredSkip.
	Policy ExpiredPolicy
	// Deadline bounds the handler's context by the message's expiry ([sbkit.MessageExpiresAt]),
	// with cause ErrMessageExpired, so that work on a message nobody wants any more stops.
	// Default false.
	Deadline bool
	// Now returns the current time. Default [time.Now].
	Now func() time.Time
}

// Expiry returns middleware that applies an expiry policy (from the root TTL helpers:
// [sbkit.IsExpired], [sbkit.MessageExpiresAt]) before the handler runs. A message whose
// expiry cannot be known is never expired. An unknown Policy is treated as ExpiredProcess.
func Expiry(options *ExpiryOptions) sbkit.Middleware {
	var o ExpiryOptions
	if options != nil {
		o = *options
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return func(next sbkit.Handler) sbkit.Handler {
		return func(ctx context.Context, m *azservicebus.ReceivedMessage) error {
			expiresAt, known := sbkit.MessageExpiresAt(m)
			if known {
				now := o.Now()
				if !now.Before(expiresAt) {
					switch o.Policy {
					case ExpiredSkip:
						return sbkit.Skip(sbkit.TTLExpiredReason)
					case ExpiredDeadLetter:
						return sbkit.DeadLetter(sbkit.TTLExpiredReason,
							fmt.Sprintf("message expired at %s, %s before it reached the handler",
								expiresAt.UTC().Format(time.RFC3339Nano), now.Sub(expiresAt)), nil)
					}
				} else if o.Deadline {
					var cancel context.CancelFunc
					ctx, cancel = context.WithDeadlineCause(ctx, expiresAt, ErrMessageExpired)
					defer cancel()
				}
			}
			return next(ctx, m)
		}
	}
}
