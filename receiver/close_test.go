package receiver_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/sbkit/sbkit"
	"github.com/sbkit/sbkit/receiver"
	"github.com/sbkit/sbkit/sbtest"
)

// TestCloseKeepsDeadlineWhenAbandonHangs: with abandon hanging at the broker, Close
// returns by its context's deadline; the messages it could not abandon are left to lock
// expiry, and each one is counted and reported.
func TestCloseKeepsDeadlineWhenAbandonHangs(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, &sbtest.EntityOptions{LockDuration: time.Minute})
		e.send(t, 100)
		e.q.InjectFault(sbtest.Fault{Op: sbtest.OpAbandon, Hang: true})
		log := &errorLog{}
		p := newProcessor(t, e.r, func(ctx context.Context, m *azservicebus.ReceivedMessage) error {
			<-ctx.Done()
			return ctx.Err()
		}, &receiver.Options{MaxConcurrency: 16, PrefetchCount: 64, Hooks: []receiver.Hook{log}})
		wait := start(t, p, context.Background())
		synctest.Wait()
		if got := e.q.Counts().Locked; got != 80 {
			t.Fatalf("locked %d, want 80", got)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		begin := time.Now()
		if err := p.Close(ctx); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Close = %v, want DeadlineExceeded", err)
		}
		if took := time.Since(begin); took > time.Second {
			t.Errorf("Close took %v with a 1 s deadline", took)
		}
		if err := wait(); err != nil {
			t.Errorf("Run = %v", err)
		}
		s := p.Stats()
		if s.Received != 80 || s.LeftLocked != 80 || s.Abandoned != 0 {
			t.Errorf("stats %+v, want 80 received, 80 left locked", s)
		}
		checkReconciled(t, s)
		if reported := log.countIs(receiver.ErrLeftLocked); reported != 80 {
			t.Errorf("%d messages reported left locked, want 80", reported)
		}
	})
}

// TestCloseFromHandler: Close called from a handler with the handler's context starts
// the shutdown and returns at once (it does not wait for its own handler); Run then
// returns and the message is settled.
func TestCloseFromHandler(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, nil)
		e.send(t, 3)
		var p *receiver.Processor
		closed := make(chan error, 1)
		p = newProcessor(t, e.r, func(ctx context.Context, m *azservicebus.ReceivedMessage) error {
			if m.MessageID == "m0" {
				closed <- p.Close(ctx)
			}
			return nil
		}, &receiver.Options{DisablePrefetch: true})
		wait := start(t, p, context.Background())
		if err := <-closed; err != nil {
			t.Errorf("Close from a handler = %v", err)
		}
		if err := wait(); err != nil {
			t.Errorf("Run = %v", err)
		}
		s := p.Stats()
		if s.Completed != 1 || s.Received != 1 {
			t.Errorf("stats %+v, want the one message completed", s)
		}
		if c := e.q.Counts(); c.Locked != 0 || c.Active != 2 {
			t.Errorf("locked %d, active %d", c.Locked, c.Active)
		}
	})
}

// TestCloseKeepsDeadlineWhileHandlersRun: Close returns by its context's deadline even
// when a handler does not: one that ignores its cancelled context, or one that called
// Close itself with a context of its own (which cuts it like any other handler). Their
// messages are abandoned at the cut; Run returns once the handler does.
func TestCloseKeepsDeadlineWhileHandlersRun(t *testing.T) {
	testHandlerOutlastsClose(t, func(t *testing.T, h sbkit.Handler) outlasted {
		e := newEnv(t, nil)
		e.send(t, 1)
		p := newProcessor(t, e.r, h, &receiver.Options{DisablePrefetch: true})
		return outlasted{
			close: p.Close,
			run:   func() func() error { return start(t, p, context.Background()) },
			stats: p.Stats,
			after: func(t *testing.T) {
				if c := e.q.Counts(); c.Locked != 0 || c.Active != 1 {
					t.Errorf("locked %d, active %d, want the message back in the queue", c.Locked, c.Active)
				}
			},
		}
	})
}

// outlasted is a processor under testHandlerOutlastsClose, with one message to handle.
type outlasted struct {
	close func(context.Context) error
	run   func() (wait func() error) // starts Run
	stats func() receiver.Stats
	after func(t *testing.T) // further checks once Run returned
}

