package retry

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/sbkit/sbkit"
)

func TestResolve(t *testing.T) {
	def := Policy{MaxRetries: 5, RetryDelay: 100 * time.Millisecond, MaxRetryDelay: 10 * time.Second}
	tests := []struct {
		name string
		in   sbkit.RetryOptions
		want Policy
	}{
		{"zero takes defaults", sbkit.RetryOptions{}, def},
		{"set values win", sbkit.RetryOptions{MaxRetries: 2, RetryDelay: time.Second, MaxRetryDelay: time.Minute},
			Policy{2, time.Second, time.Minute}},
		{"negative means none", sbkit.RetryOptions{MaxRetries: -1, RetryDelay: -1, MaxRetryDelay: -1}, Policy{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Resolve(tt.in, def); got != tt.want {
				t.Fatalf("Resolve(%+v) = %+v, want %+v", tt.in, got, tt.want)
			}
		})
	}
}

func TestBackOff(t *testing.T) {
	t.Run("no retries stops at once", func(t *testing.T) {
		if d := (Policy{}).BackOff().NextBackOff(); d != backoff.Stop {
			t.Fatalf("NextBackOff = %v, want Stop", d)
		}
	})
	t.Run("bounded retries", func(t *testing.T) {
		b := Policy{MaxRetries: 3, RetryDelay: 10 * time.Millisecond, MaxRetryDelay: 25 * time.Millisecond}.BackOff()
		for i := range 3 {
			d := b.NextBackOff()
			if d == backoff.Stop || d > 25*time.Millisecond*3/2 || d < 5*time.Millisecond {
				t.Fatalf("retry %d: delay %v outside [5ms, 37.5ms]", i+1, d)
			}
		}
		if d := b.NextBackOff(); d != backoff.Stop {
			t.Fatalf("fourth NextBackOff = %v, want Stop", d)
		}
	})
	t.Run("no delay", func(t *testing.T) {
		b := Policy{MaxRetries: 2}.BackOff()
		if d := b.NextBackOff(); d != 0 {
			t.Fatalf("NextBackOff = %v, want 0", d)
		}
	})
	t.Run("unlimited never stops", func(t *testing.T) {
		b := Policy{MaxRetries: Unlimited, RetryDelay: time.Millisecond, MaxRetryDelay: time.Millisecond}.BackOff()
		for i := range 1000 {
			if b.NextBackOff() == backoff.Stop {
				t.Fatalf("stopped after %d retries", i)
			}
		}
	})
}

// MaxRetryDelay bounds every delay, the first one and the jittered ones included.
func TestBackOffNeverExceedsMaxRetryDelay(t *testing.T) {
	for _, p := range []Policy{
		{MaxRetries: 20, RetryDelay: time.Second, MaxRetryDelay: 100 * time.Millisecond},
		{MaxRetries: 20, RetryDelay: 100 * time.Millisecond, MaxRetryDelay: 150 * time.Millisecond},
	} {
		for range 50 {
			b := p.BackOff()
			for i := range p.MaxRetries {
				if d := b.NextBackOff(); d > p.MaxRetryDelay || d == backoff.Stop {
					t.Fatalf("%+v: delay %d = %v, want at most %v", p, i, d, p.MaxRetryDelay)
				}
			}
			if d := b.NextBackOff(); d != backoff.Stop {
				t.Fatalf("%+v: delay after MaxRetries = %v, want Stop", p, d)
			}
		}
	}
}

// TestWait: Wait reports true after the whole delay, and false as soon as its context
// ends.
func TestWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		if !Wait(context.Background(), time.Second) || time.Since(start) != time.Second {
			t.Errorf("Wait(1s) returned after %v, want true after 1s", time.Since(start))
		}
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		start = time.Now()
		if Wait(ctx, time.Hour) || time.Since(start) != 100*time.Millisecond {
			t.Errorf("Wait(1h) with a 100 ms context returned after %v, want false at 100 ms", time.Since(start))
		}
	})
}

// TestWaitEndedContext: a context that has ended wins over a delay that has run out, so
// a caller whose context ended never retries once more (Wait(ctx, 0) is false).
func TestWaitEndedContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for i := range 1000 {
		if Wait(ctx, 0) {
			t.Fatalf("call %d: Wait(ended ctx, 0) = true, want false", i+1)
		}
	}
}
