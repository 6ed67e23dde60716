package sbtest

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
)

func TestEntityOptionsValidation(t *testing.T) {
	tests := []struct {
		name     string
		opts     *EntityOptions
		wantErr  bool
		wantLock time.Duration
		wantMax  int
	}{
		{"nil means defaults", nil, false, 60 * time.Second, 10},
		{"max lock", &EntityOptions{LockDuration: 5 * time.Minute}, false, 5 * time.Minute, 10},
		{"short lock", &EntityOptions{LockDuration: time.Second, MaxDeliveryCount: 3}, false, time.Second, 3},
		{"lock above 5 min", &EntityOptions{LockDuration: 5*time.Minute + 1}, true, 0, 0},
		{"negative lock", &EntityOptions{LockDuration: -1}, true, 0, 0},
		{"negative max delivery", &EntityOptions{MaxDeliveryCount: -1}, true, 0, 0},
		{"negative TTL", &EntityOptions{DefaultTTL: -1}, true, 0, 0},
		{"negative dedupe window", &EntityOptions{DuplicateDetectionWindow: -1}, true, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q, err := NewNamespace(nil).NewQueue("q", tt.opts)
			if tt.wantErr {
				if !errors.Is(err, ErrInvalidOptions) {
					t.Fatalf("err = %v, want ErrInvalidOptions", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if o := q.Options(); o.LockDuration != tt.wantLock || o.MaxDeliveryCount != tt.wantMax {
				t.Fatalf("options = %+v", o)
			}
		})
	}
}

// TestLockExpiryTakesNoRealTime runs a five-minute lock expiry in a synctest bubble: the
// blocked receive wakes on its timer at the lock's expiry, in virtual time.
func TestLockExpiryTakesNoRealTime(t *testing.T) {
	realStart := time.Now()
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, &EntityOptions{LockDuration: 5 * time.Minute})
		sendAll(t, f.s, "a")
		first := receiveOne(t, f.r)
		start := time.Now()
		second := receive(t, f.r, 1, time.Hour)[0] // blocks until the lock expires
		if waited := time.Since(start); waited != 5*time.Minute {
			t.Fatalf("redelivered after %v, want 5m", waited)
		}
		if second.DeliveryCount != 2 || *second.SequenceNumber != *first.SequenceNumber || second.LockToken == first.LockToken {
			t.Fatalf("redelivery: count %d token reused %v", second.DeliveryCount, second.LockToken == first.LockToken)
		}
		wantCode(t, f.r.CompleteMessage(context.Background(), first, nil), azservicebus.CodeLockLost)
		if err := f.r.CompleteMessage(context.Background(), second, nil); err != nil {
			t.Fatal(err)
		}
		if got := f.q.Stats().LockExpired; got != 1 {
			t.Fatalf("LockExpired = %d", got)
		}
	})
	if d := time.Since(realStart); d > 10*time.Second {
		t.Fatalf("took %v of real time", d)
	}
}

func TestRenewMessageLock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		f := newFixture(t, &EntityOptions{LockDuration: time.Minute})
		sendAll(t, f.s, "a")
		m := receiveOne(t, f.r)
		time.Sleep(45 * time.Second)
		if err := f.r.RenewMessageLock(ctx, m, nil); err != nil {
			t.Fatal(err)
		}
		if want := time.Now().Add(time.Minute); !m.LockedUntil.Equal(want) {
			t.Fatalf("LockedUntil = %v, want %v", *m.LockedUntil, want)
		}
		time.Sleep(45 * time.Second) // past the original expiry, within the renewed one
		if f.q.Counts().Locked != 1 {
			t.Fatal("renewed lock expired at the original time")
		}
		time.Sleep(15 * time.Second) // now the renewed lock is gone too
		wantCode(t, f.r.RenewMessageLock(ctx, m, nil), azservicebus.CodeLockLost)
		if f.q.Counts().Active != 1 || f.q.Stats().Renewed != 1 {
			t.Fatalf("active %d stats %+v", f.q.Counts().Active, f.q.Stats())
		}
	})
}

func TestMaxDeliveryCount(t *testing.T) {
	tests := []struct {
		name string
		fail func(t *testing.T, f *fixture, m *azservicebus.ReceivedMessage)
	}{
		{"abandon", func(t *testing.T, f *fixture, m *azservicebus.ReceivedMessage) {
			if err := f.r.AbandonMessage(context.Background(), m, nil); err != nil {
				t.Fatal(err)
			}
		}},
		{"lock expiry", func(t *testing.T, f *fixture, m *azservicebus.ReceivedMessage) {
			time.Sleep(time.Minute)
		}},
		{"ExpireLock", func(t *testing.T, f *fixture, m *azservicebus.ReceivedMessage) {
			if !f.q.ExpireLock(m.LockToken) {
				t.Fatal("ExpireLock found no lock")
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := newFixture(t, &EntityOptions{MaxDeliveryCount: 3})
				sendAll(t, f.s, "a")
				for i := uint32(1); i <= 3; i++ {
					m := receiveOne(t, f.r)
					if m.DeliveryCount != i {
						t.Fatalf("delivery %d reports DeliveryCount %d", i, m.DeliveryCount)
					}
					tt.fail(t, f, m)
				}
				expectNone(t, f.r, time.Hour)
				dl := f.q.DeadLetters()
				if len(dl) != 1 || *dl[0].DeadLetterReason != MaxDeliveryCountExceededReason {
					t.Fatalf("dead letters: %+v", dl)
				}
				if f.q.Counts().Active != 0 || f.q.Counts().Locked != 0 {
					t.Fatal("message still in the queue")
				}
			})
		})
	}
}

