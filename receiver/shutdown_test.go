package receiver_test

import (
	"context"
	"errors"
	"runtime"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/sbkit/sbkit/receiver"
	"github.com/sbkit/sbkit/sbtest"
)

// Close abandons buffered messages at once, lets running handlers finish until its
// context ends, then cancels them and abandons their messages: everything unsettled is
// available again long before the lock duration.
func TestShutdownReturnsUnsettledAtOnce(t *testing.T) {
	tests := []struct {
		name          string
		handlerTime   time.Duration
		grace         time.Duration
		wantCompleted int64
		wantAbandoned int64
		wantCloseErr  error
		wantCause     error
	}{
		{"handlers finish within the grace", 5 * time.Second, time.Minute, 2, 4, nil, nil},
		{"handlers cancelled at the deadline", time.Hour, time.Second, 0, 6, context.DeadlineExceeded, receiver.ErrClosed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e := newEnv(t, &sbtest.EntityOptions{LockDuration: 5 * time.Minute})
				e.send(t, 10)
				causes := make(chan error, 10)
				var started atomic.Int32
				p := newProcessor(t, e.r, func(ctx context.Context, m *azservicebus.ReceivedMessage) error {
					started.Add(1)
					select {
					case <-time.After(tt.handlerTime):
						return nil
					case <-ctx.Done():
						causes <- context.Cause(ctx)
						return ctx.Err()
					}
				}, &receiver.Options{MaxConcurrency: 2, PrefetchCount: 4})
				wait := start(t, p, context.Background())
				synctest.Wait()
				if got := e.q.Counts().Locked; got != 6 || started.Load() != 2 {
					t.Fatalf("locked %d, started %d; want 6 and 2", got, started.Load())
				}
				ctx, cancel := context.WithTimeout(context.Background(), tt.grace)
				defer cancel()
				begin := time.Now()
				if err := p.Close(ctx); !errors.Is(err, tt.wantCloseErr) {
					t.Errorf("Close = %v, want %v", err, tt.wantCloseErr)
				}
				if took := time.Since(begin); took > min(tt.grace, tt.handlerTime)+time.Second {
					t.Errorf("Close took %v", took)
				}
				if err := wait(); err != nil {
					t.Errorf("Run = %v", err)
				}
				if started.Load() != 2 {
					t.Errorf("%d handlers started, want only the 2 running ones", started.Load())
				}
				s := p.Stats()
				if s.Completed != tt.wantCompleted || s.Abandoned != tt.wantAbandoned || s.LocksLost != 0 {
					t.Errorf("stats %+v", s)
				}
				checkReconciled(t, s)
				if c := e.q.Counts(); c.Locked != 0 || c.Active != 10-int(tt.wantCompleted) {
					t.Errorf("locked %d, active %d after Close", c.Locked, c.Active)
				}
				if tt.wantCause != nil {
					for range 2 {
						if c := <-causes; !errors.Is(c, tt.wantCause) {
							t.Errorf("handler cause %v, want %v", c, tt.wantCause)
						}
					}
				}
				if err := p.Close(context.Background()); err != nil {
					t.Errorf("second Close = %v", err)
				}
				if err := p.Run(context.Background()); !errors.Is(err, receiver.ErrClosed) {
					t.Errorf("Run after Close = %v", err)
				}
			})
		})
	}
}

// Cancelling Run's context stops at once: handlers are cancelled and every unsettled
// message is abandoned; Run returns the context's cause.
func TestRunContextCancelled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, nil)
		e.send(t, 5)
		p := newProcessor(t, e.r, func(ctx context.Context, m *azservicebus.ReceivedMessage) error {
			<-ctx.Done()
			return ctx.Err()
		}, &receiver.Options{MaxConcurrency: 2, PrefetchCount: 3}) // holds all 5
		ctx, cancel := context.WithCancelCause(context.Background())
		wait := start(t, p, ctx)
		synctest.Wait()
		stop := errors.New("deploying")
		cancel(stop)
		if err := wait(); !errors.Is(err, stop) {
			t.Errorf("Run = %v, want %v", err, stop)
		}
		s := p.Stats()
		if active := e.q.Counts().Active; s.Received != 5 || s.Abandoned != 5 || active != 5 {
			t.Errorf("stats %+v, active %d", s, active)
		}
		// Run may be called again after it returned.
		ctx2, cancel2 := context.WithCancel(context.Background())
		wait = start(t, p, ctx2)
		synctest.Wait()
		if p.Stats().Received != 10 {
			t.Errorf("second Run received %d in all", p.Stats().Received)
		}
		cancel2()
		if err := wait(); !errors.Is(err, context.Canceled) {
			t.Errorf("second Run = %v", err)
		}
		checkReconciled(t, p.Stats())
	})
}

