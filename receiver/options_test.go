package receiver_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"sync"
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

func TestNewRejectsBadInput(t *testing.T) {
	e := newEnv(t, nil)
	h := func(context.Context, *azservicebus.ReceivedMessage) error { return nil }
	tests := []struct {
		name    string
		src     sbkit.MessageReceiver
		h       sbkit.Handler
		opts    *receiver.Options
		wantErr error
	}{
		{"nil receiver", nil, h, nil, receiver.ErrNilReceiver},
		{"nil handler", e.r, nil, nil, sbkit.ErrNilHandler},
		{"negative concurrency", e.r, h, &receiver.Options{MaxConcurrency: -1}, receiver.ErrInvalidOptions},
		{"negative prefetch", e.r, h, &receiver.Options{PrefetchCount: -2}, receiver.ErrInvalidOptions},
		{"negative settle timeout", e.r, h, &receiver.Options{SettleTimeout: -time.Second}, receiver.ErrInvalidOptions},
		{"negative settle concurrency: no cap", e.r, h, &receiver.Options{SettleConcurrency: -1}, nil},
		{"negative receive batch: no cap", e.r, h, &receiver.Options{MaxReceiveBatch: -1}, nil},
		{"negative renewal workers", e.r, h, &receiver.Options{LockRenewal: receiver.LockRenewalOptions{Workers: -1}}, receiver.ErrInvalidOptions},
		{"unknown receive mode", e.r, h, &receiver.Options{ReceiveMode: 7}, receiver.ErrInvalidOptions},
		{"no renewer", noRenew{e.r}, h, nil, receiver.ErrNoLockRenewer},
		{"no renewer, renewal disabled", noRenew{e.r}, h, &receiver.Options{DisableAutoLockRenewal: true}, nil},
		{"no renewer, receive and delete", noRenew{e.r}, h, &receiver.Options{ReceiveMode: azservicebus.ReceiveModeReceiveAndDelete}, nil},
		{"nil options", e.r, h, nil, nil},
		{"DisablePrefetch", e.r, h, &receiver.Options{DisablePrefetch: true}, nil},
		{"PrefetchCount with DisablePrefetch", e.r, h, &receiver.Options{DisablePrefetch: true, PrefetchCount: 2}, receiver.ErrInvalidOptions},
		{"hook of no interface", e.r, h, &receiver.Options{Hooks: []receiver.Hook{misspeltHook{}}}, receiver.ErrInvalidOptions},
		{"nil hook", e.r, h, &receiver.Options{Hooks: []receiver.Hook{nil}}, receiver.ErrInvalidOptions},
		{"lock engine hook", e.r, h, &receiver.Options{Hooks: []receiver.Hook{renewOnlyHook{}}}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := receiver.New(tt.src, tt.h, tt.opts)
			if !errors.Is(err, tt.wantErr) || (err == nil) != (p != nil) {
				t.Errorf("New = %v, %v; want %v", p, err, tt.wantErr)
			}
			if p != nil {
				if err := p.Close(context.Background()); err != nil {
					t.Errorf("Close before Run = %v", err)
				}
			}
		})
	}
}

// misspeltHook means to be an ErrorHook, but its method's name is wrong.
type misspeltHook struct{}

func (misspeltHook) OnErr(context.Context, *receiver.Error) {}

// renewOnlyHook implements only a lock engine hook, which a Processor accepts.
type renewOnlyHook struct{}

func (renewOnlyHook) OnRenew(context.Context, locks.Renewal) {}

func TestRunTwiceAndNilContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, nil)
		p := newProcessor(t, e.r, func(context.Context, *azservicebus.ReceivedMessage) error { return nil }, nil)
		wait := start(t, p, context.Background())
		synctest.Wait()
		if err := p.Run(context.Background()); !errors.Is(err, receiver.ErrRunning) {
			t.Errorf("second Run = %v", err)
		}
		_ = p.Close(context.Background())
		if err := wait(); err != nil {
			t.Error(err)
		}
	})
}

