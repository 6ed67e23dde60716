package sbtest

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
)

// TestScheduledTTLCountsFromEnqueue is the example of "Message expiration (Time to Live)":
// scheduled 5 minutes from now
// with a 10 minute TTL, the message expires 15 minutes from now.
func TestScheduledTTLCountsFromEnqueue(t *testing.T) {
	tests := []struct {
		name string
		send func(s *Sender, m *azservicebus.Message, at time.Time) error
	}{
		{"ScheduleMessages", func(s *Sender, m *azservicebus.Message, at time.Time) error {
			_, err := s.ScheduleMessages(context.Background(), []*azservicebus.Message{m}, at, nil)
			return err
		}},
		{"SendMessage with ScheduledEnqueueTime", func(s *Sender, m *azservicebus.Message, at time.Time) error {
			m.ScheduledEnqueueTime = &at
			return s.SendMessage(context.Background(), m, nil)
		}},
		{"SendBatch with ScheduledEnqueueTime", func(s *Sender, m *azservicebus.Message, at time.Time) error {
			m.ScheduledEnqueueTime = &at
			b, _ := s.NewBatch(context.Background(), nil)
			if err := b.AddMessage(m, nil); err != nil {
				return err
			}
			return s.SendBatch(context.Background(), b, nil)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := newFixture(t, nil)
				start := time.Now()
				ttl := 10 * time.Minute
				if err := tt.send(f.s, &azservicebus.Message{Body: []byte("s"), TimeToLive: &ttl}, start.Add(5*time.Minute)); err != nil {
					t.Fatal(err)
				}
				if f.q.Counts().Scheduled != 1 || f.q.Counts().Active != 0 {
					t.Fatal("not scheduled")
				}
				sc := f.q.Scheduled()[0]
				if sc.State != azservicebus.MessageStateScheduled || !sc.ExpiresAt.Equal(start.Add(15*time.Minute)) {
					t.Fatalf("scheduled: state %v expires %v", sc.State, sc.ExpiresAt)
				}
				m := receive(t, f.r, 1, time.Hour)[0] // wakes at the scheduled time
				if got := time.Since(start); got != 5*time.Minute {
					t.Fatalf("delivered after %v, want 5m", got)
				}
				if !m.EnqueuedTime.Equal(start.Add(5*time.Minute)) || !m.ExpiresAt.Equal(start.Add(15*time.Minute)) ||
					!m.ScheduledEnqueueTime.Equal(start.Add(5*time.Minute)) || m.State != azservicebus.MessageStateActive {
					t.Fatalf("enqueued %v expires %v", m.EnqueuedTime, m.ExpiresAt)
				}
				if err := f.r.AbandonMessage(context.Background(), m, nil); err != nil {
					t.Fatal(err)
				}
				time.Sleep(10*time.Minute - time.Second)
				m = receiveOne(t, f.r) // alive until 15 minutes
				if err := f.r.AbandonMessage(context.Background(), m, nil); err != nil {
					t.Fatal(err)
				}
				time.Sleep(time.Second)
				expectNone(t, f.r, time.Hour)
			})
		})
	}
}

func TestScheduleInThePastIsActiveAtOnce(t *testing.T) {
	f := newFixture(t, nil)
	seqs, err := f.s.ScheduleMessages(context.Background(), []*azservicebus.Message{{MessageID: sp("a")}}, time.Now().Add(-time.Hour), nil)
	if err != nil || len(seqs) != 1 {
		t.Fatal(seqs, err)
	}
	if m := receiveOne(t, f.r); m.ScheduledEnqueueTime != nil || m.State != azservicebus.MessageStateActive {
		t.Fatalf("%+v", m)
	}
}

func TestCancelScheduledMessages(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, nil)
		ctx := context.Background()
		seqs, err := f.s.ScheduleMessages(ctx, []*azservicebus.Message{msg("a"), msg("b"), msg("c")}, time.Now().Add(time.Minute), nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := f.s.CancelScheduledMessages(ctx, []int64{seqs[0], seqs[2], 999}, nil); err != nil {
			t.Fatal(err)
		}
		if f.q.Counts().Scheduled != 1 || f.q.Stats().Cancelled != 2 {
			t.Fatalf("scheduled %d stats %+v", f.q.Counts().Scheduled, f.q.Stats())
		}
		ms := receive(t, f.r, 10, time.Hour)
		if len(ms) != 1 || string(ms[0].Body) != "b" {
			t.Fatalf("got %v", bodies(ms))
		}
		// Cancelling a message that is already active does nothing.
		if err := f.s.CancelScheduledMessages(ctx, []int64{seqs[1]}, nil); err != nil || f.q.Counts().Locked != 1 {
			t.Fatal("cancel touched an active message")
		}
	})
}

