package sbtest

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/sbkit/sbkit"
)

func TestSendFaults(t *testing.T) {
	tests := []struct {
		name    string
		fault   Fault
		clearAt int     // ClearFaults before this send (0 = never)
		want    []error // outcome of consecutive sends; nil = success
	}{
		{"default is transient, Count 2", Fault{Op: OpSend, Count: 2}, 0, []error{TransientError, TransientError, nil}},
		{"custom error", Fault{Op: OpSend, Count: 1, Err: PermanentError}, 0, []error{PermanentError, nil}},
		{"until cleared", Fault{Op: OpSend}, 3, []error{TransientError, TransientError, nil, nil}},
		{"other op unaffected", Fault{Op: OpComplete}, 0, []error{nil, nil}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, nil)
			f.q.InjectFault(tt.fault)
			stored := 0
			for i, want := range tt.want {
				if i+1 == tt.clearAt {
					f.q.ClearFaults()
				}
				err := f.s.SendMessage(context.Background(), msg("a"), nil)
				if err != want {
					t.Fatalf("send %d: err = %v, want %v", i, err, want)
				}
				if err == nil {
					stored++
				}
			}
			if f.q.Counts().Active != stored {
				t.Fatalf("stored %d, want %d: a failed send must store nothing", f.q.Counts().Active, stored)
			}
		})
	}
	if !sbkit.IsTransient(TransientError) || !sbkit.IsPermanent(PermanentError) {
		t.Fatal("TransientError/PermanentError misclassified")
	}
}

func TestHangFault(t *testing.T) {
	ops := []struct {
		op  Op
		run func(f *fixture, ctx context.Context, m *azservicebus.ReceivedMessage) error
	}{
		{OpSend, func(f *fixture, ctx context.Context, _ *azservicebus.ReceivedMessage) error {
			return f.s.SendMessage(ctx, msg("b"), nil)
		}},
		{OpReceive, func(f *fixture, ctx context.Context, _ *azservicebus.ReceivedMessage) error {
			_, err := f.r.ReceiveMessages(ctx, 1, nil)
			return err
		}},
		{OpComplete, func(f *fixture, ctx context.Context, m *azservicebus.ReceivedMessage) error {
			return f.r.CompleteMessage(ctx, m, nil)
		}},
		{OpRenew, func(f *fixture, ctx context.Context, m *azservicebus.ReceivedMessage) error {
			return f.r.RenewMessageLock(ctx, m, nil)
		}},
	}
	for _, o := range ops {
		t.Run(o.op.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := newFixture(t, nil)
				sendAll(t, f.s, "a")
				m := receiveOne(t, f.r)
				f.q.InjectFault(Fault{Op: o.op, Hang: true, Count: 1})
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				start := time.Now()
				err := o.run(f, ctx, m)
				if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) != 30*time.Second {
					t.Fatalf("err = %v after %v", err, time.Since(start))
				}
				if f.q.Counts().Locked != 1 || f.q.Counts().Active != 0 {
					t.Fatalf("hung %v changed the entity: locked %d active %d", o.op, f.q.Counts().Locked, f.q.Counts().Active)
				}
			})
		})
	}
}

// TestCompleteFailsThenRedelivered is the case of "Message transfers, locks, and
// settlement": Complete fails, the message stays locked, the lock expires and the message
// is delivered again with its count incremented.
func TestCompleteFailsThenRedelivered(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, nil)
		sendAll(t, f.s, "a")
		m := receiveOne(t, f.r)
		f.q.InjectFault(Fault{Op: OpComplete, Count: 1})
		if err := f.r.CompleteMessage(context.Background(), m, nil); err != TransientError {
			t.Fatalf("err = %v", err)
		}
		if f.q.Counts().Locked != 1 {
			t.Fatal("failed complete released the message")
		}
		again := receive(t, f.r, 1, time.Hour)[0]
		if again.DeliveryCount != 2 || again.MessageID != m.MessageID {
			t.Fatalf("redelivery count %d", again.DeliveryCount)
		}
	})
}

