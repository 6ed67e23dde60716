package receiver_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/sbkit/sbkit"
	"github.com/sbkit/sbkit/locks"
	"github.com/sbkit/sbkit/receiver"
	"github.com/sbkit/sbkit/sbtest"
)

type traceKey struct{}

// allHooks implements every hook of receiver and locks, and records what it sees.
type allHooks struct {
	mu       sync.Mutex
	receives []receiver.ReceiveCall
	starts   int
	ends     map[string]receiver.HandlerEnd
	settles  map[string]receiver.Settlement
	traced   map[string]bool // the settlement's ctx carried the start hook's value
	errs     []*receiver.Error
	renewals int
	lost     []locks.LockLoss
}

func newAllHooks() *allHooks {
	return &allHooks{ends: map[string]receiver.HandlerEnd{}, settles: map[string]receiver.Settlement{}, traced: map[string]bool{}}
}

func (h *allHooks) OnReceive(_ context.Context, e receiver.ReceiveCall) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.receives = append(h.receives, e)
}

func (h *allHooks) OnHandlerStart(ctx context.Context, e receiver.HandlerStart) context.Context {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.starts++
	return context.WithValue(ctx, traceKey{}, e.Message.MessageID)
}

func (h *allHooks) OnHandlerEnd(_ context.Context, e receiver.HandlerEnd) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.ends[e.Message.MessageID] = e
}

func (h *allHooks) OnSettle(ctx context.Context, e receiver.Settlement) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.settles[e.Message.MessageID] = e
	h.traced[e.Message.MessageID] = ctx.Value(traceKey{}) == e.Message.MessageID
}

func (h *allHooks) OnError(_ context.Context, err *receiver.Error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.errs = append(h.errs, err)
}

func (h *allHooks) OnRenew(context.Context, locks.Renewal) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.renewals++
}

func (h *allHooks) OnLockLost(_ context.Context, e locks.LockLoss) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.lost = append(h.lost, e)
}

// panicky panics in every receiver hook it implements.
type panicky struct{}

func (panicky) OnReceive(context.Context, receiver.ReceiveCall) { panic("hook bug") }
func (panicky) OnHandlerStart(context.Context, receiver.HandlerStart) context.Context {
	panic("hook bug")
}
func (panicky) OnSettle(context.Context, receiver.Settlement) { panic("hook bug") }

