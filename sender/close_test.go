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
				if b.q.ActiveCount() != 50 {
					t.Errorf("queue holds %d, want 50", b.q.ActiveCount())
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
				opts.OnResult = out.record
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

// TestCloseRacingSends: senders keep sending while Close runs. Every call either is
// refused with ErrClosed or gets exactly one outcome; none is lost.
func TestCloseRacingSends(t *testing.T) {
	for _, batching := range []bool{false, true} {
		t.Run(map[bool]string{false: "single", true: "batched"}[batching], func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				b := newBroker(t, sbtest.Latency{RoundTrip: 3 * time.Millisecond}, nil)
				out := newOutcomes()
				s, err := sender.New(b.s, &sender.Options{DisableBatching: !batching, MaxInFlightMessages: 8, OnResult: out.record})
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
							if errors.Is(err, sender.ErrClosed) {
								refused.Add(1)
								return
							}
							if err != nil {
								t.Errorf("Send: %v", err)
							}
							accepted.Add(1)
							mu.Lock()
							ids = append(ids, *m.MessageID)
							mu.Unlock()
						}
					})
				}
				time.Sleep(20 * time.Millisecond)
				if err := s.Close(t.Context()); err != nil {
					t.Fatal(err)
				}
				wg.Wait()
				out.checkOnce(t, ids)
				if refused.Load() != 4 || accepted.Load() == 0 {
					t.Errorf("accepted %d, refused %d", accepted.Load(), refused.Load())
				}
				if int64(b.q.ActiveCount()) != accepted.Load() {
					t.Errorf("queue holds %d, accepted %d", b.q.ActiveCount(), accepted.Load())
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

type countingHooks struct {
	results, retries, batches atomic.Int64
}

func (h *countingHooks) OnSendResult(*sender.Result, error) { h.results.Add(1) }
func (h *countingHooks) OnSendRetry(int, int, error, time.Duration) {
	h.retries.Add(1)
}
func (h *countingHooks) OnBatch(int, uint64, error, time.Duration) { h.batches.Add(1) }

type panickingHook struct{}

func (panickingHook) OnSendResult(*sender.Result, error) { panic("hook") }

func TestHooksAndPanickingCallbacks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newBroker(t, sbtest.Latency{RoundTrip: time.Millisecond}, nil)
		hooks := &countingHooks{}
		var calls atomic.Int64
		s := newSender(t, b.s, &sender.Options{
			Hooks: []sender.Hook{panickingHook{}, hooks, "not a hook"},
			OnResult: func(r *sender.Result) {
				if calls.Add(1)%2 == 0 {
					panic("callback")
				}
			},
		})
		b.q.InjectFault(sbtest.Fault{Count: 1})
		rs := sendAsync(t, t.Context(), s, msgs(0, 10)...)
		for i, r := range rs {
			if err := r.Wait(t.Context()); err != nil {
				t.Errorf("message %d: %v", i, err)
			}
		}
		if hooks.results.Load() != 10 || calls.Load() != 10 || hooks.retries.Load() != 1 || hooks.batches.Load() != 2 {
			t.Errorf("results %d, callbacks %d, retries %d, batches %d; want 10, 10, 1, 2",
				hooks.results.Load(), calls.Load(), hooks.retries.Load(), hooks.batches.Load())
		}
	})
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
		if first.Err() != nil || b.q.ActiveCount() != 1 {
			t.Errorf("first: %v; queue holds %d, want 1", first.Err(), b.q.ActiveCount())
		}
	})
}