// No more than MaxConcurrency handlers run at once, and the middleware wraps each.
func TestConcurrencyBoundAndMiddleware(t *testing.T) {
	for _, conc := range []int{1, 3, 8} {
		synctest.Test(t, func(t *testing.T) {
			e := newEnv(t, nil)
			e.send(t, 40)
			var running, peak, wrapped atomic.Int32
			count := func(next sbkit.Handler) sbkit.Handler {
				return func(ctx context.Context, m *azservicebus.ReceivedMessage) error {
					wrapped.Add(1)
					return next(ctx, m)
				}
			}
			h := func(ctx context.Context, m *azservicebus.ReceivedMessage) error {
				n := running.Add(1)
				for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
				}
				time.Sleep(time.Second)
				running.Add(-1)
				return nil
			}
			p := newProcessor(t, e.r, sbkit.Chain(h, count), &receiver.Options{MaxConcurrency: conc})
			wait := start(t, p, context.Background())
			time.Sleep(time.Hour)
			synctest.Wait()
			_ = p.Close(context.Background())
			_ = wait()
			if peak.Load() != int32(conc) || wrapped.Load() != 40 || p.Stats().Completed != 40 {
				t.Errorf("MaxConcurrency %d: peak %d, wrapped %d, stats %+v", conc, peak.Load(), wrapped.Load(), p.Stats())
			}
		})
	}
}

// With auto-complete off the handler settles through SettlerFrom; the Settler refuses a
// second settlement and another message; a handler that settles nothing gets its message
// abandoned and ErrNotSettled reported.
func TestManualSettlement(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, nil)
		e.send(t, 4)
		log := &errorLog{}
		var mu sync.Mutex
		results := map[string][]error{}
		p := newProcessor(t, e.r, func(ctx context.Context, m *azservicebus.ReceivedMessage) error {
			s := receiver.SettlerFrom(ctx)
			var errs []error
			switch m.MessageID {
			case "m0":
				errs = append(errs, s.CompleteMessage(ctx, m, nil), s.CompleteMessage(ctx, m, nil),
					s.AbandonMessage(ctx, &azservicebus.ReceivedMessage{}, nil))
			case "m1":
				reason := "Manual"
				errs = append(errs, s.DeadLetterMessage(ctx, m, &azservicebus.DeadLetterOptions{Reason: &reason}))
			case "m2":
				errs = append(errs, s.DeferMessage(ctx, m, nil))
			case "m3":
				if m.DeliveryCount > 1 {
					errs = append(errs, s.CompleteMessage(ctx, m, nil))
				}
				// First delivery: returns nil without settling.
			}
			mu.Lock()
			results[m.MessageID] = append(results[m.MessageID], errs...)
			mu.Unlock()
			return nil
		}, &receiver.Options{DisableAutoComplete: true, Hooks: []receiver.Hook{log}})
		wait := start(t, p, context.Background())
		synctest.Wait()
		_ = p.Close(context.Background())
		_ = wait()
		if r := results["m0"]; len(r) != 3 || r[0] != nil || !errors.Is(r[1], receiver.ErrAlreadySettled) || !errors.Is(r[2], receiver.ErrWrongMessage) {
			t.Errorf("m0: %v", r)
		}
		c := e.q.Counts()
		if r := results["m1"]; len(r) != 1 || r[0] != nil || c.DeadLetter != 1 || *e.q.DeadLetters()[0].DeadLetterReason != "Manual" {
			t.Errorf("m1: %v", r)
		}
		if r := results["m2"]; len(r) != 1 || r[0] != nil || c.Deferred != 1 {
			t.Errorf("m2: %v", r)
		}
		if r := results["m3"]; len(r) != 1 || r[0] != nil {
			t.Errorf("m3: %v", r)
		}
		s := p.Stats()
		if s.Completed != 2 || s.DeadLettered != 1 || s.Deferred != 1 || s.Abandoned != 1 {
			t.Errorf("stats %+v", s)
		}
		errs := log.all()
		if len(errs) != 1 || !errors.Is(errs[0], receiver.ErrNotSettled) || errs[0].Source != receiver.SourceHandler {
			t.Errorf("errors %v", errs)
		}
		checkReconciled(t, s)
		if err := receiver.SettlerFrom(context.Background()).CompleteMessage(context.Background(), &azservicebus.ReceivedMessage{}, nil); !errors.Is(err, receiver.ErrNoSettler) {
			t.Errorf("SettlerFrom outside a handler: %v", err)
		}
		if _, ok := receiver.LockedUntilFrom(context.Background()); ok {
			t.Error("LockedUntil outside a handler")
		}
	})
}