// Hooks see receive calls, handler starts (whose context reaches the handler and the
// settlement hooks) and ends, settlements with their action and dead-letter reason,
// errors with their source, and the lock engine's events; a panicking hook changes
// nothing.
func TestHooks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, &sbtest.EntityOptions{LockDuration: 30 * time.Second, MaxDeliveryCount: 1})
		e.send(t, 4)
		h := newAllHooks()
		var errFunc []*receiver.Error
		var mu sync.Mutex
		p := newProcessor(t, e.r, func(ctx context.Context, m *azservicebus.ReceivedMessage) error {
			if ctx.Value(traceKey{}) != m.MessageID {
				t.Errorf("%s: handler context lacks the start hook's value", m.MessageID)
			}
			switch m.MessageID {
			case "m1":
				return sbkit.DeadLetter("Invalid", "bad", nil)
			case "m2":
				return errors.New("failed")
			case "m3":
				time.Sleep(50 * time.Second) // renewed at 20 s and 40 s
			}
			return nil
		}, &receiver.Options{MaxConcurrency: 4, Hooks: []receiver.Hook{panicky{}, h, receiver.ErrorHookFunc(func(_ context.Context, err *receiver.Error) {
			mu.Lock()
			errFunc = append(errFunc, err)
			mu.Unlock()
		})}})
		wait := start(t, p, context.Background())
		time.Sleep(2 * time.Minute)
		if err := p.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		if err := wait(); err != nil {
			t.Fatal(err)
		}
		s := p.Stats()
		h.mu.Lock()
		defer h.mu.Unlock()
		received := 0
		for _, rc := range h.receives {
			received += rc.Received
			if rc.Received > rc.Requested || (rc.Err != nil && !errors.Is(rc.Err, context.Canceled)) {
				t.Errorf("receive call %+v", rc)
			}
		}
		if int64(received) != s.Received || h.starts != int(s.Handled) || len(h.ends) != int(s.Handled) {
			t.Errorf("received %d, starts %d, ends %d; stats %+v", received, h.starts, len(h.ends), s)
		}
		if end := h.ends["m1"]; end.Action != sbkit.ActionDeadLetter || end.Err == nil {
			t.Errorf("m1 end %+v", end)
		}
		if end := h.ends["m3"]; end.Duration != 50*time.Second || end.Action != sbkit.ActionComplete {
			t.Errorf("m3 end %+v", end)
		}
		want := map[string]sbkit.Action{"m0": sbkit.ActionComplete, "m1": sbkit.ActionDeadLetter, "m2": sbkit.ActionAbandon, "m3": sbkit.ActionComplete}
		for id, action := range want {
			st := h.settles[id]
			if st.Action != action || st.Err != nil || st.Attempts != 1 || !h.traced[id] {
				t.Errorf("%s settlement %+v (traced %v), want %v", id, st, h.traced[id], action)
			}
		}
		if h.settles["m1"].DeadLetterReason != "Invalid" {
			t.Errorf("m1 dead-letter reason %q", h.settles["m1"].DeadLetterReason)
		}
		if len(h.errs) != 1 || h.errs[0].Source != receiver.SourceHandler || h.errs[0].Action != 0 || len(errFunc) != 1 {
			t.Errorf("errors %v, ErrorHookFunc got %d", h.errs, len(errFunc))
		}
		if h.renewals != 2 || s.Renewed != 2 || len(h.lost) != 0 {
			t.Errorf("renewals seen %d, stats %d, lost %v", h.renewals, s.Renewed, h.lost)
		}
	})
}

// lossWatcher is a LockLostHook that records whether the handler of the lost message was
// still running, its context not yet cancelled, when the hook was called.
type lossWatcher struct {
	mu         sync.Mutex
	handlerCtx context.Context
	sawRunning bool
	calls      int
}

func (w *lossWatcher) OnLockLost(context.Context, locks.LockLoss) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.calls++
	w.sawRunning = w.handlerCtx != nil && w.handlerCtx.Err() == nil
}

// A lock lost while its handler runs reaches the hooks before the processor cancels the
// handler, so that a hook can attach the loss to what the handler's start began (a
// trace's process span, which its end closes). The processor's own reaction came first,
// and the handler could return, and end its span, before the hooks heard of the loss.
func TestLockLostHooksBeforeHandlerCancelled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, &sbtest.EntityOptions{LockDuration: 10 * time.Second})
		e.send(t, 1)
		w := &lossWatcher{}
		p := newProcessor(t, e.r, func(ctx context.Context, m *azservicebus.ReceivedMessage) error {
			if m.DeliveryCount > 1 {
				return nil // delivered again once its lock expired
			}
			w.mu.Lock()
			w.handlerCtx = ctx
			w.mu.Unlock()
			<-ctx.Done()
			return ctx.Err()
		}, &receiver.Options{Hooks: []receiver.Hook{w}})
		wait := start(t, p, context.Background())
		time.Sleep(time.Second)
		for _, m := range e.q.Locked() {
			e.q.ExpireLock(m.LockToken)
		}
		time.Sleep(20 * time.Second) // the next renewal finds the lock gone
		if err := p.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		if err := wait(); err != nil {
			t.Fatal(err)
		}
		w.mu.Lock()
		defer w.mu.Unlock()
		if w.calls != 1 || !w.sawRunning {
			t.Errorf("OnLockLost called %d times; the handler still running then: %v, want once and true", w.calls, w.sawRunning)
		}
		if st := p.Stats(); st.LocksLost != 1 {
			t.Errorf("stats %+v: want one lock lost", st)
		}
	})
}
