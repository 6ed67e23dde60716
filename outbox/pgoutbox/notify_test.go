package pgoutbox_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/sbkit/sbkit/outbox/pgoutbox"
)

// TestDisableNotify: an Outbox with DisableNotify adds without notifying; Notify, after
// the commit, wakes the relay (one notification in all: Add sent none); concurrent
// Notify calls all return, and no goroutine of theirs remains.
func TestDisableNotify(t *testing.T) {
	e := newEnv(t)
	leakCheck(t)
	q := e.queue("q", nil)
	quiet, err := pgoutbox.New(e.pool, &pgoutbox.Options{Schema: e.schema, DisableNotify: true})
	if err != nil {
		t.Fatal(err)
	}
	r, stop := e.relay(&pgoutbox.RelayOptions{PollInterval: time.Hour})
	e.listening()
	ctx := context.Background()
	if err := pgx.BeginFunc(ctx, e.pool, func(tx pgx.Tx) error { return quiet.Add(ctx, tx, "q", msg("quiet", "x")) }); err != nil {
		t.Fatal(err)
	}
	if err := quiet.Notify(ctx); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the message", func() bool { return q.Counts().Active == 1 })
	if st := r.Stats(); st.Wakeups != 1 {
		t.Fatalf("stats %+v, want 1 wakeup (Notify's)", st)
	}
	var wg sync.WaitGroup
	for range 20 {
		wg.Go(func() {
			if err := quiet.Notify(ctx); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	stop()
}
