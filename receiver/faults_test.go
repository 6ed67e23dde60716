package receiver_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/sbkit/sbkit"
	"github.com/sbkit/sbkit/receiver"
	"github.com/sbkit/sbkit/sbtest"
)

// Under injected faults, expired locks and a dropped connection, every received message
// ends exactly once as completed, abandoned, dead-lettered, deferred or lock-lost, and the
// processor's counts agree with the broker's.
func TestReconcileUnderFaults(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const n = 300
		e := newEnv(t, &sbtest.EntityOptions{LockDuration: 10 * time.Second, MaxDeliveryCount: 3})
		e.send(t, n)
		for _, f := range []sbtest.Fault{
			{Op: sbtest.OpReceive, Count: 2},
			{Op: sbtest.OpComplete, Count: 5},
			{Op: sbtest.OpAbandon, Count: 3},
			{Op: sbtest.OpRenew, Count: 4},
			{Op: sbtest.OpDeadLetter, Count: 2, Err: &azservicebus.Error{Code: azservicebus.CodeLockLost}},
			{Op: sbtest.OpDefer, Count: 1, Err: sbtest.PermanentError},
		} {
			e.q.InjectFault(f)
		}
		log := &errorLog{}
		var lostInHandler atomic.Int32
		p := newProcessor(t, e.r, func(ctx context.Context, m *azservicebus.ReceivedMessage) error {
			i, _ := strconv.Atoi(strings.TrimPrefix(m.MessageID, "m"))
			if i%13 == 0 && m.DeliveryCount == 1 {
				panic("bad luck")
			}
			switch i % 6 {
			case 1:
				return errors.New("failed")
			case 2:
				return sbkit.DeadLetter("Invalid", "", nil)
			case 3:
				return sbkit.Defer(nil)
			case 4:
				return sbkit.Skip("duplicate")
			case 5:
				select {
				case <-time.After(25 * time.Second): // longer than the lock
				case <-ctx.Done():
					if sbkit.IsLockLost(context.Cause(ctx)) {
						lostInHandler.Add(1)
					}
					return ctx.Err()
				}
			}
			return nil
		}, &receiver.Options{MaxConcurrency: 8, PrefetchCount: 8, Hooks: []receiver.Hook{log},
			AbandonDelay: func(m *azservicebus.ReceivedMessage, _ error) time.Duration {
				if m.SequenceNumber != nil && *m.SequenceNumber%2 == 0 {
					return 3 * time.Second
				}
				return 0
			}})
		wait := start(t, p, context.Background())

		// Chaos: expire a lock every 3 s; drop the connection once.
		chaosDone := make(chan struct{})
		go func() {
			defer close(chaosDone)
			for i := range 40 {
				time.Sleep(3 * time.Second)
				if locked := e.q.Locked(); len(locked) > 0 {
					e.q.ExpireLock(locked[i%len(locked)].LockToken)
				}
				if i == 10 {
					e.r.DropConnection()
				}
			}
		}()
		<-chaosDone
		time.Sleep(10 * time.Minute)
		synctest.Wait()
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = p.Close(ctx)
		if err := wait(); err != nil {
			t.Fatal(err)
		}

		s := p.Stats()
		checkReconciled(t, s)
		b := e.q.Stats()
		if s.Completed != b.Completed || s.Abandoned != b.Abandoned || s.Deferred != b.Deferred || s.Received != b.Received {
			t.Errorf("processor %+v\nbroker %+v", s, b)
		}
		if s.LocksLost == 0 || s.Abandoned == 0 || s.DeadLettered == 0 || s.Deferred == 0 || s.Skipped == 0 || s.Panics == 0 {
			t.Errorf("some outcome never happened: %+v", s)
		}
		if s.ReceiveErrors != 2 || s.RenewErrors < 4 {
			t.Errorf("receive errors %d, renew errors %d", s.ReceiveErrors, s.RenewErrors)
		}
		// Every message is somewhere: completed, deferred, dead-lettered, or available.
		c := e.q.Counts()
		if c.Locked != 0 {
			t.Errorf("%d messages still locked", c.Locked)
		}
		if total := int(b.Completed) + c.Deferred + c.DeadLetter + c.Active; total != n {
			t.Errorf("completed %d + deferred %d + dead %d + active %d = %d, want %d",
				b.Completed, c.Deferred, c.DeadLetter, c.Active, total, n)
		}
		lostReports := 0
		for _, err := range log.all() {
			if (err.Source == receiver.SourceRenew || err.Source == receiver.SourceSettle) && (sbkit.IsLockLost(err) || sbkit.IsPermanent(err.Err)) &&
				!errors.Is(err, sbtest.TransientError) {
				lostReports++
			}
		}
		if int64(lostReports) != s.LocksLost {
			t.Errorf("%d loss reports for %d lost messages", lostReports, s.LocksLost)
		}
		t.Logf("stats %+v, lost in handler %d", s, lostInHandler.Load())
	})
}

