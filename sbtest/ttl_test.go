package sbtest

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/sbkit/sbkit"
)

func sendTTL(t *testing.T, s *Sender, body string, ttl time.Duration) {
	t.Helper()
	if err := s.SendMessage(context.Background(), &azservicebus.Message{Body: []byte(body), TimeToLive: &ttl}, nil); err != nil {
		t.Fatal(err)
	}
}

func TestExpiredMessagesAreNeverDelivered(t *testing.T) {
	tests := []struct {
		name       string
		deadLetter bool
		wantDLQ    int
	}{
		{"dropped", false, 0},
		{"dead-lettered", true, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := newFixture(t, &EntityOptions{DeadLetterOnExpiration: tt.deadLetter})
				sendTTL(t, f.s, "short", time.Minute)
				sendTTL(t, f.s, "long", time.Hour)
				time.Sleep(time.Minute)
				if got := receiveOne(t, f.r); string(got.Body) != "long" {
					t.Fatalf("delivered %q", got.Body)
				}
				if f.q.Counts().DeadLetter != tt.wantDLQ || f.q.Stats().Expired != 1 {
					t.Fatalf("dlq %d, stats %+v", f.q.Counts().DeadLetter, f.q.Stats())
				}
				if tt.deadLetter {
					if r := f.q.DeadLetters()[0].DeadLetterReason; *r != sbkit.TTLExpiredReason {
						t.Fatalf("reason %q", *r)
					}
				}
			})
		})
	}
}

// TestLockedMessageUnaffectedByExpiry: expiry does not touch a message whose lock holds;
// the holder settles it normally. Once the lock is gone, expiry applies at once.
func TestLockedMessageUnaffectedByExpiry(t *testing.T) {
	tests := []struct {
		name string
		end  func(t *testing.T, f *fixture, m *azservicebus.ReceivedMessage)
		dlq  int
	}{
		{"complete after expiry", func(t *testing.T, f *fixture, m *azservicebus.ReceivedMessage) {
			if err := f.r.CompleteMessage(context.Background(), m, nil); err != nil {
				t.Fatalf("complete of an expired locked message: %v", err)
			}
		}, 0},
		{"abandon after expiry", func(t *testing.T, f *fixture, m *azservicebus.ReceivedMessage) {
			if err := f.r.AbandonMessage(context.Background(), m, nil); err != nil {
				t.Fatal(err)
			}
		}, 1},
		{"lock expires after expiry", func(t *testing.T, f *fixture, m *azservicebus.ReceivedMessage) {
			time.Sleep(time.Minute)
		}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := newFixture(t, &EntityOptions{LockDuration: 2 * time.Minute, DeadLetterOnExpiration: true})
				sendTTL(t, f.s, "a", time.Minute)
				m := receiveOne(t, f.r)
				time.Sleep(90 * time.Second) // expired, still locked
				if !sbkit.IsExpired(m, time.Now()) || f.q.Counts().Locked != 1 {
					t.Fatal("expected an expired message still locked")
				}
				if err := f.r.RenewMessageLock(context.Background(), m, nil); err != nil {
					t.Fatalf("renew of an expired locked message: %v", err)
				}
				tt.end(t, f, m)
				expectNone(t, f.r, time.Hour)
				if n := f.q.Counts().DeadLetter; n != tt.dlq {
					t.Fatalf("%d dead-lettered, want %d", n, tt.dlq)
				}
			})
		})
	}
}

// "Deferred messages aren't expired and automatically moved to a dead-letter queue until
// a client app attempts to receive them using the sequence number" (Service Bus docs,
// message deferral): they stay deferred past their expiry, and the receive expires them.
func TestDeferredMessagesExpireOnReceive(t *testing.T) {
	for _, dl := range []bool{false, true} {
		synctest.Test(t, func(t *testing.T) {
			f := newFixture(t, &EntityOptions{DeadLetterOnExpiration: dl})
			sendTTL(t, f.s, "a", time.Minute)
			m := receiveOne(t, f.r)
			if err := f.r.DeferMessage(context.Background(), m, nil); err != nil {
				t.Fatal(err)
			}
			time.Sleep(time.Hour)
			if f.q.Counts().Deferred != 1 || f.q.Counts().DeadLetter != 0 {
				t.Fatalf("an hour later: %d deferred, %d dead-lettered; want it still deferred", f.q.Counts().Deferred, f.q.Counts().DeadLetter)
			}
			got, err := f.r.ReceiveDeferredMessages(context.Background(), []int64{*m.SequenceNumber}, nil)
			if code(err) != azservicebus.CodeNotFound || len(got) != 0 {
				t.Fatalf("expired deferred message received: %d %v, want CodeNotFound", len(got), err)
			}
			want := 0
			if dl {
				want = 1
			}
			if f.q.Counts().Deferred != 0 || f.q.Counts().DeadLetter != want {
				t.Fatalf("after the receive: %d deferred, %d dead-lettered; want 0, %d", f.q.Counts().Deferred, f.q.Counts().DeadLetter, want)
			}
		})
	}
}

func TestSubscriptionTTL(t *testing.T) {
	tests := []struct {
		name          string
		topic, sub    time.Duration
		message, want time.Duration
	}{
		{"topic smaller wins", time.Minute, time.Hour, 0, time.Minute},
		{"subscription smaller wins", time.Hour, time.Minute, 0, time.Minute},
		{"message capped", time.Hour, 2 * time.Hour, 3 * time.Hour, time.Hour},
		{"message below both", time.Hour, time.Hour, time.Second, time.Second},
		{"none", 0, 0, 0, sbkit.MaxTTL},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ns := NewNamespace(nil)
			top, _ := ns.NewTopic("t", &EntityOptions{DefaultTTL: tt.topic})
			if _, err := top.NewSubscription("s", &EntityOptions{DefaultTTL: tt.sub}); err != nil {
				t.Fatal(err)
			}
			s, _ := ns.NewSender("t", nil)
			m := &azservicebus.Message{}
			if tt.message > 0 {
				m.TimeToLive = &tt.message
			}
			if err := s.SendMessage(context.Background(), m, nil); err != nil {
				t.Fatal(err)
			}
			r, _ := ns.NewReceiverForSubscription("t", "s", nil)
			if got := *receiveOne(t, r).TimeToLive; got != tt.want {
				t.Fatalf("TimeToLive = %v, want %v", got, tt.want)
			}
		})
	}
}
