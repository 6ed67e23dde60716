package sender_test

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/sbkit/sbkit/sbtest"
	"github.com/sbkit/sbkit/sender"
)

func TestCloseWaitsForInFlight(t *testing.T) {
	for _, batching := range []bool{false, true} {
		t.Run(map[bool]string{false: "single", true: "batched"}[batching], func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				b := newBroker(t, sbtest.Latency{RoundTrip: 10 * time.Millisecond}, nil)
				s, err := sender.New(b.s, &sender.Options{DisableBatching: !batching})
				if err != nil {
					t.Fatal(err)
				}
				rs := sendAsync(t, t.Context(), s, msgs(0, 50)...)
				if err := s.Close(t.Context()); err != nil {
					t.Fatal(err)
				}
				for i, r := range rs {
					select {
					case <-r.Done():
					default:
						t.Fatalf("message %d has no outcome after Close", i)
					}
					if r.Err() != nil {
						t.Errorf("message %d: %v", i, r.Err())
					}
				}
				if b.q.Counts().Active != 50 {
					t.Errorf("queue holds %d, want 50", b.q.Counts().Active)
				}
				if err := s.Close(t.Context()); err != nil {
					t.Errorf("second Close: %v", err)
				}
				// The bubble ends with the test: a goroutine left behind would fail it.
			})
		})
	}
}

func TestCloseGivesUpOnHungRequests(t *testing.T) {
	modes := []struct {
		name string
		opts sender.Options
	}{
		{"single", sender.Options{DisableBatching: true}},
		{"batched", sender.Options{}},
		// Ordered, one key, one message per batch: four messages wait behind the hung one.
		{"ordered single", sender.Options{DisableBatching: true, Ordered: true}},
		{"ordered batched", sender.Options{Ordered: true, MaxBatchMessages: 1}},
	}
	for _, mode := range modes {
		t.Run(mode.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				b := newBroker(t, sbtest.Latency{}, nil)
				out := newOutcomes()
				opts := mode.opts
				opts.Hooks = []sender.Hook{out}
				s, err := sender.New(b.s, &opts)
				if err != nil {
					t.Fatal(err)
				}
				b.q.InjectFault(sbtest.Fault{Hang: true})
				var ms []*azservicebus.Message
				for i := range 5 {
					ms = append(ms, sessionMsg("s", i))
				}
				rs := sendAsync(t, t.Context(), s, ms...)
				ctx, cancel := context.WithTimeout(t.Context(), time.Second)
				defer cancel()
				if err := s.Close(ctx); !errors.Is(err, context.DeadlineExceeded) {
					t.Fatalf("Close = %v, want DeadlineExceeded", err)
				}
				for i, r := range rs {
					if err := r.Err(); !errors.Is(err, sender.ErrClosed) {
						t.Errorf("message %d: %v, want ErrClosed", i, err)
					}
				}
				out.checkOnce(t, []string{"m0000", "m0001", "m0002", "m0003", "m0004"})
			})
		})
	}
}

