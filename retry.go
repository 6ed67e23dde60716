package sbkit

import "time"

// RetryOptions describes how an operation that failed with a transient error
// ([IsTransient]) is retried. It has the field names and conventions of
// [azservicebus.RetryOptions]: the delay before retry n is about RetryDelay × 2ⁿ⁻¹ (with
// jitter), capped at MaxRetryDelay.
//
// The zero value of each field means the default of the component that uses it; each
// component documents its defaults where it embeds RetryOptions. Errors that are not
// transient are never retried.
type RetryOptions struct {
	// MaxRetries is how many times a failed operation is retried after its first attempt.
	// Zero means the component's default; a negative value means one attempt and no
	// retries.
	MaxRetries int32
	// RetryDelay is the delay before the first retry; it doubles with each further retry
	// up to MaxRetryDelay. Zero means the component's default; a negative value means no
	// delay between retries.
	RetryDelay time.Duration
	// MaxRetryDelay caps the delay between two retries. Zero means the component's
	// default; a negative value means no cap.
	MaxRetryDelay time.Duration
}