// testHandlerOutlastsClose runs, for each way a handler can outlast Close (ignoring its
// cancelled context; calling Close with a context of its own), a processor that build
// makes with a handler that does so for 10 s, and a Close with a 2 s deadline. Close
// must return DeadlineExceeded by its deadline (and a moment), Run nil when the handler
// returns, and the message must have been abandoned at the cut.
func testHandlerOutlastsClose(t *testing.T, build func(t *testing.T, h sbkit.Handler) outlasted) {
	for _, fromHandler := range []bool{false, true} {
		name := "a handler ignores its context"
		if fromHandler {
			name = "a handler calls Close with another context"
		}
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var p outlasted
				closed := make(chan error, 1)
				var handlerReturned time.Time
				closeIn2s := func() {
					ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
					defer cancel()
					closed <- p.close(ctx)
				}
				p = build(t, func(ctx context.Context, m *azservicebus.ReceivedMessage) error {
					if fromHandler {
						closeIn2s()
					}
					time.Sleep(10 * time.Second)
					handlerReturned = time.Now()
					return nil
				})
				wait := p.run()
				synctest.Wait()
				begin := time.Now()
				if !fromHandler {
					go closeIn2s()
				}
				if err := <-closed; !errors.Is(err, context.DeadlineExceeded) {
					t.Errorf("Close = %v, want DeadlineExceeded", err)
				}
				if took := time.Since(begin); took > 2*time.Second+200*time.Millisecond {
					t.Errorf("Close took %v with a 2 s deadline", took)
				}
				if err := wait(); err != nil {
					t.Errorf("Run = %v", err)
				}
				if !time.Now().Equal(handlerReturned) {
					t.Errorf("Run returned %v after the handler, want when it did", time.Since(handlerReturned))
				}
				if s := p.stats(); s.Received != 1 || s.Abandoned != 1 || s.Completed != 0 {
					t.Errorf("stats %+v, want the message abandoned at the cut", s)
				}
				p.after(t)
			})
		})
	}
}

// TestShutdownGrace: a shutdown started by the end of Run's context, or by a handler
// calling Close with its own context, gives running handlers ShutdownGrace to finish
// and completes their messages; a handler still running at its end is cancelled and its
// message abandoned, and Run returns by then. Buffered messages are abandoned at once.
// The handler's return, which ends the context it gave Close, does not cut the shutdown
// short.
func TestShutdownGrace(t *testing.T) {
	tests := []struct {
		name     string
		grace    time.Duration
		finished int64 // running 3 s handlers that finish
		wantTook time.Duration
	}{
		{"default grace lets a 3 s handler finish", 0, 1, 3 * time.Second},
		{"2 s grace cuts it", 2 * time.Second, 0, 2 * time.Second},
	}
	for _, fromHandler := range []bool{false, true} {
		for _, tt := range tests {
			name := "Run's context ends/" + tt.name
			if fromHandler {
				name = "a handler calls Close/" + tt.name
			}
			t.Run(name, func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					e := newEnv(t, nil)
					e.send(t, 5)
					var p *receiver.Processor
					p = newProcessor(t, e.r, func(ctx context.Context, m *azservicebus.ReceivedMessage) error {
						if fromHandler && m.MessageID == "m0" {
							time.Sleep(time.Millisecond) // the other handler is running
							return p.Close(ctx)
						}
						select {
						case <-time.After(3 * time.Second):
							return nil
						case <-ctx.Done():
							return context.Cause(ctx)
						}
					}, &receiver.Options{MaxConcurrency: 2, PrefetchCount: 3, ShutdownGrace: tt.grace}) // holds all 5
					ctx, cancel := context.WithCancel(context.Background())
					defer cancel()
					wait := start(t, p, ctx)
					synctest.Wait()
					begin := time.Now()
					wantErr, wantCompleted := error(nil), tt.finished+1 // m0 returned at once
					if !fromHandler {
						cancel()
						wantErr, wantCompleted = context.Canceled, 2*tt.finished
					}
					if err := wait(); !errors.Is(err, wantErr) || (wantErr == nil && err != nil) {
						t.Errorf("Run = %v, want %v", err, wantErr)
					}
					if took := time.Since(begin); took > tt.wantTook {
						t.Errorf("Run returned %v after the shutdown began, want within %v", took, tt.wantTook)
					}
					s := p.Stats()
					if s.Received != 5 || s.Completed != wantCompleted || s.Abandoned != 5-wantCompleted || s.LeftLocked != 0 {
						t.Errorf("stats %+v, want %d completed", s, wantCompleted)
					}
					checkReconciled(t, s)
				})
			})
		}
	}
}