// TestCloseRacingSends: senders keep sending while Close runs. Every message gets
// exactly one outcome (sent, or refused with ErrClosed); none is lost.
func TestCloseRacingSends(t *testing.T) {
	for _, batching := range []bool{false, true} {
		t.Run(map[bool]string{false: "single", true: "batched"}[batching], func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				b := newBroker(t, sbtest.Latency{RoundTrip: 3 * time.Millisecond}, nil)
				out := newOutcomes()
				s, err := sender.New(b.s, &sender.Options{DisableBatching: !batching, MaxInFlightMessages: 8, Hooks: []sender.Hook{out}})
				if err != nil {
					t.Fatal(err)
				}
				var accepted, refused atomic.Int64
				var mu sync.Mutex
				var ids []string
				var wg sync.WaitGroup
				for p := range 4 {
					wg.Go(func() {
						for i := 0; ; i++ {
							m := msg(p*10000 + i)
							err := s.Send(t.Context(), m)
							mu.Lock()
							ids = append(ids, *m.MessageID) // a refused message gets an outcome too
							mu.Unlock()
							if errors.Is(err, sender.ErrClosed) {
								refused.Add(1)
								return
							}
							if err != nil {
								t.Errorf("Send: %v", err)
							}
							accepted.Add(1)
						}
					})
				}
				time.Sleep(20 * time.Millisecond)
				if err := s.Close(t.Context()); err != nil {
					t.Fatal(err)
				}
				wg.Wait()
				out.checkOnce(t, ids)
				if st := s.Stats(); st.Sent != accepted.Load() || st.Rejected != refused.Load() || st.Failed != 0 {
					t.Errorf("stats %+v; accepted %d, refused %d", st, accepted.Load(), refused.Load())
				}
				if refused.Load() != 4 || accepted.Load() == 0 {
					t.Errorf("accepted %d, refused %d", accepted.Load(), refused.Load())
				}
				if int64(b.q.Counts().Active) != accepted.Load() {
					t.Errorf("queue holds %d, accepted %d", b.q.Counts().Active, accepted.Load())
				}
			})
		})
	}
}

// TestNoGoroutineLeftAfterClose checks with real time what the synctest bubbles above
// check with virtual time.
func TestNoGoroutineLeftAfterClose(t *testing.T) {
	before := runtime.NumGoroutine()
	b := newBroker(t, sbtest.Latency{RoundTrip: time.Millisecond}, nil)
	s, err := sender.New(b.s, &sender.Options{Ordered: true})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 200 {
		m := msg(i)
		if i%2 == 0 {
			m.SessionID = ptr("s")
		}
		if _, err := s.SendAsync(t.Context(), m); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	for range 100 {
		if runtime.NumGoroutine() <= before {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Errorf("%d goroutines after Close, %d before", runtime.NumGoroutine(), before)
}

// recordingHooks implements every hook interface and records what it saw.
type recordingHooks struct {
	mu      sync.Mutex
	ctxs    []any // the "caller" value of the ctx of every start, result and retry event
	starts  []string
	results []sender.SendResult
	retries []sender.SendRetry
	batches []sender.SendBatch
	// startCtxLost lists the messages whose result or retry event did not get the
	// context their start hook returned.
	startCtxLost []string
}

type callerKey struct{}

func (h *recordingHooks) OnSendStart(ctx context.Context, e sender.SendStart) context.Context {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.ctxs = append(h.ctxs, ctx.Value(callerKey{}))
	h.starts = append(h.starts, *e.Message.MessageID)
	// What an OpenTelemetry adapter does: inject the caller's trace context, and return a
	// context carrying the message's span.
	if e.Message.ApplicationProperties == nil {
		e.Message.ApplicationProperties = map[string]any{}
	}
	e.Message.ApplicationProperties["caller"] = ctx.Value(callerKey{})
	return context.WithValue(ctx, startKey{}, *e.Message.MessageID)
}

// startKey is the value recordingHooks.OnSendStart adds to the message's context.
type startKey struct{}

func (h *recordingHooks) OnSendResult(ctx context.Context, e sender.SendResult) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.recordCtx(ctx, e.MessageID)
	h.results = append(h.results, e)
}

func (h *recordingHooks) OnSendRetry(ctx context.Context, e sender.SendRetry) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.recordCtx(ctx, e.MessageID)
	h.retries = append(h.retries, e)
}

// recordCtx records the caller value of the ctx of an event about the message id, and
// whether it is the context OnSendStart returned. Called with h.mu held.
func (h *recordingHooks) recordCtx(ctx context.Context, id string) {
	h.ctxs = append(h.ctxs, ctx.Value(callerKey{}))
	if ctx.Value(startKey{}) != id {
		h.startCtxLost = append(h.startCtxLost, id)
	}
}

func (h *recordingHooks) OnSendBatch(_ context.Context, e sender.SendBatch) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.batches = append(h.batches, e)
}

