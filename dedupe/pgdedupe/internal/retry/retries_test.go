package retry

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"
)

// retryLoop is the loop Retries serves, as its callers write it: op until it succeeds,
// Next's delay between failures, giving up when the policy or ctx does. It returns the
// attempts made, the last error, and whether ctx ended the retries.
func retryLoop(ctx context.Context, p Policy, op func() error) (attempts int, err error, ended bool) {
	rs := p.Retries()
	for {
		attempts++
		if err = op(); err == nil {
			return attempts, nil, false
		}
		d, ok := rs.Next()
		if !ok {
			return attempts, err, false
		}
		if !Wait(ctx, d) {
			return attempts, err, true
		}
	}
}

// TestRetriesTiming: the delays between attempts follow the policy (the interval
// doubles from RetryDelay up to MaxRetryDelay, each delay is the interval jittered by
// ±50% and capped at MaxRetryDelay: 100, 200, 300, 300 ms), and the attempt after the
// last retry fails at once: MaxRetries+1 attempts in all.
func TestRetriesTiming(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := Policy{MaxRetries: 4, RetryDelay: 100 * time.Millisecond, MaxRetryDelay: 300 * time.Millisecond}
		ms := time.Millisecond
		bounds := [][2]time.Duration{{50 * ms, 150 * ms}, {100 * ms, 300 * ms}, {150 * ms, 300 * ms}, {150 * ms, 300 * ms}}
		var at []time.Time
		fail := errors.New("transient")
		attempts, err, ended := retryLoop(t.Context(), p, func() error {
			at = append(at, time.Now())
			return fail
		})
		if attempts != 5 || err != fail || ended {
			t.Fatalf("retryLoop = %d attempts, %v, ended %v; want 5, %v, false", attempts, err, ended, fail)
		}
		for i, b := range bounds {
			if d := at[i+1].Sub(at[i]); d < b[0] || d > b[1] {
				t.Errorf("delay before retry %d = %v, want within [%v, %v]", i+1, d, b[0], b[1])
			}
		}
	})
}

// TestRetriesSucceeds: a success ends the loop without waiting further, and an
// operation that succeeds at once makes no backoff (no allocation).
func TestRetriesSucceeds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		n := 0
		attempts, err, _ := retryLoop(t.Context(), Policy{MaxRetries: 5, RetryDelay: time.Second}, func() error {
			if n++; n < 3 {
				return errors.New("transient")
			}
			return nil
		})
		if attempts != 3 || err != nil {
			t.Fatalf("retryLoop = %d attempts, %v; want 3, nil", attempts, err)
		}
		if took := time.Since(start); took < 1500*time.Millisecond || took > 4500*time.Millisecond {
			t.Fatalf("two retries took %v, want within [1.5s, 4.5s]", took)
		}
	})
	p := Policy{MaxRetries: 5, RetryDelay: time.Second}
	if n := testing.AllocsPerRun(100, func() {
		rs := p.Retries()
		_ = rs
	}); n != 0 {
		t.Fatalf("Retries of an operation that never fails: %v allocations, want 0", n)
	}
}

// TestRetriesCancel: ctx's end ends the wait at once, whatever the delay, and a ctx that
// has ended makes no further attempt.
func TestRetriesCancel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		time.AfterFunc(100*time.Millisecond, cancel)
		start := time.Now()
		attempts, err, ended := retryLoop(ctx, Policy{MaxRetries: Unlimited, RetryDelay: time.Hour}, func() error {
			return errors.New("transient")
		})
		if attempts != 1 || err == nil || !ended {
			t.Fatalf("retryLoop = %d attempts, %v, ended %v; want 1, an error, true", attempts, err, ended)
		}
		if took := time.Since(start); took != 100*time.Millisecond {
			t.Fatalf("cancelled at 100 ms, the retries ended after %v", took)
		}
	})
}

// TestRetriesStop: Next reports false once MaxRetries retries were given (at once, with
// no delay), for good until Reset; a zero Retries and a policy without retries give none.
func TestRetriesStop(t *testing.T) {
	rs := Policy{MaxRetries: 2, RetryDelay: time.Millisecond}.Retries()
	for i := range 2 {
		if _, ok := rs.Next(); !ok {
			t.Fatalf("retry %d refused, want 2 retries", i+1)
		}
	}
	for range 3 {
		if d, ok := rs.Next(); ok {
			t.Fatalf("Next after MaxRetries = %v, true; want false", d)
		}
	}
	var zero Retries
	if _, ok := zero.Next(); ok {
		t.Fatal("zero Retries allowed a retry")
	}
	none := Policy{RetryDelay: time.Second}.Retries()
	if _, ok := none.Next(); ok {
		t.Fatal("MaxRetries 0 allowed a retry")
	}
}

// TestRetriesReset: after Reset the series starts again: MaxRetries more retries, the
// first with the policy's first delay however far the previous series got.
func TestRetriesReset(t *testing.T) {
	p := Policy{MaxRetries: 3, RetryDelay: 100 * time.Millisecond, MaxRetryDelay: time.Minute}
	rs := p.Retries()
	for range 3 {
		rs.Next()
	}
	if _, ok := rs.Next(); ok {
		t.Fatal("Next after MaxRetries allowed a retry")
	}
	rs.Reset()
	for i := range 3 {
		d, ok := rs.Next()
		if !ok {
			t.Fatalf("retry %d after Reset refused", i+1)
		}
		if i == 0 && (d < 50*time.Millisecond || d > 150*time.Millisecond) {
			t.Fatalf("first delay after Reset = %v, want within [50ms, 150ms]", d)
		}
	}
}

// TestRetriesUnlimited: an Unlimited policy never stops.
func TestRetriesUnlimited(t *testing.T) {
	rs := Policy{MaxRetries: Unlimited, RetryDelay: time.Millisecond, MaxRetryDelay: time.Second}.Retries()
	for i := range 10000 {
		if _, ok := rs.Next(); !ok {
			t.Fatalf("Unlimited stopped after %d retries", i)
		}
	}
}