// After Close no goroutine of the processor (handlers, settlers, renewal engine, receive
// loop) is left, with real time and the real scheduler.
func TestNoGoroutineLeftAfterClose(t *testing.T) {
	before := runtime.NumGoroutine()
	e := newEnv(t, nil)
	e.send(t, 50)
	var handled atomic.Int32
	p, err := receiver.New(e.r, func(ctx context.Context, m *azservicebus.ReceivedMessage) error {
		handled.Add(1)
		return nil
	}, &receiver.Options{MaxConcurrency: 8, AbandonDelay: receiver.ExponentialAbandonDelay(time.Second, time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	res := make(chan error, 1)
	go func() { res <- p.Run(context.Background()) }()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = e.q.WaitDrained(ctx) // Close is the subject, whether or not every message was handled
	if err := p.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := <-res; err != nil {
		t.Fatal(err)
	}
	var n int
	for range 100 {
		if n = runtime.NumGoroutine(); n <= before {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	buf := make([]byte, 1<<16)
	t.Fatalf("%d goroutines after Close, %d before:\n%s", n, before, buf[:runtime.Stack(buf, true)])
}

// A message abandoned again and again comes back with DeliveryCount+1 each time and the
// broker dead-letters it after MaxDeliveryCount deliveries.
func TestAbandonedReachDeadLetterQueue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, &sbtest.EntityOptions{MaxDeliveryCount: 4})
		e.send(t, 1)
		var counts []uint32
		p := newProcessor(t, e.r, func(ctx context.Context, m *azservicebus.ReceivedMessage) error {
			counts = append(counts, m.DeliveryCount) // MaxConcurrency 1: no race
			return errors.New("always fails")
		}, nil)
		wait := start(t, p, context.Background())
		synctest.Wait()
		_ = p.Close(context.Background())
		if err := wait(); err != nil {
			t.Fatal(err)
		}
		if len(counts) != 4 || counts[0] != 1 || counts[1] != 2 || counts[2] != 3 || counts[3] != 4 {
			t.Errorf("delivery counts %v, want [1 2 3 4]", counts)
		}
		dl := e.q.DeadLetters()
		if len(dl) != 1 || *dl[0].DeadLetterReason != sbtest.MaxDeliveryCountExceededReason {
			t.Fatalf("dead letters %v", dl)
		}
		if s := p.Stats(); s.Abandoned != 4 || s.HandlerErrors != 4 {
			t.Errorf("stats %+v", s)
		}
	})
}

// AbandonDelay keeps a failed message locked (renewed) for the delay, without holding a
// handler goroutine, then abandons it; Close abandons held messages at once.
func TestAbandonDelay(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, &sbtest.EntityOptions{LockDuration: 10 * time.Second})
		e.send(t, 2)
		var calls atomic.Int32
		p := newProcessor(t, e.r, func(ctx context.Context, m *azservicebus.ReceivedMessage) error {
			calls.Add(1)
			if m.MessageID == "m0" {
				return errors.New("dependency down")
			}
			return nil
		}, &receiver.Options{AbandonDelay: receiver.ExponentialAbandonDelay(time.Minute, 10*time.Minute)})
		wait := start(t, p, context.Background())
		time.Sleep(59 * time.Second)
		synctest.Wait()
		s := p.Stats()
		if locked := e.q.Counts().Locked; s.Abandoned != 0 || s.Completed != 1 || s.Held != 1 || locked != 1 {
			t.Errorf("during the hold: stats %+v, locked %d", s, locked)
		}
		time.Sleep(2 * time.Second)
		synctest.Wait()
		// Abandoned at 60s, redelivered (DeliveryCount 2), held for 2 minutes.
		if s := p.Stats(); s.Abandoned != 1 || s.LocksLost != 0 || calls.Load() != 3 || s.Held != 1 {
			t.Errorf("after the hold: stats %+v, calls %d", s, calls.Load())
		}
		begin := time.Now()
		if err := p.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		if time.Since(begin) > time.Second {
			t.Errorf("Close waited for the hold: %v", time.Since(begin))
		}
		if err := wait(); err != nil {
			t.Fatal(err)
		}
		s = p.Stats()
		if s.Abandoned != 2 || s.LocksLost != 0 || e.q.Counts().Active != 1 {
			t.Errorf("after Close: stats %+v", s)
		}
		checkReconciled(t, s)
	})
}

