package receiver_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/sbkit/sbkit"
	"github.com/sbkit/sbkit/locks"
	"github.com/sbkit/sbkit/receiver"
	"github.com/sbkit/sbkit/sbtest"
)

// The handler's result decides the settlement; a failed first delivery is abandoned and
// completed on the second.
func TestSettlementByResult(t *testing.T) {
	tests := []struct {
		name   string
		result func() error // on the first delivery; later deliveries return nil
		check  func(t *testing.T, e *env, s receiver.Stats, log *errorLog)
	}{
		{"nil completes", func() error { return nil }, func(t *testing.T, e *env, s receiver.Stats, log *errorLog) {
			if s.Completed != 1 || s.Abandoned != 0 || e.q.Stats().Completed != 1 {
				t.Errorf("stats %+v", s)
			}
		}},
		{"error abandons", func() error { return errors.New("db down") }, func(t *testing.T, e *env, s receiver.Stats, log *errorLog) {
			if s.Abandoned != 1 || s.Completed != 1 || s.HandlerErrors != 1 || log.count(receiver.SourceHandler) != 1 {
				t.Errorf("stats %+v", s)
			}
		}},
		{"dead-letter marker", func() error {
			return sbkit.DeadLetter("BadOrder", "no customer", nil)
		}, func(t *testing.T, e *env, s receiver.Stats, log *errorLog) {
			dl := e.q.DeadLetters()
			if s.DeadLettered != 1 || len(dl) != 1 || *dl[0].DeadLetterReason != "BadOrder" || *dl[0].DeadLetterErrorDescription != "no customer" {
				t.Errorf("stats %+v, dead letters %d", s, len(dl))
			}
			if log.count(receiver.SourceHandler) != 0 {
				t.Error("a settlement marker reported as a handler error")
			}
		}},
		{"dead-letter marker with properties", func() error {
			return &sbkit.SettleError{Action: sbkit.ActionDeadLetter, Reason: "R", Properties: map[string]any{"k": "v"}}
		}, func(t *testing.T, e *env, s receiver.Stats, log *errorLog) {
			dl := e.q.DeadLetters()
			if len(dl) != 1 || dl[0].ApplicationProperties["k"] != "v" {
				t.Errorf("dead letters %+v", dl)
			}
		}},
		{"defer marker", func() error { return sbkit.Defer(nil) }, func(t *testing.T, e *env, s receiver.Stats, log *errorLog) {
			if deferred := e.q.Counts().Deferred; s.Deferred != 1 || deferred != 1 {
				t.Errorf("stats %+v, deferred %d", s, deferred)
			}
		}},
		{"skip marker", func() error { return sbkit.Skip("duplicate") }, func(t *testing.T, e *env, s receiver.Stats, log *errorLog) {
			if s.Completed != 1 || s.Skipped != 1 || s.HandlerErrors != 0 {
				t.Errorf("stats %+v", s)
			}
		}},
		{"panic abandons", func() error { panic("nil map") }, func(t *testing.T, e *env, s receiver.Stats, log *errorLog) {
			var pe *receiver.PanicError
			errs := log.all()
			if s.Panics != 1 || s.Abandoned != 1 || s.Completed != 1 || len(errs) != 1 || !errors.As(errs[0], &pe) || pe.Value != "nil map" || len(pe.Stack) == 0 {
				t.Errorf("stats %+v, errors %v", s, errs)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e := newEnv(t, nil)
				e.send(t, 1)
				log := &errorLog{}
				p := newProcessor(t, e.r, func(ctx context.Context, m *azservicebus.ReceivedMessage) error {
					if m.DeliveryCount == 1 {
						return tt.result()
					}
					return nil
				}, &receiver.Options{Hooks: []receiver.Hook{log}})
				wait := start(t, p, context.Background())
				synctest.Wait()
				if err := p.Close(context.Background()); err != nil {
					t.Fatal(err)
				}
				if err := wait(); err != nil {
					t.Fatalf("Run = %v", err)
				}
				s := p.Stats()
				checkReconciled(t, s)
				if c := e.q.Counts(); c.Active != 0 || c.Locked != 0 {
					t.Errorf("active %d, locked %d", c.Active, c.Locked)
				}
				tt.check(t, e, s, log)
			})
		})
	}
}

// A handler that runs ten times the lock duration keeps its lock and completes; so do the
// messages that wait for it in the buffer.
func TestLongHandlerKeepsLock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, &sbtest.EntityOptions{LockDuration: 10 * time.Second})
		e.send(t, 3)
		p := newProcessor(t, e.r, func(ctx context.Context, m *azservicebus.ReceivedMessage) error {
			select {
			case <-time.After(100 * time.Second):
				return nil
			case <-ctx.Done():
				return context.Cause(ctx)
			}
		}, &receiver.Options{MaxConcurrency: 1, PrefetchCount: 2})
		wait := start(t, p, context.Background())
		time.Sleep(301 * time.Second)
		synctest.Wait()
		if err := p.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		if err := wait(); err != nil {
			t.Fatal(err)
		}
		s := p.Stats()
		if s.Completed != 3 || s.LocksLost != 0 || s.Abandoned != 0 {
			t.Errorf("stats %+v", s)
		}
		if st := e.q.Stats(); st.Renewed < 3*9 || st.LockExpired != 0 || st.Received != 3 {
			t.Errorf("broker stats %+v", st)
		}
		checkReconciled(t, s)
	})
}