type panickingHook struct{}

func (panickingHook) OnSendStart(context.Context, sender.SendStart) context.Context {
	panic("hook")
}
func (panickingHook) OnSendResult(context.Context, sender.SendResult) { panic("hook") }

// TestHooks: each hook sees what it promises, with the caller's ctx; a hook that panics
// or is not a hook changes nothing.
func TestHooks(t *testing.T) {
	for _, batching := range []bool{false, true} {
		t.Run(map[bool]string{false: "single", true: "batched"}[batching], func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				b := newBroker(t, sbtest.Latency{RoundTrip: 10 * time.Millisecond}, nil)
				h := &recordingHooks{}
				var funcResults atomic.Int64
				s, err := sender.New(b.s, &sender.Options{
					DisableBatching:     !batching,
					MaxInFlightMessages: 10,
					Hooks: []sender.Hook{panickingHook{}, h,
						sender.SendResultHookFunc(func(context.Context, sender.SendResult) { funcResults.Add(1) })},
				})
				if err != nil {
					t.Fatal(err)
				}
				b.q.InjectFault(sbtest.Fault{Count: 1})
				ctx := context.WithValue(t.Context(), callerKey{}, "c1")
				rs := sendAsync(t, ctx, s, msgs(0, 10)...)
				if _, err := s.TrySend(ctx, msg(10)); !errors.Is(err, sender.ErrFull) {
					t.Fatalf("TrySend = %v, want ErrFull", err)
				}
				for i, r := range rs {
					if err := r.Wait(t.Context()); err != nil {
						t.Errorf("message %d: %v", i, err)
					}
				}
				if err := s.Close(t.Context()); err != nil {
					t.Fatal(err)
				}
				h.mu.Lock()
				defer h.mu.Unlock()
				if len(h.starts) != 11 || len(h.results) != 11 || funcResults.Load() != 11 {
					t.Fatalf("%d starts, %d results, %d func results; want 11 each", len(h.starts), len(h.results), funcResults.Load())
				}
				for i, c := range h.ctxs {
					if c != "c1" {
						t.Fatalf("event %d saw ctx value %v, want the caller's", i, c)
					}
				}
				if len(h.startCtxLost) > 0 {
					t.Fatalf("events of %v did not get the context their start hook returned", h.startCtxLost)
				}
				for _, m := range b.q.Active() {
					if m.ApplicationProperties["caller"] != "c1" {
						t.Errorf("stored message %s has properties %v: the start hook's change was lost", m.MessageID, m.ApplicationProperties)
					}
				}
				// One fault: the first request fails once (a batch of 10, or message 0).
				wantRetries, wantAttempts := 1, 2
				if batching {
					wantRetries = 10
				}
				if len(h.retries) != wantRetries {
					t.Fatalf("%d retry events, want %d", len(h.retries), wantRetries)
				}
				for _, e := range h.retries {
					if e.Attempt != 1 || e.Delay <= 0 || !errors.Is(e.Err, sbtest.TransientError) || e.Messages != wantRetries {
						t.Errorf("retry event %+v", e)
					}
				}
				sent := 0
				for _, e := range h.results {
					if e.Rejected != (e.MessageID == "m0010") {
						t.Errorf("result of %s: Rejected %v", e.MessageID, e.Rejected)
					}
					switch {
					case e.Err == nil:
						sent++
						if e.Duration < 10*time.Millisecond || e.Attempts < 1 || e.Attempts > wantAttempts {
							t.Errorf("result of %s: %d attempts in %v", e.MessageID, e.Attempts, e.Duration)
						}
					case e.MessageID != "m0010" || !errors.Is(e.Err, sender.ErrFull) || e.Attempts != 0:
						t.Errorf("result %+v", e)
					}
				}
				if sent != 10 {
					t.Errorf("%d messages sent, want 10", sent)
				}
				if st := s.Stats(); st.Sent != 10 || st.Rejected != 1 || st.Failed != 0 {
					t.Errorf("stats %+v", st)
				}
				if !batching {
					if len(h.batches) != 0 {
						t.Errorf("%d batch events without batching", len(h.batches))
					}
					return
				}
				if len(h.batches) != 2 || h.batches[0].Err == nil || h.batches[1].Err != nil {
					t.Fatalf("batch events %+v, want a failed one then a sent one", h.batches)
				}
				if e := h.batches[1]; e.Messages != 10 || e.Bytes <= 0 || e.Duration != 10*time.Millisecond {
					t.Errorf("batch event %+v", e)
				}
			})
		})
	}
}

