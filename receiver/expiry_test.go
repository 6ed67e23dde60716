package receiver_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/sbkit/sbkit"
	"github.com/sbkit/sbkit/receiver"
)

func TestExpiryMiddleware(t *testing.T) {
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	at := func(d time.Duration) *time.Time { t := now.Add(d); return &t }
	ttl := func(d time.Duration) *time.Duration { return &d }
	tests := []struct {
		name       string
		msg        *azservicebus.ReceivedMessage
		opts       *receiver.ExpiryOptions
		wantCalled bool
		wantAction sbkit.Action
		wantErr    bool
		wantReason string
	}{
		{"expired, default skips", &azservicebus.ReceivedMessage{ExpiresAt: at(-time.Second)}, nil, false, sbkit.ActionComplete, true, sbkit.TTLExpiredReason},
		{"expired exactly now", &azservicebus.ReceivedMessage{ExpiresAt: at(0)}, nil, false, sbkit.ActionComplete, true, sbkit.TTLExpiredReason},
		{"expired, dead-letter", &azservicebus.ReceivedMessage{ExpiresAt: at(-time.Minute)}, &receiver.ExpiryOptions{Policy: receiver.ExpiredDeadLetter}, false, sbkit.ActionDeadLetter, true, sbkit.TTLExpiredReason},
		{"expired, process", &azservicebus.ReceivedMessage{ExpiresAt: at(-time.Minute)}, &receiver.ExpiryOptions{Policy: receiver.ExpiredProcess}, true, sbkit.ActionComplete, false, ""},
		{"expiry from EnqueuedTime + TTL", &azservicebus.ReceivedMessage{EnqueuedTime: at(-time.Hour), TimeToLive: ttl(time.Minute)}, nil, false, sbkit.ActionComplete, true, sbkit.TTLExpiredReason},
		{"not expired", &azservicebus.ReceivedMessage{ExpiresAt: at(time.Second)}, &receiver.ExpiryOptions{Policy: receiver.ExpiredDeadLetter}, true, sbkit.ActionComplete, false, ""},
		{"unknown expiry is not expired", &azservicebus.ReceivedMessage{}, nil, true, sbkit.ActionComplete, false, ""},
		{"nil message", nil, nil, true, sbkit.ActionComplete, false, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := &receiver.ExpiryOptions{Now: func() time.Time { return now }}
			if tt.opts != nil {
				o.Policy = tt.opts.Policy
			}
			called := false
			h := sbkit.Chain(func(context.Context, *azservicebus.ReceivedMessage) error {
				called = true
				return nil
			}, receiver.Expiry(o))
			err := h(context.Background(), tt.msg)
			action, se := sbkit.SettlementOf(err)
			if called != tt.wantCalled || action != tt.wantAction || (err != nil) != tt.wantErr {
				t.Fatalf("called %v, result %v", called, err)
			}
			if tt.wantReason != "" && se.Reason != tt.wantReason {
				t.Errorf("reason %q, want %q", se.Reason, tt.wantReason)
			}
			if action == sbkit.ActionDeadLetter && !strings.Contains(se.Description, "expired at 2026-11-22T11:59:00Z") {
				t.Errorf("description %q", se.Description)
			}
		})
	}
}

// With Deadline, the handler's context ends at the message's expiry with cause
// ErrMessageExpired.
func TestExpiryDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		expires := time.Now().Add(time.Minute)
		var cause error
		var deadline time.Time
		h := receiver.Expiry(&receiver.ExpiryOptions{Deadline: true})(func(ctx context.Context, _ *azservicebus.ReceivedMessage) error {
			deadline, _ = ctx.Deadline()
			<-ctx.Done()
			cause = context.Cause(ctx)
			return ctx.Err()
		})
		begin := time.Now()
		if err := h(context.Background(), &azservicebus.ReceivedMessage{ExpiresAt: &expires}); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("handler result %v", err)
		}
		if !deadline.Equal(expires) || !errors.Is(cause, receiver.ErrMessageExpired) || time.Since(begin) != time.Minute {
			t.Errorf("deadline %v, cause %v, after %v", deadline, cause, time.Since(begin))
		}
	})
}

// A message that expires while it waits, locked, for a busy handler is dead-lettered with
// reason TTLExpiredException when it reaches the handler: expiry does not affect a locked
// message, the application decides.
func TestExpiredWhileBuffered(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, nil)
		slow, short := "slow", "short"
		_ = e.s.SendMessage(context.Background(), &azservicebus.Message{MessageID: &slow}, nil)
		m := &azservicebus.Message{MessageID: &short}
		_ = sbkit.SetTTL(m, 10*time.Second)
		_ = e.s.SendMessage(context.Background(), m, nil)
		var handled []string
		h := sbkit.Chain(func(ctx context.Context, m *azservicebus.ReceivedMessage) error {
			handled = append(handled, m.MessageID)
			time.Sleep(30 * time.Second)
			return nil
		}, receiver.Expiry(&receiver.ExpiryOptions{Policy: receiver.ExpiredDeadLetter}))
		p := newProcessor(t, e.r, h, &receiver.Options{MaxConcurrency: 1, PrefetchCount: 1})
		wait := start(t, p, context.Background())
		time.Sleep(time.Minute)
		synctest.Wait()
		_ = p.Close(context.Background())
		_ = wait()
		dl := e.q.DeadLetters()
		if len(handled) != 1 || handled[0] != "slow" || len(dl) != 1 || dl[0].MessageID != "short" || *dl[0].DeadLetterReason != sbkit.TTLExpiredReason {
			t.Errorf("handled %v, dead letters %d", handled, len(dl))
		}
		if s := p.Stats(); s.Completed != 1 || s.DeadLettered != 1 || s.LocksLost != 0 {
			t.Errorf("stats %+v", s)
		}
	})
}
