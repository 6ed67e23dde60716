// Package retry turns an [sbkit.RetryOptions] and a component's defaults into a
// backoff/v4 policy. It is the one place where sbkit's retry conventions are implemented.
//
// The nested modules that retry (dedupe/pgdedupe, outbox/pgoutbox) hold byte-identical
// copies of this package in their own internal directories: a module never imports
// another module's internal packages, which carry no compatibility promise across
// versions. Edit the core's files (internal/retry) and copy them over;
// TestInternalCopies, in the core's root package, checks that the copies agree.
package retry

import (
	"context"
	"math"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/sbkit/sbkit"
)

// Unlimited, as Defaults.MaxRetries, retries until the caller's context ends. It is
// only ever a component's default: a user's negative MaxRetries means no retries.
const Unlimited = math.MaxInt32

// Policy is a resolved retry policy: every field has its final value.
type Policy struct {
	MaxRetries    int32         // retries after the first attempt; Unlimited for no bound
	RetryDelay    time.Duration // first delay; 0 for none
	MaxRetryDelay time.Duration // cap; 0 for none
}

// Resolve applies the conventions of [sbkit.RetryOptions] to o: zero fields take def's
// value; a negative MaxRetries means no retries, a negative RetryDelay no delay and a
// negative MaxRetryDelay no cap.
func Resolve(o sbkit.RetryOptions, def Policy) Policy {
	p := def
	switch {
	case o.MaxRetries < 0:
		p.MaxRetries = 0
	case o.MaxRetries > 0:
		p.MaxRetries = o.MaxRetries
	}
	switch {
	case o.RetryDelay < 0:
		p.RetryDelay = 0
	case o.RetryDelay > 0:
		p.RetryDelay = o.RetryDelay
	}
	switch {
	case o.MaxRetryDelay < 0:
		p.MaxRetryDelay = 0
	case o.MaxRetryDelay > 0:
		p.MaxRetryDelay = o.MaxRetryDelay
	}
	return p
}

// BackOff returns a fresh backoff for one operation: exponential from RetryDelay,
// doubling, jittered by ±50%, capped at MaxRetryDelay, stopping after MaxRetries
// retries. It never stops for elapsed time: callers bound an operation by its context.
func (p Policy) BackOff() backoff.BackOff {
	if p.MaxRetries == 0 {
		return &backoff.StopBackOff{}
	}
	var b backoff.BackOff
	if p.RetryDelay <= 0 {
		b = &backoff.ZeroBackOff{}
	} else {
		maxDelay := p.MaxRetryDelay
		if maxDelay <= 0 {
			maxDelay = time.Duration(math.MaxInt64)
		}
		b = capped{backoff.NewExponentialBackOff(
			backoff.WithInitialInterval(p.RetryDelay),
			backoff.WithMaxInterval(maxDelay),
			backoff.WithMultiplier(2),
			backoff.WithRandomizationFactor(0.5),
			backoff.WithMaxElapsedTime(0),
		), maxDelay}
	}
	if p.MaxRetries == Unlimited {
		return b
	}
	return backoff.WithMaxRetries(b, uint64(p.MaxRetries))
}

// capped holds every delay of b to max: backoff/v4 caps the interval before its jitter and
// never caps the first one, so on its own a delay can exceed MaxRetryDelay by half.
type capped struct {
	backoff.BackOff
	max time.Duration
}

func (c capped) NextBackOff() time.Duration {
	d := c.BackOff.NextBackOff()
	if d == backoff.Stop {
		return d
	}
	return min(d, c.max)
}

// Wait waits d before a retry and reports true, or reports false as soon as ctx ends.
// A ctx that has already ended reports false whatever d is, so Wait(ctx, 0) is a check
// of ctx (a select between a timer that has fired and an ended ctx picks either).
func Wait(ctx context.Context, d time.Duration) bool {
	if ctx.Err() != nil {
		return false
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