func TestExponentialAbandonDelay(t *testing.T) {
	f := receiver.ExponentialAbandonDelay(time.Second, 10*time.Second)
	for _, tt := range []struct {
		count uint32
		want  time.Duration
	}{{1, time.Second}, {2, 2 * time.Second}, {4, 8 * time.Second}, {5, 10 * time.Second}, {100, 10 * time.Second}} {
		if got := f(&azservicebus.ReceivedMessage{DeliveryCount: tt.count}, nil); got != tt.want {
			t.Errorf("delivery %d: %v, want %v", tt.count, got, tt.want)
		}
	}
	if f(nil, nil) != 0 || receiver.ExponentialAbandonDelay(0, time.Second)(&azservicebus.ReceivedMessage{DeliveryCount: 3}, nil) != 0 {
		t.Error("nil message or zero initial must give no delay")
	}
}

// In ReceiveAndDelete mode buffered messages are already gone from the broker: a shutdown
// lets handlers work through them until its deadline, then reports the rest dropped.
func TestReceiveAndDeleteShutdown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, nil)
		e.send(t, 6)
		r := e.receiver(t, &sbtest.ReceiverOptions{ReceiveMode: azservicebus.ReceiveModeReceiveAndDelete})
		log := &errorLog{}
		p := newProcessor(t, r, func(ctx context.Context, m *azservicebus.ReceivedMessage) error {
			select {
			case <-time.After(10 * time.Second):
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		}, &receiver.Options{ReceiveMode: azservicebus.ReceiveModeReceiveAndDelete, MaxConcurrency: 1, PrefetchCount: 5, Hooks: []receiver.Hook{log}})
		wait := start(t, p, context.Background())
		synctest.Wait()
		ctx, cancel := context.WithTimeout(context.Background(), 25*time.Second)
		defer cancel()
		if err := p.Close(ctx); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Close = %v", err)
		}
		_ = wait()
		st := p.Stats()
		// Handled in 25 s: two complete, the third cancelled; the other three dropped.
		if st.Received != 6 || st.Handled != 3 || st.Dropped != 3 || st.Handled+st.Dropped != st.Received {
			t.Errorf("stats %+v", st)
		}
		if dropped := log.countIs(receiver.ErrDropped); dropped != 3 {
			t.Errorf("%d drops reported", dropped)
		}
	})
}

// With renewal disabled, a message whose lock ran out while it waited for a handler is
// not handled: it counts as lock-lost.
func TestExpiredLockWhileBufferedWithoutRenewal(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, &sbtest.EntityOptions{LockDuration: 10 * time.Second, MaxDeliveryCount: 1})
		e.send(t, 2)
		var handled atomic.Int32
		p := newProcessor(t, e.r, func(ctx context.Context, m *azservicebus.ReceivedMessage) error {
			handled.Add(1)
			time.Sleep(15 * time.Second)
			return nil
		}, &receiver.Options{DisableAutoLockRenewal: true, PrefetchCount: 1})
		wait := start(t, p, context.Background())
		time.Sleep(time.Minute)
		synctest.Wait()
		_ = p.Close(context.Background())
		_ = wait()
		if s := p.Stats(); handled.Load() != 1 || s.LocksLost != 2 || s.Completed != 0 {
			t.Errorf("handled %d, stats %+v", handled.Load(), s)
		}
		checkReconciled(t, p.Stats())
	})
}
