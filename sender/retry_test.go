package sender_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/sbkit/sbkit"
	"github.com/sbkit/sbkit/sbtest"
	"github.com/sbkit/sbkit/sender"
)

func TestRetries(t *testing.T) {
	tests := []struct {
		name          string
		fault         sbtest.Fault
		retry         sbkit.RetryOptions
		ctxTimeout    time.Duration
		wantErr       error // nil: sent
		wantAttempts  int
		attemptsSlack int // jitter may add this many attempts
	}{
		{name: "transient then success", fault: sbtest.Fault{Count: 2}, wantAttempts: 3},
		{name: "permanent fails at once", fault: sbtest.Fault{Count: 1, Err: sbtest.PermanentError}, wantErr: sbtest.PermanentError, wantAttempts: 1},
		{name: "too large is permanent", fault: sbtest.Fault{Count: 1, Err: azservicebus.ErrMessageTooLarge}, wantErr: azservicebus.ErrMessageTooLarge, wantAttempts: 1},
		{name: "retry limit", fault: sbtest.Fault{}, retry: sbkit.RetryOptions{MaxRetries: 3}, wantErr: sbtest.TransientError, wantAttempts: 4},
		{name: "retries disabled", fault: sbtest.Fault{}, retry: sbkit.RetryOptions{MaxRetries: -1}, wantErr: sbtest.TransientError, wantAttempts: 1},
		{name: "no delay", fault: sbtest.Fault{}, retry: sbkit.RetryOptions{MaxRetries: 3, RetryDelay: -1}, wantErr: sbtest.TransientError, wantAttempts: 4},
		{
			// The first delay is 50ms to 150ms (100ms ± 50% jitter): the context ends in it.
			name: "context ends during backoff", fault: sbtest.Fault{}, ctxTimeout: 40 * time.Millisecond,
			retry:   sbkit.RetryOptions{MaxRetries: 1000, RetryDelay: 100 * time.Millisecond},
			wantErr: context.DeadlineExceeded, wantAttempts: 1,
		},
	}
	for _, tt := range tests {
		for _, batching := range []bool{false, true} {
			name := fmt.Sprintf("%s/batching=%v", tt.name, batching)
			t.Run(name, func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					b := newBroker(t, sbtest.Latency{RoundTrip: time.Millisecond}, nil)
					out := newOutcomes()
					s := newSender(t, b.s, &sender.Options{DisableBatching: !batching, Retry: tt.retry, Hooks: []sender.Hook{out}})
					b.q.InjectFault(tt.fault)
					ctx := t.Context()
					if tt.ctxTimeout > 0 {
						var cancel context.CancelFunc
						ctx, cancel = context.WithTimeout(ctx, tt.ctxTimeout)
						defer cancel()
					}
					// In batching mode three messages sent at once share one batch, so the
					// fault hits their only request and all share its fate; otherwise one
					// message is sent alone.
					n := 1
					if batching {
						n = 3
					}
					start := time.Now()
					var results []*sender.Result
					for i := range n {
						r, err := s.SendAsync(ctx, msg(i))
						if err != nil {
							t.Fatal(err)
						}
						results = append(results, r)
					}
					for i, r := range results {
						err := r.Wait(context.Background())
						if tt.wantErr == nil && err != nil || tt.wantErr != nil && !errors.Is(err, tt.wantErr) {
							t.Fatalf("message %d: outcome %v, want %v", i, err, tt.wantErr)
						}
						if got := r.Attempts(); got < tt.wantAttempts || got > tt.wantAttempts+tt.attemptsSlack {
							t.Errorf("message %d: attempts %d, want %d (+%d)", i, got, tt.wantAttempts, tt.attemptsSlack)
						}
						var se *sender.SendError
						if err != nil && (!errors.As(err, &se) || se.MessageID != r.MessageID() || se.Attempts != r.Attempts()) {
							t.Errorf("error %#v does not name the message and its attempts", err)
						}
						if tt.ctxTimeout > 0 && !errors.Is(err, sbtest.TransientError) {
							t.Errorf("error %v does not wrap the last attempt's error", err)
						}
						if tt.ctxTimeout > 0 && time.Since(start) != tt.ctxTimeout {
							t.Errorf("outcome after %v, want when the context ended (%v)", time.Since(start), tt.ctxTimeout)
						}
					}
					ids := []string{"m0000", "m0001", "m0002"}[:n]
					b.q.ClearFaults()
					if err := s.Flush(context.Background()); err != nil {
						t.Fatal(err)
					}
					out.checkOnce(t, ids)
				})
			})
		}
	}
}

// TestRetriedStatistic checks the Retried statistic.
func TestRetriedStatistic(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newBroker(t, sbtest.Latency{}, nil)
		s := newSender(t, b.s, &sender.Options{DisableBatching: true})
		b.q.InjectFault(sbtest.Fault{Count: 2})
		if err := s.Send(t.Context(), msg(0)); err != nil {
			t.Fatal(err)
		}
		if st := s.Stats(); st.SendRetries != 2 || st.Sent != 1 || st.Failed != 0 {
			t.Errorf("stats %+v, want Retried 2 Sent 1", st)
		}
	})
}