func TestDuplicateDetection(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, &EntityOptions{DuplicateDetectionWindow: 10 * time.Minute})
		ctx := context.Background()
		send := func(id string) {
			t.Helper()
			if err := f.s.SendMessage(ctx, &azservicebus.Message{MessageID: &id, Body: []byte(id)}, nil); err != nil {
				t.Fatal(err)
			}
		}
		send("a")
		send("b")
		time.Sleep(5 * time.Minute)
		send("a") // dropped: within the window, though the first was not received
		b, _ := f.s.NewBatch(ctx, nil)
		_ = b.AddMessage(&azservicebus.Message{MessageID: sp("b")}, nil)
		_ = b.AddMessage(&azservicebus.Message{MessageID: sp("c")}, nil)
		_ = b.AddMessage(&azservicebus.Message{MessageID: sp("c")}, nil)
		if err := f.s.SendBatch(ctx, b, nil); err != nil {
			t.Fatal(err)
		}
		if got := f.q.Counts().Active; got != 3 {
			t.Fatalf("%d active, want 3 (a, b, c)", got)
		}
		if got := f.q.Stats().DuplicatesDropped; got != 3 {
			t.Fatalf("DuplicatesDropped = %d, want 3", got)
		}
		time.Sleep(5 * time.Minute) // the first a leaves the window
		send("a")
		if got := f.q.Counts().Active; got != 4 {
			t.Fatalf("%d active, want 4 after the window", got)
		}
		// Messages without a MessageID are never duplicates.
		sendAll(t, f.s, "x", "x")
		if got := f.q.Counts().Active; got != 6 {
			t.Fatalf("%d active, want 6", got)
		}
	})
}

// TestBlockedReceiveWakesForLaterScheduledMessage: a receive that started waiting before
// a message was scheduled wakes at the message's enqueue time, not after its own timer.
func TestBlockedReceiveWakesForLaterScheduledMessage(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, nil)
		go func() {
			time.Sleep(time.Second)
			_, _ = f.s.ScheduleMessages(context.Background(), []*azservicebus.Message{msg("x")}, time.Now().Add(2*time.Second), nil)
		}()
		start := time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
		defer cancel()
		if _, err := f.r.ReceiveMessages(ctx, 1, nil); err != nil || time.Since(start) != 3*time.Second {
			t.Fatalf("received after %v: %v, want 3s", time.Since(start), err)
		}
	})
}

// TestDuplicateDetectionScheduled: a scheduled message is a submission like a send, so
// duplicate detection drops a second one with the same MessageID within the window,
// whether the first was sent or scheduled ("Duplicate detection",
// learn.microsoft.com/azure/service-bus-messaging/duplicate-detection: "removes second
// and further submissions of messages with the same MessageId"). Its sequence number is 0.
func TestDuplicateDetectionScheduled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, &EntityOptions{DuplicateDetectionWindow: 10 * time.Minute})
		ctx := context.Background()
		at := time.Now().Add(time.Minute)
		first, err := f.s.ScheduleMessages(ctx, []*azservicebus.Message{{MessageID: sp("a")}}, at, nil)
		if err != nil || len(first) != 1 || first[0] == 0 {
			t.Fatalf("first schedule = %v, %v", first, err)
		}
		second, err := f.s.ScheduleMessages(ctx, []*azservicebus.Message{{MessageID: sp("a")}}, at.Add(time.Minute), nil)
		if err != nil || len(second) != 1 || second[0] != 0 {
			t.Fatalf("second schedule = %v, %v; want sequence number 0 (dropped)", second, err)
		}
		if got := f.q.Counts().Scheduled; got != 1 {
			t.Fatalf("%d scheduled, want 1", got)
		}
		if got := f.q.Stats().DuplicatesDropped; got != 1 {
			t.Fatalf("DuplicatesDropped = %d, want 1", got)
		}
	})
}