func TestAfterFaultAppliesThenFails(t *testing.T) {
	tests := []struct {
		op     Op
		settle func(r *Receiver, m *azservicebus.ReceivedMessage) error
		check  func(q *Entity) bool
	}{
		{OpComplete, func(r *Receiver, m *azservicebus.ReceivedMessage) error {
			return r.CompleteMessage(context.Background(), m, nil)
		}, func(q *Entity) bool { return q.Counts().Locked == 0 && q.Counts().Active == 0 }},
		{OpAbandon, func(r *Receiver, m *azservicebus.ReceivedMessage) error {
			return r.AbandonMessage(context.Background(), m, nil)
		}, func(q *Entity) bool { return q.Counts().Active == 1 }},
		{OpDeadLetter, func(r *Receiver, m *azservicebus.ReceivedMessage) error {
			return r.DeadLetterMessage(context.Background(), m, nil)
		}, func(q *Entity) bool { return q.Counts().DeadLetter == 1 }},
		{OpDefer, func(r *Receiver, m *azservicebus.ReceivedMessage) error {
			return r.DeferMessage(context.Background(), m, nil)
		}, func(q *Entity) bool { return q.Counts().Deferred == 1 }},
		{OpRenew, func(r *Receiver, m *azservicebus.ReceivedMessage) error {
			return r.RenewMessageLock(context.Background(), m, nil)
		}, func(q *Entity) bool { return q.Stats().Renewed == 1 }},
	}
	for _, tt := range tests {
		t.Run(tt.op.String(), func(t *testing.T) {
			f := newFixture(t, nil)
			sendAll(t, f.s, "a")
			m := receiveOne(t, f.r)
			f.q.InjectFault(Fault{Op: tt.op, Count: 1, After: true, Err: PermanentError})
			if err := tt.settle(f.r, m); err != PermanentError {
				t.Fatalf("err = %v", err)
			}
			if !tt.check(f.q) {
				t.Fatal("operation not applied")
			}
			// The fault was used up: a second try on the same lock reports the loss.
			if tt.op != OpRenew {
				wantCode(t, tt.settle(f.r, m), azservicebus.CodeLockLost)
			}
		})
	}
}

func TestReceiveFault(t *testing.T) {
	f := newFixture(t, nil)
	sendAll(t, f.s, "a")
	f.q.InjectFault(Fault{Op: OpReceive, Count: 1})
	if _, err := f.r.ReceiveMessages(context.Background(), 1, nil); err != TransientError {
		t.Fatalf("err = %v", err)
	}
	if f.q.Counts().Locked != 0 {
		t.Fatal("failed receive locked a message")
	}
	receiveOne(t, f.r)
}

func TestRenewFaultKeepsLock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, nil)
		sendAll(t, f.s, "a")
		m := receiveOne(t, f.r)
		before := *m.LockedUntil
		f.q.InjectFault(Fault{Op: OpRenew})
		time.Sleep(10 * time.Second)
		if err := f.r.RenewMessageLock(context.Background(), m, nil); err != TransientError {
			t.Fatalf("err = %v", err)
		}
		if !m.LockedUntil.Equal(before) {
			t.Fatal("failed renewal moved LockedUntil")
		}
		time.Sleep(50 * time.Second)
		if f.q.Counts().Locked != 0 {
			t.Fatal("lock outlived its original expiry after a failed renewal")
		}
	})
}

func TestTopicSendFault(t *testing.T) {
	ns := NewNamespace(nil)
	top, _ := ns.NewTopic("t", nil)
	sub, _ := top.NewSubscription("s", nil)
	s, _ := ns.NewSender("t", nil)
	top.InjectFault(Fault{Op: OpSend, Count: 1})
	if err := s.SendMessage(context.Background(), msg("a"), nil); err != TransientError {
		t.Fatalf("err = %v", err)
	}
	if err := s.SendMessage(context.Background(), msg("a"), nil); err != nil {
		t.Fatal(err)
	}
	top.ClearFaults()
	if sub.Counts().Active != 1 {
		t.Fatalf("Active = %d", sub.Counts().Active)
	}
}

func TestReceiveAfterFaultLosesLockedMessages(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, nil)
		sendAll(t, f.s, "a")
		f.q.InjectFault(Fault{Op: OpReceive, Count: 1, After: true})
		if _, err := f.r.ReceiveMessages(context.Background(), 1, nil); err != TransientError {
			t.Fatalf("err = %v", err)
		}
		if f.q.Counts().Locked != 1 {
			t.Fatal("the lost delivery did not lock the message")
		}
		start := time.Now()
		m := receive(t, f.r, 1, time.Hour)[0]
		if time.Since(start) != time.Minute || m.DeliveryCount != 2 {
			t.Fatalf("redelivered after %v with count %d", time.Since(start), m.DeliveryCount)
		}
	})
}

func TestInjectedLockLostReleasesTheLock(t *testing.T) {
	f := newFixture(t, nil)
	sendAll(t, f.s, "a")
	m := receiveOne(t, f.r)
	f.q.InjectFault(Fault{Op: OpRenew, Count: 1, Err: &azservicebus.Error{Code: azservicebus.CodeLockLost}})
	wantCode(t, f.r.RenewMessageLock(context.Background(), m, nil), azservicebus.CodeLockLost)
	if f.q.Counts().Locked != 0 {
		t.Fatal("lock still held at the broker")
	}
	if again := receiveOne(t, f.r); again.DeliveryCount != 2 {
		t.Fatalf("DeliveryCount = %d, want 2", again.DeliveryCount)
	}
	wantCode(t, f.r.CompleteMessage(context.Background(), m, nil), azservicebus.CodeLockLost)
}
