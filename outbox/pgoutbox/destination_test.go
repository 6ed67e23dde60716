package pgoutbox_test

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sbkit/sbkit"
	"github.com/sbkit/sbkit/outbox/pgoutbox"
)

// warnings records the messages of the Warn records a logger received.
type warnings struct {
	mu   sync.Mutex
	msgs []string
}

func (w *warnings) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelWarn }
func (w *warnings) Handle(_ context.Context, r slog.Record) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.msgs = append(w.msgs, r.Message)
	return nil
}
func (w *warnings) WithAttrs([]slog.Attr) slog.Handler { return w }
func (w *warnings) WithGroup(string) slog.Handler      { return w }

func (w *warnings) all() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return strings.Join(w.msgs, "\n")
}

// TestClosedDestinationSender: a destination sender closed by the application (CodeClosed
// from the SDK) is not the relay's own shutdown: the row's attempt counts and it waits
// for its retry (no claim after claim of the same row), the relay says so at Warn, and
// asks Destinations again for that destination's next rows.
func TestClosedDestinationSender(t *testing.T) {
	e := newEnv(t)
	e.queue("q", nil)
	closed, err := e.ns.NewSender("q", nil)
	if err != nil {
		t.Fatal(err)
	}
	_ = closed.Close(context.Background())
	var mu sync.Mutex
	asked := 0
	dests := func(name string) (sbkit.MessageSender, error) {
		mu.Lock()
		defer mu.Unlock()
		asked++
		if asked == 1 {
			return closed, nil
		}
		return e.ns.NewSender(name, nil)
	}
	first := make(chan pgoutbox.RelayResult, 1)
	hook := pgoutbox.RelayResultHookFunc(func(_ context.Context, r pgoutbox.RelayResult) {
		select {
		case first <- r:
		default:
		}
	})
	var w warnings
	r, err := pgoutbox.NewRelay(e.ob, dests, &pgoutbox.RelayOptions{PollInterval: 20 * time.Millisecond,
		Retry:  sbkit.RetryOptions{RetryDelay: time.Hour, MaxRetryDelay: 2 * time.Hour},
		Sender: &sbtestSenderNoRetry, Hooks: []pgoutbox.Hook{hook}, Logger: slog.New(&w)})
	if err != nil {
		t.Fatal(err)
	}
	runRelay(t, r)
	e.add("q", msg("c", "x"))
	res := <-first
	if res.Outcome != pgoutbox.OutcomeRetry || res.Attempts != 1 || res.Retry < 30*time.Minute {
		t.Fatalf("first result %+v, want a retry in about an hour after 1 attempt", res)
	}
	if !strings.Contains(w.all(), "destination") {
		t.Errorf("no Warn about the destination's sender; Warn records: %q", w.all())
	}
	// The next row of the destination goes through a new sender.
	e.add("q", msg("d", "y"))
	eventually(t, "the next row sent", func() bool { return r.Stats().Sent == 1 })
	if st := r.Stats(); st.Claims != 2 || st.Released != 0 {
		t.Fatalf("stats %+v, want 2 claims and nothing released", st)
	}
}

// TestDestinationRecreated: a destination deleted and re-created is sent to again: the
// sender whose link the broker detached as not found is replaced by a new one from
// Destinations (the SDK does not re-attach such a link, and neither does sbtest's
// sender), and the row that failed on the old link is sent through the new one rather
// than dead-lettered; nothing is dead-lettered.
func TestDestinationRecreated(t *testing.T) {
	e := newEnv(t)
	e.queue("q", nil)
	var res results
	r, _ := e.relay(&pgoutbox.RelayOptions{Retry: fastRetry, Sender: &sbtestSenderNoRetry, Hooks: []pgoutbox.Hook{&res}})
	e.add("q", msg("before", "x"))
	e.drained(r)
	if err := e.ns.DeleteQueue("q"); err != nil {
		t.Fatal(err)
	}
	q := e.queue("q", nil)
	e.add("q", msg("after-1", "x"), msg("after-2", "y"))
	e.drained(r)
	_, dead := e.count()
	if active := q.Counts().Active; active != 2 || dead != 0 {
		t.Fatalf("the new queue holds %d messages, %d dead-lettered (after-1: %v); want 2 and none",
			active, dead, res.of("after-1"))
	}
}