// Transient receive errors are reported and retried with backoff; a permanent one is
// reported once and ends Run with it.
func TestReceiveErrors(t *testing.T) {
	notFound := &azservicebus.Error{Code: azservicebus.CodeNotFound}
	tests := []struct {
		name    string
		fault   sbtest.Fault
		wantErr error
	}{
		{"transient retried", sbtest.Fault{Op: sbtest.OpReceive, Count: 3}, nil},
		{"timeout retried", sbtest.Fault{Op: sbtest.OpReceive, Count: 3, Err: context.DeadlineExceeded}, nil},
		{"unauthorized ends Run", sbtest.Fault{Op: sbtest.OpReceive, Err: sbtest.PermanentError}, sbtest.PermanentError},
		{"not found ends Run", sbtest.Fault{Op: sbtest.OpReceive, Err: notFound}, notFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e := newEnv(t, nil)
				e.send(t, 3)
				e.q.InjectFault(tt.fault)
				log := &errorLog{}
				p := newProcessor(t, e.r, func(context.Context, *azservicebus.ReceivedMessage) error { return nil },
					&receiver.Options{Hooks: []receiver.Hook{log}})
				wait := start(t, p, context.Background())
				time.Sleep(time.Minute)
				synctest.Wait()
				if wantErr := tt.wantErr; wantErr != nil {
					if err := wait(); !errors.Is(err, wantErr) {
						t.Fatalf("Run = %v, want %v", err, wantErr)
					}
					if log.count(receiver.SourceReceive) != 1 {
						t.Errorf("receive errors reported %d times", log.count(receiver.SourceReceive))
					}
					return
				}
				_ = p.Close(context.Background())
				if err := wait(); err != nil {
					t.Fatal(err)
				}
				if s := p.Stats(); s.Completed != 3 || s.ReceiveErrors != 3 || log.count(receiver.SourceReceive) != 3 {
					t.Errorf("stats %+v", s)
				}
			})
		})
	}
}

// Transient settlement failures are retried; a settlement that fails for good counts the
// message as lock-lost and is reported once with SourceSettle and the action.
func TestSettleErrors(t *testing.T) {
	tests := []struct {
		name          string
		fault         sbtest.Fault
		wantCompleted int64
		wantLost      int64
		wantReports   int
	}{
		{"transient retried", sbtest.Fault{Op: sbtest.OpComplete, Count: 2}, 1, 0, 2},
		{"lock lost", sbtest.Fault{Op: sbtest.OpComplete, Count: 1, Err: &azservicebus.Error{Code: azservicebus.CodeLockLost}}, 0, 1, 1},
		{"unauthorized", sbtest.Fault{Op: sbtest.OpComplete, Count: 1, Err: sbtest.PermanentError}, 0, 1, 1},
		{"hangs past SettleTimeout", sbtest.Fault{Op: sbtest.OpComplete, Count: 1, Hang: true}, 0, 1, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e := newEnv(t, &sbtest.EntityOptions{MaxDeliveryCount: 1})
				e.send(t, 1)
				e.q.InjectFault(tt.fault)
				log := &errorLog{}
				p := newProcessor(t, e.r, func(context.Context, *azservicebus.ReceivedMessage) error { return nil },
					&receiver.Options{Hooks: []receiver.Hook{log}, SettleTimeout: 10 * time.Second})
				wait := start(t, p, context.Background())
				time.Sleep(time.Minute)
				synctest.Wait()
				_ = p.Close(context.Background())
				_ = wait()
				s := p.Stats()
				if s.Completed != tt.wantCompleted || s.LocksLost != tt.wantLost || log.count(receiver.SourceSettle) != tt.wantReports {
					t.Errorf("stats %+v, settle reports %d", s, log.count(receiver.SourceSettle))
				}
				for _, err := range log.all() {
					if err.Source != receiver.SourceSettle || err.Action != sbkit.ActionComplete || err.Message == nil {
						t.Errorf("report %+v", err)
					}
				}
				checkReconciled(t, s)
			})
		})
	}
}
