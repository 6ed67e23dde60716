package pgoutbox_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/jackc/pgx/v5"
	"github.com/sbkit/sbkit/outbox/pgoutbox"
	"github.com/sbkit/sbkit/sbtest"
	"github.com/sbkit/sbkit/sender"
)

// holdBlockedClaim is a pgx tracer that, once armed, holds the first claim statement
// that found a row (for this test, a blocked one) until release is closed: the claim
// loop then learns of the blocked row after the marks that release has waited for.
type holdBlockedClaim struct {
	armed   atomic.Bool
	held    atomic.Bool
	release chan struct{}
}

func (h *holdBlockedClaim) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	return ctx
}
func (h *holdBlockedClaim) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}
func (h *holdBlockedClaim) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	return ctx
}
func (h *holdBlockedClaim) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}

func (h *holdBlockedClaim) TraceBatchQuery(_ context.Context, _ *pgx.Conn, d pgx.TraceBatchQueryData) {
	if h.armed.Load() && strings.HasPrefix(d.SQL, "WITH c AS MATERIALIZED") && d.CommandTag.RowsAffected() > 0 &&
		h.held.CompareAndSwap(false, true) {
		<-h.release
	}
}

// TestOwnRowMarkedDuringClaim: a claim finds a session's row blocked behind the relay's
// own earlier row, and that row is marked before the claim loop learns of it; the
// relay claims the row again at once instead of leaving the session alone as another
// relay's (which, with nothing left to wake the claim loop, waited for PollInterval).
// The earlier row is the relay's own although the claim did not count on it: claims
// A (s1 and a row of a slow destination) and B (s2) are marked B first, so the relay's
// last row of the session (s2) is gone while s1 is still held.
func TestOwnRowMarkedDuringClaim(t *testing.T) {
	e := newEnv(t)
	q := e.queue("q", &sbtest.EntityOptions{RequiresSession: true})
	slow := e.queue("slow", nil)
	slow.InjectFault(sbtest.Fault{Op: sbtest.OpSend, Count: 1, Hang: true}) // until the AttemptTimeout, then retried
	tracer := &holdBlockedClaim{release: make(chan struct{})}
	e.traced(tracer)
	session := func(id string) *azservicebus.Message {
		return &azservicebus.Message{MessageID: ptr(id), SessionID: ptr("s"), Body: []byte(id)}
	}
	s2Sent, xSent := make(chan struct{}), make(chan struct{})
	hook := pgoutbox.RelayResultHookFunc(func(_ context.Context, e pgoutbox.RelayResult) {
		if e.Outcome != pgoutbox.OutcomeSent {
			return
		}
		switch e.MessageID {
		case "s2":
			close(s2Sent)
		case "x":
			close(xSent) // claim A is marked
		}
	})
	e.add("q", session("s1"))
	e.add("slow", msg("x", "x"))
	e.add("q", session("s2"))
	r, _ := e.relay(&pgoutbox.RelayOptions{ClaimBatch: 2, PollInterval: time.Hour, Hooks: []pgoutbox.Hook{hook},
		Sender: &sender.Options{AttemptTimeout: time.Second}})
	waitFor(t, s2Sent, "s2 sent")
	tracer.armed.Store(true)
	e.add("q", session("s3")) // the next claim finds s3 behind s1, which claim A holds
	waitFor(t, xSent, "x sent")
	close(tracer.release)
	e.drained(r)
	if !tracer.held.Load() {
		t.Error("no claim found s3 blocked: the test shows nothing")
	}
	if n := q.Counts().Active; n != 3 {
		t.Errorf("queue holds %d messages, want 3", n)
	}
}

// waitFor waits until ch is closed, failing the test after 20 s with what.
func waitFor(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(20 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
	}
}