func TestLockLost(t *testing.T) {
	settles := []struct {
		name string
		do   func(r *Receiver, m *azservicebus.ReceivedMessage) error
	}{
		{"complete", func(r *Receiver, m *azservicebus.ReceivedMessage) error {
			return r.CompleteMessage(context.Background(), m, nil)
		}},
		{"abandon", func(r *Receiver, m *azservicebus.ReceivedMessage) error {
			return r.AbandonMessage(context.Background(), m, nil)
		}},
		{"deadletter", func(r *Receiver, m *azservicebus.ReceivedMessage) error {
			return r.DeadLetterMessage(context.Background(), m, nil)
		}},
		{"defer", func(r *Receiver, m *azservicebus.ReceivedMessage) error {
			return r.DeferMessage(context.Background(), m, nil)
		}},
		{"renew", func(r *Receiver, m *azservicebus.ReceivedMessage) error {
			return r.RenewMessageLock(context.Background(), m, nil)
		}},
	}
	causes := []struct {
		name string
		// lose makes f.r lose the lock of m and returns the receiver that will settle it.
		lose func(t *testing.T, f *fixture, m *azservicebus.ReceivedMessage) *Receiver
	}{
		{"expired", func(t *testing.T, f *fixture, m *azservicebus.ReceivedMessage) *Receiver {
			time.Sleep(time.Minute)
			return f.r
		}},
		{"already settled", func(t *testing.T, f *fixture, m *azservicebus.ReceivedMessage) *Receiver {
			if err := f.r.CompleteMessage(context.Background(), m, nil); err != nil {
				t.Fatal(err)
			}
			return f.r
		}},
		{"ExpireLock", func(t *testing.T, f *fixture, m *azservicebus.ReceivedMessage) *Receiver {
			f.q.ExpireLock(m.LockToken)
			return f.r
		}},
		{"connection dropped", func(t *testing.T, f *fixture, m *azservicebus.ReceivedMessage) *Receiver {
			f.r.DropConnection()
			return f.r
		}},
		{"other entity", func(t *testing.T, f *fixture, m *azservicebus.ReceivedMessage) *Receiver {
			if _, err := f.ns.NewQueue("q2", nil); err != nil {
				t.Fatal(err)
			}
			r, _ := f.ns.NewReceiverForQueue("q2", nil)
			return r
		}},
	}
	for _, c := range causes {
		for _, s := range settles {
			t.Run(c.name+"/"+s.name, func(t *testing.T) {
				if c.name == "connection dropped" && s.name == "renew" {
					t.Skip("renewals go through $management and survive a dropped link: TestLockSurvivesClose")
				}
				synctest.Test(t, func(t *testing.T) {
					f := newFixture(t, nil)
					sendAll(t, f.s, "a")
					m := receiveOne(t, f.r)
					r := c.lose(t, f, m)
					wantCode(t, s.do(r, m), azservicebus.CodeLockLost)
				})
			})
		}
	}
}

// A closed receiver's or dropped connection's locks are kept until LockedUntil (seed
// 000); meanwhile any receiver renews and settles them by token (SDK live test
// TestReceiver_SettleWithOnlyLockToken); after it the message is back with its
// DeliveryCount unchanged ("Messages, payloads, and serialization").
func TestLockSurvivesClose(t *testing.T) {
	for _, how := range []string{"close", "drop"} {
		t.Run(how, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := newFixture(t, &EntityOptions{LockDuration: 30 * time.Second})
				ctx := context.Background()
				sendAll(t, f.s, "a", "b")
				ms := receive(t, f.r, 2, time.Second)
				if how == "close" {
					for range 2 { // safe twice
						if err := f.r.Close(ctx); err != nil {
							t.Fatal(err)
						}
					}
					wantCode(t, f.r.CompleteMessage(ctx, ms[0], nil), azservicebus.CodeClosed)
					_, err := f.r.ReceiveMessages(ctx, 1, nil)
					wantCode(t, err, azservicebus.CodeClosed)
				} else {
					f.r.DropConnection()
					// The link the messages came on is gone: settling through it fails.
					wantCode(t, f.r.CompleteMessage(ctx, ms[0], nil), azservicebus.CodeLockLost)
				}
				if f.q.Counts().Locked != 2 || f.q.Counts().Active != 0 {
					t.Fatalf("after %s: %d locked, %d active; want the locks kept", how, f.q.Counts().Locked, f.q.Counts().Active)
				}
				r2 := f.receiver(t, nil)
				expectNone(t, r2, 20*time.Second)
				byToken := &azservicebus.ReceivedMessage{LockToken: ms[0].LockToken}
				if err := r2.RenewMessageLock(ctx, byToken, nil); err != nil {
					t.Fatalf("renew by token from another receiver: %v", err)
				}
				if err := r2.CompleteMessage(ctx, byToken, nil); err != nil {
					t.Fatalf("complete by token from another receiver: %v", err)
				}
				// b's lock runs out 30 s after the receive: back, not counted.
				got := receive(t, r2, 1, time.Minute)[0]
				if string(got.Body) != "b" || got.DeliveryCount != 1 {
					t.Fatalf("after the lock expired: %q with DeliveryCount %d, want b with 1", got.Body, got.DeliveryCount)
				}
				if f.q.Stats().LockExpired != 1 {
					t.Fatalf("stats %+v, want one lock expiry", f.q.Stats())
				}
			})
		})
	}
}

func TestExpireLockUnknownToken(t *testing.T) {
	f := newFixture(t, nil)
	if f.q.ExpireLock([16]byte{1}) {
		t.Fatal("ExpireLock of an unknown token reported true")
	}
}
