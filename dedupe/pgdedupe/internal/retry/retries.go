package retry

import (
	"time"

	"github.com/cenkalti/backoff/v4"
)

// Retries paces the retries of one operation under a Policy: the delay before each
// retry, jittered and growing as [Policy.BackOff] says, until the policy allows no more.
// Its backoff is made at the first failure, so an operation that succeeds at once
// allocates nothing. Reset starts a new series after a success (a loop that retries
// consecutive failures only). The zero value allows no retry. A Retries is for one
// goroutine; make one per operation with [Policy.Retries].
//
// The loop it serves, in every caller:
//
//	rs := policy.Retries()
//	for {
//		err := op()
//		if err == nil || !retryable(err) { ... }
//		d, ok := rs.Next()
//		if !ok { ... } // exhausted: give up with err
//		if !Wait(ctx, d) { ... } // ctx ended first
//	}
type Retries struct {
	p  Policy
	bo backoff.BackOff // nil until the first Next after a Reset
}

// Retries returns the retries of one operation under p.
func (p Policy) Retries() Retries { return Retries{p: p} }

// Next returns the delay before the next retry and true, or false when the policy
// allows no more retries (MaxRetries of them since the last Reset).
func (r *Retries) Next() (time.Duration, bool) {
	if r.bo == nil {
		r.bo = r.p.BackOff()
	}
	d := r.bo.NextBackOff()
	return d, d != backoff.Stop
}

// Reset forgets the retries so far: the next failure is the first of a new series, its
// delay the policy's first.
func (r *Retries) Reset() { r.bo = nil }
