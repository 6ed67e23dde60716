package sbtest

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
)

// TestReceiveWakes checks that a blocked ReceiveMessages wakes for each way a message can
// become available, at the right (virtual) instant.
func TestReceiveWakes(t *testing.T) {
	tests := []struct {
		name string
		// setup runs before the receive blocks; trigger runs in another goroutine while
		// it is blocked.
		setup   func(t *testing.T, f *fixture) *azservicebus.ReceivedMessage
		trigger func(t *testing.T, f *fixture, held *azservicebus.ReceivedMessage)
		after   time.Duration
	}{
		{"send", nil, func(t *testing.T, f *fixture, _ *azservicebus.ReceivedMessage) {
			time.Sleep(3 * time.Second)
			sendAll(t, f.s, "a")
		}, 3 * time.Second},
		{"abandon by another receiver", func(t *testing.T, f *fixture) *azservicebus.ReceivedMessage {
			sendAll(t, f.s, "a")
			f.other = f.receiver(t, nil)
			return receiveOne(t, f.other)
		}, func(t *testing.T, f *fixture, held *azservicebus.ReceivedMessage) {
			time.Sleep(2 * time.Second)
			if err := f.other.AbandonMessage(context.Background(), held, nil); err != nil {
				t.Error(err)
			}
		}, 2 * time.Second},
		{"ExpireLock", func(t *testing.T, f *fixture) *azservicebus.ReceivedMessage {
			sendAll(t, f.s, "a")
			return receiveOne(t, f.receiver(t, nil))
		}, func(t *testing.T, f *fixture, held *azservicebus.ReceivedMessage) {
			time.Sleep(4 * time.Second)
			if !f.q.ExpireLock(held.LockToken) {
				t.Error("no lock")
			}
		}, 4 * time.Second},
		{"lock expiry", func(t *testing.T, f *fixture) *azservicebus.ReceivedMessage {
			sendAll(t, f.s, "a")
			return receiveOne(t, f.receiver(t, nil))
		}, nil, time.Minute},
		{"scheduled time", func(t *testing.T, f *fixture) *azservicebus.ReceivedMessage {
			_, err := f.s.ScheduleMessages(context.Background(), []*azservicebus.Message{msg("a")}, time.Now().Add(7*time.Minute), nil)
			if err != nil {
				t.Fatal(err)
			}
			return nil
		}, nil, 7 * time.Minute},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := newFixture(t, nil)
				var held *azservicebus.ReceivedMessage
				if tt.setup != nil {
					held = tt.setup(t, f)
				}
				if tt.trigger != nil {
					go tt.trigger(t, f, held)
				}
				start := time.Now()
				m := receive(t, f.r, 10, time.Hour)[0]
				if got := time.Since(start); got != tt.after {
					t.Fatalf("woke after %v, want %v", got, tt.after)
				}
				if string(m.Body) != "a" {
					t.Fatalf("got %q", m.Body)
				}
			})
		})
	}
}

// A blocked receive wakes when the lock of a dropped connection expires ("Message
// transfers, locks, and settlement": only after the lock duration), and the delivery is
// not counted ("Messages, payloads, and serialization").
func TestReceiveWakesAtOrphanedLockExpiry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, nil)
		other := f.receiver(t, nil)
		sendAll(t, f.s, "a")
		receiveOne(t, other)
		go func() {
			time.Sleep(time.Second)
			other.DropConnection()
		}()
		start := time.Now()
		m := receive(t, f.r, 1, time.Hour)[0]
		if time.Since(start) != f.q.Options().LockDuration || m.DeliveryCount != 1 {
			t.Fatalf("after %v count %d", time.Since(start), m.DeliveryCount)
		}
	})
}

func TestReceiveReturnsAllAvailableUpToMax(t *testing.T) {
	f := newFixture(t, nil)
	sendAll(t, f.s, "a", "b", "c", "d", "e")
	if got := receive(t, f.r, 3, time.Second); len(got) != 3 {
		t.Fatalf("got %d, want 3", len(got))
	}
	if got := receive(t, f.r, 10, time.Second); len(got) != 2 {
		t.Fatalf("got %d, want 2", len(got))
	}
}

func TestReceiveContextEndLeavesNothingLocked(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, nil)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error)
		go func() {
			_, err := f.r.ReceiveMessages(ctx, 10, nil)
			done <- err
		}()
		synctest.Wait() // blocked
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Fatalf("err = %v", err)
		}
		sendAll(t, f.s, "a")
		if f.q.Counts().Locked != 0 || f.q.Counts().Active != 1 {
			t.Fatal("the cancelled receive took a message")
		}
	})
}

func TestCloseWakesBlockedReceive(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, nil)
		done := make(chan error)
		go func() {
			_, err := f.r.ReceiveMessages(context.Background(), 10, nil)
			done <- err
		}()
		synctest.Wait()
		_ = f.r.Close(context.Background())
		wantCode(t, <-done, azservicebus.CodeClosed)
	})
}
