package pgoutbox_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sbkit/sbkit"
	"github.com/sbkit/sbkit/outbox/pgoutbox"
)

// TestDeadLetterIDTaken: when the outbox's ids restarted (TRUNCATE ... RESTART IDENTITY,
// or the table re-created while the dead-letter table keeps its rows), a row whose id
// the dead-letter table already holds is not deleted: it stays in the outbox with the
// error (ErrDeadLetterIDTaken) and waits for a retry, reported as such, and the
// dead-letter row that holds the id is kept.
func TestDeadLetterIDTaken(t *testing.T) {
	e := newEnv(t)
	got := make(chan pgoutbox.RelayResult, 16)
	hook := pgoutbox.RelayResultHookFunc(func(_ context.Context, r pgoutbox.RelayResult) { got <- r })
	r, _ := e.relay(&pgoutbox.RelayOptions{Sender: &sbtestSenderNoRetry, Hooks: []pgoutbox.Hook{hook},
		Retry: sbkit.RetryOptions{RetryDelay: time.Hour, MaxRetryDelay: time.Hour}})
	e.add("missing", msg("a", "x")) // no such queue: dead-lettered at once
	if res := <-got; res.MessageID != "a" || res.Outcome != pgoutbox.OutcomeDeadLettered {
		t.Fatalf("first result %+v, want a dead-lettered", res)
	}
	if _, err := e.pool.Exec(context.Background(), `TRUNCATE `+e.ob.Table()+` RESTART IDENTITY`); err != nil {
		t.Fatal(err)
	}
	e.add("missing", msg("b", "y")) // id 1 again
	res := <-got
	if res.MessageID != "b" || res.Outcome != pgoutbox.OutcomeRetry || !errors.Is(res.Err, pgoutbox.ErrDeadLetterIDTaken) {
		t.Fatalf("result %+v, want b to wait for a retry with ErrDeadLetterIDTaken", res)
	}
	var id, lastErr, mid string
	if err := e.pool.QueryRow(context.Background(), `SELECT id::text, message_id, last_error FROM `+e.ob.Table()).Scan(&id, &mid, &lastErr); err != nil {
		t.Fatalf("b is not in the outbox any more: %v", err)
	}
	if mid != "b" || !strings.Contains(lastErr, "dead-letter table already holds") {
		t.Errorf("outbox row %s %s: last_error %q", id, mid, lastErr)
	}
	if dead := e.dead(); len(dead) != 1 || dead["a"].messageID != "a" {
		t.Errorf("dead-letter table %v, want a alone", dead)
	}
	if st := r.Stats(); st.DeadLettered != 1 {
		t.Errorf("stats %+v, want 1 dead-lettered", st)
	}
}