// A lost lock cancels the handler's context with a lock-lost cause, is reported once,
// and the message is not settled.
func TestLockLostCancelsHandler(t *testing.T) {
	tests := []struct {
		name   string
		opts   receiver.Options
		lose   func(e *env, m *azservicebus.ReceivedMessage)
		reason locks.Reason
	}{
		{"lock expired at the broker", receiver.Options{}, func(e *env, m *azservicebus.ReceivedMessage) { e.q.ExpireLock(m.LockToken) }, locks.ReasonLockLost},
		{"renewals time out", receiver.Options{}, func(e *env, m *azservicebus.ReceivedMessage) {
			e.q.InjectFault(sbtest.Fault{Op: sbtest.OpRenew, Err: &azservicebus.Error{Code: azservicebus.CodeTimeout}})
		}, locks.ReasonExpired},
		{"renewal limit", receiver.Options{MaxAutoLockRenewalDuration: 2 * time.Minute}, func(*env, *azservicebus.ReceivedMessage) {}, locks.ReasonLimit},
		{"renewal disabled", receiver.Options{DisableAutoLockRenewal: true}, func(*env, *azservicebus.ReceivedMessage) {}, locks.ReasonLimit},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e := newEnv(t, &sbtest.EntityOptions{LockDuration: 30 * time.Second})
				e.send(t, 1)
				log := &errorLog{}
				causes := make(chan error, 10)
				got := make(chan *azservicebus.ReceivedMessage, 10)
				opts := tt.opts
				opts.Hooks = []receiver.Hook{log}
				var calls atomic.Int32
				p := newProcessor(t, e.r, func(ctx context.Context, m *azservicebus.ReceivedMessage) error {
					if calls.Add(1) > 1 {
						return nil // the redelivery
					}
					got <- m
					<-ctx.Done()
					causes <- context.Cause(ctx)
					return ctx.Err()
				}, &opts)
				wait := start(t, p, context.Background())
				m := <-got
				tt.lose(e, m)
				time.Sleep(10 * time.Minute)
				synctest.Wait()
				if len(causes) != 1 {
					t.Fatal("handler context not cancelled")
				}
				cause := <-causes
				var le *locks.LostError
				if !sbkit.IsLockLost(cause) || !errors.As(cause, &le) || le.Reason != tt.reason {
					t.Errorf("cause %v, want lock lost with %v", cause, tt.reason)
				}
				s := p.Stats()
				if s.LocksLost != 1 || s.Completed != 1 || s.Abandoned != 0 {
					t.Errorf("stats %+v", s)
				}
				lostReports := 0
				for _, err := range log.all() {
					if sbkit.IsLockLost(err) {
						lostReports++
					}
				}
				if lostReports != 1 {
					t.Errorf("loss reported %d times: %v", lostReports, log.all())
				}
				_ = p.Close(context.Background())
				if err := wait(); err != nil {
					t.Fatal(err)
				}
				checkReconciled(t, p.Stats())
			})
		})
	}
}

// An abandon marker's properties are written to the message, which comes back with them.
func TestAbandonMarkerProperties(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, nil)
		e.send(t, 1)
		var seen any
		p := newProcessor(t, e.r, func(ctx context.Context, m *azservicebus.ReceivedMessage) error {
			if m.DeliveryCount == 1 {
				return &sbkit.SettleError{Action: sbkit.ActionAbandon, Properties: map[string]any{"lastError": "timeout"}}
			}
			seen = m.ApplicationProperties["lastError"]
			return nil
		}, nil)
		wait := start(t, p, context.Background())
		synctest.Wait()
		_ = p.Close(context.Background())
		_ = wait()
		if s := p.Stats(); seen != "timeout" || s.Abandoned != 1 || s.Completed != 1 {
			t.Errorf("property %v, stats %+v", seen, s)
		}
	})
}

// Settlement runs on its own pool: a hanging Complete does not keep the only handler
// goroutine from the next message.
func TestSettlementDoesNotHoldHandlerSlot(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, nil)
		e.send(t, 3)
		e.q.InjectFault(sbtest.Fault{Op: sbtest.OpComplete, Count: 1, Hang: true})
		var handled atomic.Int32
		p := newProcessor(t, e.r, func(context.Context, *azservicebus.ReceivedMessage) error {
			handled.Add(1)
			return nil
		}, &receiver.Options{MaxConcurrency: 1, SettleTimeout: time.Hour})
		wait := start(t, p, context.Background())
		time.Sleep(time.Second)
		synctest.Wait()
		if handled.Load() != 3 || p.Stats().Completed != 2 {
			t.Errorf("handled %d, stats %+v while a Complete hangs", handled.Load(), p.Stats())
		}
		time.Sleep(2 * time.Hour)
		_ = p.Close(context.Background())
		_ = wait()
		// The hung Complete times out after an hour and counts as lock-lost; its lock
		// had run out meanwhile and the redelivered copy was completed.
		if s := p.Stats(); s.Received != 4 || s.Completed != 3 || s.LocksLost != 1 {
			t.Errorf("stats %+v", s)
		}
		checkReconciled(t, p.Stats())
	})
}

// sbkit.Skip completes the message and counts it skipped even with auto-complete off.
func TestSkipWithoutAutoComplete(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, nil)
		e.send(t, 2)
		p := newProcessor(t, e.r, func(context.Context, *azservicebus.ReceivedMessage) error {
			return sbkit.Skip("seen before")
		}, &receiver.Options{DisableAutoComplete: true})
		wait := start(t, p, context.Background())
		synctest.Wait()
		_ = p.Close(context.Background())
		_ = wait()
		if s := p.Stats(); s.Completed != 2 || s.Skipped != 2 || s.Abandoned != 0 || e.q.Stats().Completed != 2 {
			t.Errorf("stats %+v", s)
		}
	})
}