// TestCloseReleasesBlockedSenders: a Send waiting for room when Close starts is refused
// with ErrClosed once Close has drained the window; it is never sent.
func TestCloseReleasesBlockedSenders(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newBroker(t, sbtest.Latency{RoundTrip: 10 * time.Millisecond}, nil)
		s, err := sender.New(b.s, &sender.Options{MaxInFlightMessages: 1, DisableBatching: true})
		if err != nil {
			t.Fatal(err)
		}
		first := sendAsync(t, t.Context(), s, msg(0))[0]
		blocked := make(chan error)
		go func() { blocked <- s.Send(t.Context(), msg(1)) }()
		synctest.Wait() // the second Send waits for room
		if err := s.Close(t.Context()); err != nil {
			t.Fatal(err)
		}
		if err := <-blocked; !errors.Is(err, sender.ErrClosed) {
			t.Errorf("blocked Send = %v, want ErrClosed", err)
		}
		if first.Err() != nil || b.q.Counts().Active != 1 {
			t.Errorf("first: %v; queue holds %d, want 1", first.Err(), b.q.Counts().Active)
		}
	})
}

// TestFlushAndCloseSendBatchOpenedAfterByteSeal: the second message of two that do not fit
// together in MaxBatchBytes opens a new batch right after the first one is sealed for
// size. Flush and Close must send that batch at once, not after the 3 s linger.
func TestFlushAndCloseSendBatchOpenedAfterByteSeal(t *testing.T) {
	send := func(t *testing.T) (*sender.Sender, []*sender.Result) {
		b := newBroker(t, sbtest.Latency{RoundTrip: 10 * time.Millisecond}, nil)
		s, err := sender.New(b.s, &sender.Options{Linger: 3 * time.Second, MaxBatchBytes: 1000})
		if err != nil {
			t.Fatal(err)
		}
		big := func(i int) *azservicebus.Message {
			m := msg(i)
			m.Body = make([]byte, 600)
			return m
		}
		return s, sendAsync(t, t.Context(), s, big(0), big(1))
	}
	checkSent := func(t *testing.T, rs []*sender.Result) {
		t.Helper()
		for i, r := range rs {
			if err := r.Err(); err != nil {
				t.Errorf("message %d: %v", i, err)
			}
		}
	}
	t.Run("Flush", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			s, rs := send(t)
			ctx, cancel := context.WithTimeout(t.Context(), time.Second)
			defer cancel()
			if err := s.Flush(ctx); err != nil {
				t.Fatalf("Flush: %v (in flight: %d)", err, s.Stats().InFlightMessages)
			}
			checkSent(t, rs)
			if err := s.Close(t.Context()); err != nil {
				t.Fatal(err)
			}
		})
	})
	t.Run("Close", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			s, rs := send(t)
			ctx, cancel := context.WithTimeout(t.Context(), time.Second)
			defer cancel()
			start := time.Now()
			if err := s.Close(ctx); err != nil {
				t.Fatalf("Close: %v", err)
			}
			if d := time.Since(start); d > 100*time.Millisecond {
				t.Errorf("Close took %v, want one round trip", d)
			}
			checkSent(t, rs)
		})
	})
}