// TestExactlyOnceUnderMixedFaults sends many messages from many goroutines while
// transient and permanent faults come and go, and checks that every message gets exactly
// one outcome, that Send's return value and the result hook agree, and that what the sender
// reports as sent is exactly what the broker stored.
func TestExactlyOnceUnderMixedFaults(t *testing.T) {
	modes := []struct {
		name string
		opts sender.Options
	}{
		{"single", sender.Options{DisableBatching: true}},
		{"batched", sender.Options{}},
		{"batched-ordered", sender.Options{Ordered: true, MaxBatchMessages: 7}},
		{"single-ordered", sender.Options{Ordered: true, DisableBatching: true}},
	}
	for _, mode := range modes {
		t.Run(mode.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				b := newBroker(t, sbtest.Latency{RoundTrip: 3 * time.Millisecond}, nil)
				out := newOutcomes()
				opts := mode.opts
				opts.MaxInFlightMessages = 32
				opts.Hooks = []sender.Hook{out}
				opts.Retry = sbkit.RetryOptions{MaxRetries: 2, RetryDelay: 5 * time.Millisecond}
				s := newSender(t, b.s, &opts)

				stop := make(chan struct{})
				faults := sync.WaitGroup{}
				faults.Go(func() {
					for i := 0; ; i++ {
						f := sbtest.Fault{Count: 1 + i%4}
						if i%3 == 2 {
							f.Err = sbtest.PermanentError
						}
						b.q.InjectFault(f)
						select {
						case <-stop:
							b.q.ClearFaults()
							return
						case <-time.After(20 * time.Millisecond):
						}
					}
				})

				const producers, each = 8, 40
				var mu sync.Mutex
				returned := map[string]error{}
				var ids []string
				var wg sync.WaitGroup
				for p := range producers {
					wg.Go(func() {
						for i := range each {
							n := p*each + i
							m := msg(n)
							if n%3 == 0 {
								m.SessionID = ptr(fmt.Sprintf("s%d", p))
							}
							err := s.Send(t.Context(), m)
							mu.Lock()
							returned[*m.MessageID] = err
							ids = append(ids, *m.MessageID)
							mu.Unlock()
						}
					})
				}
				wg.Wait()
				close(stop)
				faults.Wait()
				if err := s.Flush(t.Context()); err != nil {
					t.Fatal(err)
				}
				out.checkOnce(t, ids)
				var sent, failed int64
				for id, err := range returned {
					if cb := out.errs[id]; (cb == nil) != (err == nil) {
						t.Errorf("%s: Send returned %v, the result hook saw %v", id, err, cb)
					}
					if err == nil {
						sent++
					} else {
						failed++
					}
				}
				st := s.Stats()
				if st.Sent != sent || st.Failed != failed || st.InFlightMessages != 0 || st.InFlightBytes != 0 {
					t.Errorf("stats %+v; counted sent %d failed %d", st, sent, failed)
				}
				if stored := int64(b.q.Counts().Active); stored != sent {
					t.Errorf("broker stored %d messages, sender reports %d sent", stored, sent)
				}
				if failed == 0 || st.SendRetries == 0 {
					t.Errorf("the faults did not bite: failed %d retried %d", failed, st.SendRetries)
				}
				t.Logf("sent %d, failed %d, retried %d, batches %d", sent, failed, st.SendRetries, st.BatchesSent)
			})
		})
	}
}

// TestAttemptTimeoutIsRetried: a request that hangs past AttemptTimeout counts as a
// transient failure and is retried.
func TestAttemptTimeoutIsRetried(t *testing.T) {
	for _, batching := range []bool{false, true} {
		t.Run(fmt.Sprintf("batching=%v", batching), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				b := newBroker(t, sbtest.Latency{}, nil)
				s := newSender(t, b.s, &sender.Options{DisableBatching: !batching, AttemptTimeout: 50 * time.Millisecond})
				b.q.InjectFault(sbtest.Fault{Count: 1, Hang: true})
				r := sendAsync(t, t.Context(), s, msg(0))[0]
				if err := r.Wait(t.Context()); err != nil {
					t.Fatal(err)
				}
				if r.Attempts() != 2 || b.q.Counts().Active != 1 {
					t.Errorf("attempts %d, stored %d; want 2 and 1", r.Attempts(), b.q.Counts().Active)
				}
			})
		})
	}
}

// TestRetriesEndAtClose: a message whose context never ends is retried only until Close
// gives up; then it fails with ErrClosed, wrapping the last attempt's error.
func TestRetriesEndAtClose(t *testing.T) {
	for _, batching := range []bool{false, true} {
		t.Run(map[bool]string{false: "single", true: "batched"}[batching], func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				b := newBroker(t, sbtest.Latency{RoundTrip: time.Millisecond}, nil)
				s, err := sender.New(b.s, &sender.Options{DisableBatching: !batching,
					Retry: sbkit.RetryOptions{MaxRetries: 1000, RetryDelay: time.Second, MaxRetryDelay: time.Second}})
				if err != nil {
					t.Fatal(err)
				}
				b.q.InjectFault(sbtest.Fault{})
				r := sendAsync(t, context.Background(), s, msg(0))[0]
				ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
				defer cancel()
				start := time.Now()
				if err := s.Close(ctx); !errors.Is(err, context.DeadlineExceeded) {
					t.Fatalf("Close = %v, want DeadlineExceeded", err)
				}
				if d := time.Since(start); d != 5*time.Second {
					t.Errorf("Close returned after %v, want 5s", d)
				}
				err = r.Err()
				if !errors.Is(err, sender.ErrClosed) || !errors.Is(err, sbtest.TransientError) || r.Attempts() < 4 {
					t.Errorf("outcome %v after %d attempts; want ErrClosed wrapping the transient error, after several attempts", err, r.Attempts())
				}
			})
		})
	}
}
