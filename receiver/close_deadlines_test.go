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
)

// closer is what TestCloseShortensShutdown needs of a Processor or a SessionProcessor.
type closer struct {
	run   func(ctx context.Context) error
	close func(ctx context.Context) error
	stats func() receiver.Stats
}

// TestCloseShortensShutdown: a shutdown already under way (Run's context ended, with
// a ShutdownGrace of an hour; or a Close without deadline waiting) is cut short by a
// later Close with a 2 s deadline: the running handler is cancelled a settle reserve
// before it (at 1.5 s), its message abandoned, and Close and Run return by it. Every
// grace arms the shutdown's deadlines, the earliest wins (internal/shutdown).
func TestCloseShortensShutdown(t *testing.T) {
	builds := map[string]func(t *testing.T, h sbkit.Handler) closer{
		"Processor": func(t *testing.T, h sbkit.Handler) closer {
			e := newEnv(t, nil)
			e.send(t, 1)
			p, err := receiver.New(e.receiver(t, nil), h, &receiver.Options{ShutdownGrace: time.Hour})
			if err != nil {
				t.Fatal(err)
			}
			return closer{p.Run, p.Close, p.Stats}
		},
		"SessionProcessor": func(t *testing.T, h sbkit.Handler) closer {
			sq := newSessionQueue(t, nil)
			sq.send(t, "a", "1")
			p, err := receiver.NewSessionProcessor(sq.ns.QueueSessionAcceptor("q", nil), h,
				&receiver.SessionOptions{Options: receiver.Options{ShutdownGrace: time.Hour}})
			if err != nil {
				t.Fatal(err)
			}
			return closer{p.Run, p.Close, func() receiver.Stats { return p.Stats().Stats }}
		},
	}
	for name, build := range builds {
		for _, first := range []string{"Run's context ends", "Close without deadline"} {
			t.Run(name+"/"+first, func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					cut := make(chan time.Duration, 1)
					var start time.Time
					p := build(t, func(ctx context.Context, m *azservicebus.ReceivedMessage) error {
						<-ctx.Done()
						cut <- time.Since(start)
						return context.Cause(ctx)
					})
					runCtx, cancelRun := context.WithCancel(context.Background())
					defer cancelRun()
					done := make(chan error, 1)
					go func() { done <- p.run(runCtx) }()
					for p.stats().InFlight < 1 {
						time.Sleep(time.Millisecond)
					}
					firstClosed := make(chan error, 1)
					if first == "Run's context ends" {
						cancelRun()
					} else {
						go func() { firstClosed <- p.close(context.Background()) }()
					}
					synctest.Wait()
					start = time.Now()
					ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
					defer cancel()
					if err := p.close(ctx); !errors.Is(err, context.DeadlineExceeded) {
						t.Errorf("Close = %v, want context.DeadlineExceeded", err)
					}
					if took := time.Since(start); took > 2*time.Second {
						t.Errorf("Close with a 2 s deadline returned after %v", took)
					}
					if c := <-cut; c != 1500*time.Millisecond {
						t.Errorf("handler cancelled at %v, want 1.5 s (the settle reserve before Close's deadline)", c)
					}
					err := <-done
					if took := time.Since(start); took > 2*time.Second {
						t.Errorf("Run returned after %v, want by Close's deadline", took)
					}
					if first == "Run's context ends" {
						if !errors.Is(err, context.Canceled) {
							t.Errorf("Run = %v, want context.Canceled", err)
						}
					} else {
						if err != nil {
							t.Errorf("Run = %v, want nil", err)
						}
						if err := <-firstClosed; err == nil {
							t.Errorf("first Close = nil, want an error: its handler was cut")
						}
					}
					if s := p.stats(); s.Abandoned != 1 || s.Completed != 0 {
						t.Errorf("stats %+v, want the message abandoned at the cut", s)
					}
				})
			})
		}
	}
}