// LockedUntilFrom(ctx) follows renewals without racing with them.
func TestLockedUntilFollowsRenewals(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, &sbtest.EntityOptions{LockDuration: 30 * time.Second})
		e.send(t, 1)
		var first, later time.Time
		p := newProcessor(t, e.r, func(ctx context.Context, m *azservicebus.ReceivedMessage) error {
			first, _ = receiver.LockedUntilFrom(ctx)
			time.Sleep(time.Minute)
			later, _ = receiver.LockedUntilFrom(ctx)
			return nil
		}, nil)
		start0 := time.Now()
		wait := start(t, p, context.Background())
		time.Sleep(2 * time.Minute)
		_ = p.Close(context.Background())
		_ = wait()
		if !first.Equal(start0.Add(30*time.Second)) || !later.After(start0.Add(time.Minute)) {
			t.Errorf("LockedUntil %v then %v (start %v)", first, later, start0)
		}
	})
}

// In ReceiveAndDelete mode nothing is settled or renewed; handler errors are reported.
func TestReceiveAndDelete(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, nil)
		e.send(t, 5)
		r := e.receiver(t, &sbtest.ReceiverOptions{ReceiveMode: azservicebus.ReceiveModeReceiveAndDelete})
		log := &errorLog{}
		var n atomic.Int32
		p := newProcessor(t, noRenew{r}, func(ctx context.Context, m *azservicebus.ReceivedMessage) error {
			if n.Add(1)%2 == 0 {
				return errors.New("lost anyway")
			}
			if receiver.SettlerFrom(ctx).CompleteMessage(ctx, m, nil) == nil {
				t.Error("a Settler in ReceiveAndDelete mode")
			}
			return nil
		}, &receiver.Options{ReceiveMode: azservicebus.ReceiveModeReceiveAndDelete, Hooks: []receiver.Hook{log}})
		wait := start(t, p, context.Background())
		synctest.Wait()
		_ = p.Close(context.Background())
		_ = wait()
		st := p.Stats()
		if st.Received != 5 || st.Handled != 5 || st.Completed != 0 || st.Abandoned != 0 || st.HandlerErrors != 2 || log.count(receiver.SourceHandler) != 2 {
			t.Errorf("stats %+v", st)
		}
		if b, c := e.q.Stats(), e.q.Counts(); b.Completed != 0 || b.Abandoned != 0 || b.Renewed != 0 || c.Active != 0 {
			t.Errorf("broker %+v, %+v", b, c)
		}
	})
}

// Errors reach the Logger with their source and the message's MessageID, so that a log
// line can be tied to its message; payloads never do.
func TestLogger(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, nil)
		secret := "card 4111"
		_ = e.s.SendMessage(context.Background(), &azservicebus.Message{MessageID: new("order-42"), Body: []byte(secret)}, nil)
		var buf bytes.Buffer
		var mu sync.Mutex
		logger := slog.New(slog.NewTextHandler(&lockedWriter{w: &buf, mu: &mu}, &slog.HandlerOptions{Level: slog.LevelDebug}))
		p := newProcessor(t, e.r, func(ctx context.Context, m *azservicebus.ReceivedMessage) error {
			if m.DeliveryCount == 1 {
				return errors.New("payment service down")
			}
			return nil
		}, &receiver.Options{Logger: logger})
		wait := start(t, p, context.Background())
		synctest.Wait()
		_ = p.Close(context.Background())
		_ = wait()
		mu.Lock()
		out := buf.String()
		mu.Unlock()
		if !strings.Contains(out, "payment service down") || !strings.Contains(out, "action=complete") {
			t.Errorf("log:\n%s", out)
		}
		if !strings.Contains(out, "source=handler") {
			t.Errorf("no handler error logged:\n%s", out)
		}
		for line := range strings.Lines(out) {
			if strings.Contains(line, "source=handler") && !strings.Contains(line, "messageID=order-42") {
				t.Errorf("the handler's error does not name its message: %s", line)
			}
		}
		if strings.Contains(out, secret) {
			t.Errorf("payload logged:\n%s", out)
		}
	})
}

type lockedWriter struct {
	w  io.Writer
	mu *sync.Mutex
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
