package sbkit_test

import (
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/sbkit/sbkit"
)

func ptr[T any](v T) *T { return &v }

var t0 = time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)

func TestExpiresAt(t *testing.T) {
	latest := time.Unix(1<<63-1-62135596801, 999999999).UTC()
	tests := []struct {
		name     string
		enqueued time.Time
		ttl      time.Duration
		want     time.Time
	}{
		{"enqueued plus ttl", t0, 10 * time.Minute, t0.Add(10 * time.Minute)},
		{"no ttl is the maximum duration", t0, 0, t0.Add(sbkit.MaxTTL)},
		{"negative ttl means none", t0, -time.Second, t0.Add(sbkit.MaxTTL)},
		{"max ttl from far future saturates instead of overflowing", latest.Add(-time.Hour), sbkit.MaxTTL, latest},
		{"max ttl from the year 2026 does not overflow", t0, sbkit.MaxTTL, t0.Add(sbkit.MaxTTL)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := sbkit.ExpiresAt(tc.enqueued, tc.ttl)
			if !got.Equal(tc.want) {
				t.Fatalf("ExpiresAt(%v, %v) = %v, want %v", tc.enqueued, tc.ttl, got, tc.want)
			}
			if got.Before(tc.enqueued) {
				t.Fatalf("ExpiresAt went back in time: %v before %v", got, tc.enqueued)
			}
		})
	}
}

