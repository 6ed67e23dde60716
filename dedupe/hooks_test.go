package dedupe_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/sbkit/sbkit"
	"github.com/sbkit/sbkit/dedupe"
)

// recorder implements every dedupe hook and records each event as a line.
type recorder struct {
	mu     sync.Mutex
	events []string
}

func (r *recorder) add(format string, args ...any) {
	r.mu.Lock()
	r.events = append(r.events, fmt.Sprintf(format, args...))
	r.mu.Unlock()
}

func (r *recorder) lines() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.events)
}

func (r *recorder) OnFresh(_ context.Context, e dedupe.Fresh) {
	r.add("fresh %s %s waited %v", e.Key, e.Message.MessageID, e.Waited)
}
func (r *recorder) OnDuplicate(_ context.Context, e dedupe.Duplicate) {
	r.add("duplicate %s %s waited %v", e.Key, e.Message.MessageID, e.Waited)
}
func (r *recorder) OnContended(_ context.Context, e dedupe.Contended) {
	r.add("contended %s %s policy %d", e.Key, e.Message.MessageID, e.Policy)
}
func (r *recorder) OnLeaseLost(_ context.Context, e dedupe.LeaseLost) {
	r.add("lease lost %s %s after %v, ErrLeaseLost %v", e.Key, e.Message.MessageID, e.Held, errors.Is(e.Cause, dedupe.ErrLeaseLost))
}
func (r *recorder) OnStoreError(_ context.Context, err *dedupe.StoreError) {
	r.add("store error %s %s attempt %d", err.Op, err.Key, err.Attempt)
}

// panicky implements every hook by panicking: the Filter must carry on.
type panicky struct{}

func (panicky) OnFresh(context.Context, dedupe.Fresh)         { panic("fresh") }
func (panicky) OnDuplicate(context.Context, dedupe.Duplicate) { panic("duplicate") }
func (panicky) OnContended(context.Context, dedupe.Contended) { panic("contended") }
func (panicky) OnLeaseLost(context.Context, dedupe.LeaseLost) { panic("lease lost") }
func (panicky) OnStoreError(context.Context, *dedupe.StoreError) {
	panic("store error")
}

// TestHooks: every outcome reaches the hooks, in order and with its data, and a hook
// that panics changes nothing but a log line.
func TestHooks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var logs bytes.Buffer
		rec := &recorder{}
		s := newFaulty(t)
		f := mustNew(t, s, &dedupe.Options{
			Entity:   "q",
			LeaseTTL: 30 * time.Second,
			Retry:    sbkit.RetryOptions{RetryDelay: time.Second, MaxRetryDelay: time.Second},
			Hooks: []dedupe.Hook{panicky{}, rec, dedupe.StoreErrorHookFunc(func(_ context.Context, err *dedupe.StoreError) {
				if err.Op == dedupe.OpAcquire && err.Attempt == 2 {
					s.set(nil, nil, nil) // the store answers from the third attempt on
				}
			})},
			Logger: slog.New(slog.NewTextHandler(&logs, nil)),
		})
		ctx := context.Background()
		var runs atomic.Int64
		h := wrap(t, f, counting(&runs, nil))
		_ = h(ctx, msg("a")) // fresh, then done
		_ = h(ctx, msg("a")) // duplicate

		// A contended key that frees up 2 s later: contended, then fresh after 2 s.
		if _, err := s.MemoryStore.Acquire(ctx, "q:b", "other", 2*time.Second); err != nil {
			t.Fatal(err)
		}
		_ = h(ctx, msg("b"))

		// The store fails twice, then answers: two store errors, then fresh after the
		// retries.
		s.set(errors.New("down"), nil, nil)
		_ = h(ctx, msg("c"))

		// A handler whose lease is lost: its store stops answering refreshes.
		slow := wrap(t, f, func(ctx context.Context, _ *azservicebus.ReceivedMessage) error {
			s.setHang(true)
			<-ctx.Done()
			s.setHang(false)
			return ctx.Err()
		})
		_ = slow(ctx, msg("d"))

		got := rec.lines()
		want := []string{
			"fresh q:a a waited 0s",
			"duplicate q:a a waited 0s",
			"contended q:b b policy 0",
			"fresh q:b b waited 2s",
			"store error acquire q:c attempt 1",
			"store error acquire q:c attempt 2",
			"fresh q:c c waited ", // the backoff's jitter decides the wait
			"fresh q:d d waited 0s",
			"store error renew q:d attempt 1",
		}
		if len(got) < len(want) {
			t.Fatalf("events:\n%s\nwant at least:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
		for i, w := range want {
			if !strings.HasPrefix(got[i], w) {
				t.Fatalf("event %d = %q, want %q; all:\n%s", i, got[i], w, strings.Join(got, "\n"))
			}
		}
		// Refreshes fail until the lease is lost (a refresh in flight then may still
		// report its failure).
		if i := slices.Index(got, "lease lost q:d d after 30s, ErrLeaseLost true"); i < len(want) {
			t.Fatalf("no lost lease after 30 s following the refresh errors; all:\n%s", strings.Join(got, "\n"))
		}
		if n := strings.Count(logs.String(), "recovered panic"); n != len(got) {
			t.Fatalf("%d panics logged, want one per event (%d):\n%s", n, len(got), logs.String())
		}
	})
}

func TestLogger(t *testing.T) {
	var buf bytes.Buffer
	s := newFaulty(t)
	f := mustNew(t, s, &dedupe.Options{
		Entity: "orders",
		Retry:  sbkit.RetryOptions{MaxRetries: -1}, // fail at once
		Logger: slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})),
	})
	var runs atomic.Int64
	h := wrap(t, f, counting(&runs, nil))
	m := &azservicebus.ReceivedMessage{MessageID: "m", Body: []byte("secret-payload")}
	_ = h(context.Background(), m)
	_ = h(context.Background(), m)
	s.set(errors.New("store down"), nil, nil)
	_ = h(context.Background(), m)
	logs := buf.String()
	for _, want := range []string{"duplicate skipped", "store error", "op=acquire", "key=orders:m", "store down"} {
		if !strings.Contains(logs, want) {
			t.Errorf("logs lack %q:\n%s", want, logs)
		}
	}
	if strings.Contains(logs, "secret-payload") {
		t.Errorf("logs contain the payload:\n%s", logs)
	}
}

// TestLeaseFrom: the handler sees its key and owner token, which hold the lease
// in the store.
func TestLeaseFrom(t *testing.T) {
	s := memStore()
	f := mustNew(t, s, &dedupe.Options{Entity: "q"})
	var got dedupe.Lease
	var ok bool
	h := wrap(t, f, func(ctx context.Context, _ *azservicebus.ReceivedMessage) error {
		got, ok = dedupe.LeaseFrom(ctx)
		// The owner token is the lease's: marking done with it succeeds.
		return s.MarkDone(ctx, got.Key, got.Owner, time.Hour)
	})
	if err := h(context.Background(), msg("m")); err != nil || !ok || got.Key != "q:m" || got.Owner == "" {
		t.Fatalf("result %v, lease %+v, %v", err, got, ok)
	}
	if st := f.Stats(); st.MarkDoneErrors != 0 || st.Succeeded != 1 {
		t.Fatalf("stats %+v", st)
	}
	if _, ok := dedupe.LeaseFrom(context.Background()); ok {
		t.Fatal("a lease outside a handler")
	}
}
