package sender_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/sbkit/sbkit"
	"github.com/sbkit/sbkit/sbtest"
	"github.com/sbkit/sbkit/sender"
)

func TestNewRejectsBadOptions(t *testing.T) {
	b := newBroker(t, sbtest.Latency{}, nil)
	tests := []struct {
		name string
		opts sender.Options
	}{
		{"negative messages", sender.Options{MaxInFlightMessages: -1}},
		{"negative bytes", sender.Options{MaxInFlightBytes: -1}},
		{"negative batch bytes", sender.Options{MaxBatchBytes: -1}},
		{"negative linger", sender.Options{Linger: -time.Millisecond}},
		{"negative ttl", sender.Options{DefaultTTL: -time.Second}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := sender.New(b.s, &tt.opts)
			if err == nil {
				_ = s.Close(context.Background())
			}
			if !errors.Is(err, sender.ErrInvalidOptions) {
				t.Fatalf("New = %v, want ErrInvalidOptions", err)
			}
		})
	}
	// Negative means no limit where no limit makes sense.
	for _, o := range []sender.Options{{AttemptTimeout: -1}, {MaxBatchMessages: -1}} {
		s, err := sender.New(b.s, &o)
		if err != nil {
			t.Errorf("New(%+v) = %v, want no limit", o, err)
			continue
		}
		_ = s.Close(context.Background())
	}
	if _, err := sender.New(nil, nil); !errors.Is(err, sender.ErrNilDestination) {
		t.Errorf("New(nil) = %v, want ErrNilDestination", err)
	}
	if _, err := sender.New((*azservicebus.Sender)(nil), nil); !errors.Is(err, sender.ErrNilDestination) {
		t.Errorf("New(nil *azservicebus.Sender) = %v, want ErrNilDestination", err)
	}
}

func TestBatchingFollowsDestination(t *testing.T) {
	b := newBroker(t, sbtest.Latency{}, nil)
	if s := newSender(t, b.s, nil); !s.Batching() {
		t.Error("a BatchSender destination with default options does not batch")
	}
	if s := newSender(t, b.s, &sender.Options{DisableBatching: true}); s.Batching() {
		t.Error("DisableBatching is ignored")
	}
	if s := newSender(t, onlySender{b.s}, nil); s.Batching() {
		t.Error("a plain MessageSender batches")
	}
}

func TestSendSetsMessageIDAndDelivers(t *testing.T) {
	for _, batching := range []bool{false, true} {
		t.Run(map[bool]string{false: "single", true: "batched"}[batching], func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				b := newBroker(t, sbtest.Latency{RoundTrip: 7 * time.Millisecond}, nil)
				s := newSender(t, b.s, &sender.Options{DisableBatching: !batching})
				m := &azservicebus.Message{Body: []byte("hello")}
				if err := s.Send(t.Context(), m); err != nil {
					t.Fatal(err)
				}
				if m.MessageID == nil || len(*m.MessageID) != 36 {
					t.Fatalf("MessageID = %v, want a UUID", m.MessageID)
				}
				got := b.q.Active()
				if len(got) != 1 || got[0].MessageID != *m.MessageID || string(got[0].Body) != "hello" {
					t.Fatalf("queue holds %v", got)
				}
				st := s.Stats()
				if st.Sent != 1 || st.Failed != 0 || st.InFlightMessages != 0 || st.InFlightBytes != 0 {
					t.Errorf("stats %+v", st)
				}
				if batching && st.BatchesSent != 1 {
					t.Errorf("Batches = %d, want 1", st.BatchesSent)
				}
			})
		})
	}
}

func TestAdmissionErrors(t *testing.T) {
	b := newBroker(t, sbtest.Latency{}, nil)
	s := newSender(t, b.s, nil)
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	tests := []struct {
		name string
		ctx  context.Context
		m    *azservicebus.Message
		want error
	}{
		{"nil message", context.Background(), nil, sbkit.ErrNilMessage},
		{"cancelled context", cancelled, msg(2), context.Canceled},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := s.SendAsync(tt.ctx, tt.m)
			var se *sender.SendError
			if r != nil || !errors.Is(err, tt.want) || !errors.As(err, &se) || se.Attempts != 0 {
				t.Fatalf("SendAsync = %v, %v; want nil, *SendError wrapping %v", r, err, tt.want)
			}
		})
	}
	if b.q.Counts().Active != 0 {
		t.Errorf("rejected messages reached the queue")
	}
	if err := s.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := s.Send(context.Background(), msg(3)); !errors.Is(err, sender.ErrClosed) {
		t.Errorf("Send after Close = %v, want ErrClosed", err)
	}
	if _, err := s.TrySend(t.Context(), msg(4)); !errors.Is(err, sender.ErrClosed) {
		t.Errorf("TrySend after Close = %v, want ErrClosed", err)
	}
	if err := s.Close(context.Background()); err != nil {
		t.Errorf("second Close = %v", err)
	}
}

func TestResultWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newBroker(t, sbtest.Latency{RoundTrip: 10 * time.Millisecond}, nil)
		s := newSender(t, b.s, &sender.Options{DisableBatching: true})
		r, err := s.SendAsync(t.Context(), msg(1))
		if err != nil {
			t.Fatal(err)
		}
		if err := r.Err(); !errors.Is(err, sender.ErrPending) {
			t.Fatalf("Err before Done = %v, want ErrPending", err)
		}
		short, cancel := context.WithTimeout(t.Context(), time.Millisecond)
		defer cancel()
		if err := r.Wait(short); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Wait with a short ctx = %v", err)
		}
		if err := r.Wait(t.Context()); err != nil {
			t.Fatalf("Wait = %v", err)
		}
		if r.Err() != nil || r.Attempts() != 1 || r.MessageID() != "m0001" || r.Message() == nil {
			t.Fatalf("result: err %v attempts %d id %q", r.Err(), r.Attempts(), r.MessageID())
		}
	})
}

func TestSendAllReportsFailures(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newBroker(t, sbtest.Latency{RoundTrip: time.Millisecond}, nil)
		s := newSender(t, b.s, nil)
		msgs := []*azservicebus.Message{msg(0), nil, msg(2), {Body: make([]byte, 300<<10)}, msg(4)}
		err := s.SendAll(t.Context(), msgs)
		var all *sender.SendAllError
		if !errors.As(err, &all) {
			t.Fatalf("SendAll = %v, want *SendAllError", err)
		}
		if got := all.Failed(); len(got) != 2 || got[0] != 1 || got[1] != 3 {
			t.Fatalf("Failed() = %v, want [1 3]", got)
		}
		if !errors.Is(err, sbkit.ErrNilMessage) || !errors.Is(err, azservicebus.ErrMessageTooLarge) {
			t.Errorf("SendAll error does not wrap the causes: %v", err)
		}
		if n := b.q.Counts().Active; n != 3 {
			t.Errorf("queue holds %d messages, want 3", n)
		}
		if err := s.SendAll(t.Context(), []*azservicebus.Message{msg(5), msg(6)}); err != nil {
			t.Errorf("SendAll of good messages = %v", err)
		}
	})
}

func TestScheduleAndDefaultTTL(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newBroker(t, sbtest.Latency{}, nil)
		s := newSender(t, b.s, &sender.Options{DefaultTTL: time.Hour})
		at := time.Now().Add(time.Minute)
		m := msg(1)
		if err := s.Schedule(t.Context(), m, at); err != nil {
			t.Fatal(err)
		}
		if b.q.Counts().Scheduled != 1 || b.q.Counts().Active != 0 {
			t.Fatalf("scheduled %d, active %d; want 1, 0", b.q.Counts().Scheduled, b.q.Counts().Active)
		}
		own := msg(2)
		_ = sbkit.SetTTL(own, 10*time.Minute)
		if err := s.Send(t.Context(), own); err != nil {
			t.Fatal(err)
		}
		if *m.TimeToLive != time.Hour || *own.TimeToLive != 10*time.Minute {
			t.Errorf("TTLs %v and %v, want 1h (default) and 10m (own)", *m.TimeToLive, *own.TimeToLive)
		}
		time.Sleep(time.Minute + time.Second)
		if b.q.Counts().Active != 2 {
			t.Errorf("after the scheduled time %d active, want 2", b.q.Counts().Active)
		}
		if err := s.Schedule(t.Context(), msg(3), time.Time{}); err == nil {
			t.Error("Schedule accepted the zero time")
		}
	})
}