func TestEffectiveTTL(t *testing.T) {
	tests := []struct {
		name          string
		messageTTL    *time.Duration
		entityDefault time.Duration
		want          time.Duration
	}{
		{"message ttl below entity default is kept", ptr(time.Minute), time.Hour, time.Minute},
		{"message ttl above entity default is silently capped", ptr(2 * time.Hour), time.Hour, time.Hour},
		{"message ttl equal to default", ptr(time.Hour), time.Hour, time.Hour},
		{"no message ttl takes the entity default", nil, time.Hour, time.Hour},
		{"no ttl anywhere is the maximum duration", nil, 0, sbkit.MaxTTL},
		{"message ttl with no entity default is kept", ptr(time.Minute), 0, time.Minute},
		{"zero message ttl counts as unset", ptr(time.Duration(0)), time.Hour, time.Hour},
		{"basic tier default of 14 days caps", ptr(30 * 24 * time.Hour), 14 * 24 * time.Hour, 14 * 24 * time.Hour},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := sbkit.EffectiveTTL(tc.messageTTL, tc.entityDefault); got != tc.want {
				t.Fatalf("EffectiveTTL = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestSubscriptionDefaultTTL(t *testing.T) {
	tests := []struct {
		name       string
		topic, sub time.Duration
		want       time.Duration
	}{
		{"topic smaller than subscription wins", time.Minute, time.Hour, time.Minute},
		{"subscription smaller than topic", time.Hour, time.Minute, time.Minute},
		{"topic unset", 0, time.Minute, time.Minute},
		{"subscription unset", time.Minute, 0, time.Minute},
		{"both unset is the maximum", 0, 0, sbkit.MaxTTL},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := sbkit.SubscriptionDefaultTTL(tc.topic, tc.sub); got != tc.want {
				t.Fatalf("SubscriptionDefaultTTL(%v, %v) = %v, want %v", tc.topic, tc.sub, got, tc.want)
			}
		})
	}
}

// The example of "Message expiration (Time to Live)": scheduled 5 minutes from now with a
// 10 minute TTL expires 15 minutes from now, because the TTL clock starts at the
// scheduled enqueue time.
func TestScheduledMessageTTLStartsAtEnqueue(t *testing.T) {
	msg := &azservicebus.Message{}
	if err := sbkit.SetSchedule(msg, t0.Add(5*time.Minute)); err != nil {
		t.Fatal(err)
	}
	if err := sbkit.SetTTL(msg, 10*time.Minute); err != nil {
		t.Fatal(err)
	}
	enqueued := sbkit.EnqueueTime(msg, t0)
	if want := t0.Add(5 * time.Minute); !enqueued.Equal(want) {
		t.Fatalf("EnqueueTime = %v, want %v", enqueued, want)
	}
	got := sbkit.ExpiresAt(enqueued, sbkit.EffectiveTTL(msg.TimeToLive, 0))
	if want := t0.Add(15 * time.Minute); !got.Equal(want) {
		t.Fatalf("expires at %v, want %v (5 min schedule + 10 min TTL)", got, want)
	}
}

func TestEnqueueTime(t *testing.T) {
	tests := []struct {
		name string
		msg  *azservicebus.Message
		want time.Time
	}{
		{"unscheduled is enqueued when sent", &azservicebus.Message{}, t0},
		{"scheduled in the past is enqueued when sent", &azservicebus.Message{ScheduledEnqueueTime: ptr(t0.Add(-time.Minute))}, t0},
		{"scheduled in the future", &azservicebus.Message{ScheduledEnqueueTime: ptr(t0.Add(time.Hour))}, t0.Add(time.Hour)},
		{"nil message", nil, t0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := sbkit.EnqueueTime(tc.msg, t0); !got.Equal(tc.want) {
				t.Fatalf("EnqueueTime = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestReceivedMessageExpiry(t *testing.T) {
	tests := []struct {
		name          string
		msg           *azservicebus.ReceivedMessage
		now           time.Time
		wantExpiresAt time.Time
		wantKnown     bool
		wantRemaining time.Duration
		wantExpired   bool
	}{
		{
			name:          "broker ExpiresAt is used when present",
			msg:           &azservicebus.ReceivedMessage{ExpiresAt: ptr(t0.Add(time.Minute)), EnqueuedTime: ptr(t0), TimeToLive: ptr(time.Hour)},
			now:           t0,
			wantExpiresAt: t0.Add(time.Minute), wantKnown: true, wantRemaining: time.Minute,
		},
		{
			name:          "computed from EnqueuedTime and TimeToLive",
			msg:           &azservicebus.ReceivedMessage{EnqueuedTime: ptr(t0), TimeToLive: ptr(time.Hour)},
			now:           t0.Add(30 * time.Minute),
			wantExpiresAt: t0.Add(time.Hour), wantKnown: true, wantRemaining: 30 * time.Minute,
		},
		{
			name:          "expired exactly at ExpiresAt",
			msg:           &azservicebus.ReceivedMessage{ExpiresAt: ptr(t0)},
			now:           t0,
			wantExpiresAt: t0, wantKnown: true, wantRemaining: 0, wantExpired: true,
		},
		{
			name:          "expired while locked: remaining is negative",
			msg:           &azservicebus.ReceivedMessage{ExpiresAt: ptr(t0), LockedUntil: ptr(t0.Add(time.Minute))},
			now:           t0.Add(10 * time.Second),
			wantExpiresAt: t0, wantKnown: true, wantRemaining: -10 * time.Second, wantExpired: true,
		},
		{
			name:          "unknown expiry never expires",
			msg:           &azservicebus.ReceivedMessage{EnqueuedTime: ptr(t0)},
			now:           t0.Add(1000 * time.Hour),
			wantRemaining: sbkit.MaxTTL,
		},
		{
			// What the SDK makes of a message sent without a TTL: the header has no ttl,
			// so TimeToLive is 0 and ExpiresAt is EnqueuedTime. The message is not expired.
			name:          "no ttl on the wire: zero TimeToLive and ExpiresAt at EnqueuedTime",
			msg:           &azservicebus.ReceivedMessage{ExpiresAt: ptr(t0), EnqueuedTime: ptr(t0), TimeToLive: ptr(time.Duration(0))},
			now:           t0.Add(time.Hour),
			wantRemaining: sbkit.MaxTTL,
		},
		{name: "nil message", msg: nil, now: t0, wantRemaining: sbkit.MaxTTL},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			gotAt, ok := sbkit.MessageExpiresAt(tc.msg)
			if ok != tc.wantKnown || !gotAt.Equal(tc.wantExpiresAt) {
				t.Fatalf("MessageExpiresAt = %v, %v; want %v, %v", gotAt, ok, tc.wantExpiresAt, tc.wantKnown)
			}
			if got := sbkit.Remaining(tc.msg, tc.now); got != tc.wantRemaining {
				t.Fatalf("Remaining = %v, want %v", got, tc.wantRemaining)
			}
			if got := sbkit.IsExpired(tc.msg, tc.now); got != tc.wantExpired {
				t.Fatalf("IsExpired = %v, want %v", got, tc.wantExpired)
			}
		})
	}
}

// Expiry is a function of the clock: with virtual time, a message received with a
// 10 second TTL is not expired at 9s and is at 10s.
func TestIsExpiredFollowsTheClock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		msg := &azservicebus.ReceivedMessage{EnqueuedTime: ptr(time.Now()), TimeToLive: ptr(10 * time.Second)}
		time.Sleep(9 * time.Second)
		if sbkit.IsExpired(msg, time.Now()) {
			t.Fatal("expired after 9s of a 10s TTL")
		}
		time.Sleep(time.Second)
		if !sbkit.IsExpired(msg, time.Now()) {
			t.Fatal("not expired after 10s of a 10s TTL")
		}
	})
}

func TestSetTTLAndScheduleRejectBadInput(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want error
	}{
		{"nil message ttl", sbkit.SetTTL(nil, time.Minute), sbkit.ErrNilMessage},
		{"zero ttl", sbkit.SetTTL(&azservicebus.Message{}, 0), sbkit.ErrInvalidTTL},
		{"negative ttl", sbkit.SetTTL(&azservicebus.Message{}, -time.Minute), sbkit.ErrInvalidTTL},
		{"nil message schedule", sbkit.SetSchedule(nil, t0), sbkit.ErrNilMessage},
		{"zero schedule", sbkit.SetSchedule(&azservicebus.Message{}, time.Time{}), sbkit.ErrInvalidSchedule},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if !errors.Is(tc.err, tc.want) {
				t.Fatalf("got %v, want %v", tc.err, tc.want)
			}
		})
	}
	msg := &azservicebus.Message{}
	local := time.Date(2026, 1, 1, 9, 0, 0, 0, time.FixedZone("UTC+2", 2*3600))
	if err := sbkit.SetSchedule(msg, local); err != nil {
		t.Fatal(err)
	}
	if msg.ScheduledEnqueueTime.Location() != time.UTC || !msg.ScheduledEnqueueTime.Equal(local) {
		t.Fatalf("schedule = %v, want %v in UTC", msg.ScheduledEnqueueTime, local)
	}
}
