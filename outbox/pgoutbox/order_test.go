package pgoutbox_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/jackc/pgx/v5"
	"github.com/sbkit/sbkit"
	"github.com/sbkit/sbkit/outbox/pgoutbox"
	"github.com/sbkit/sbkit/sbtest"
	"github.com/sbkit/sbkit/sender"
)

// addOrdered commits n transactions of m messages each to "q", alternating messages of
// session "A" and messages without a session (see sessionOf), tagged for checkOrder.
func (e *env) addOrdered(prefix string, n, m int) {
	e.t.Helper()
	for tx := range n {
		var msgs []*azservicebus.Message
		for i := range m {
			msgs = append(msgs, &azservicebus.Message{MessageID: ptr(idOf(prefix, tx, i)), SessionID: sessionOf(tx, i),
				ApplicationProperties: map[string]any{"tx": tx, "i": i}})
		}
		e.add("q", msgs...)
	}
}

// TestOrder: the messages of one transaction, and those of one session across
// transactions, are stored by the broker in the order they were added, although
// transient failures make the sender retry (a relay that let a later message go while
// an earlier one waited for its retry would reorder them).
func TestOrder(t *testing.T) {
	e := newEnv(t)
	e.ns.SetLatency(sbtest.Latency{RoundTrip: time.Millisecond})
	q := e.queue("q", nil)
	e.addOrdered("o", 20, 10)
	// Every third request fails: its rows are retried by the relay, which must hold
	// back the rest of their order meanwhile.
	flaky := func(name string) (sbkit.MessageSender, error) {
		s, err := e.ns.NewSender(name, nil)
		return &flakySender{Sender: s, every: 3}, err
	}
	r, err := pgoutbox.NewRelay(e.ob, flaky, &pgoutbox.RelayOptions{PollInterval: 20 * time.Millisecond,
		Retry: fastRetry, ClaimBatch: 50, Sender: &sender.Options{Retry: noRetry, Linger: time.Millisecond, MaxBatchMessages: 3}})
	if err != nil {
		t.Fatal(err)
	}
	runRelay(t, r)
	e.drained(r)
	if st := r.Stats(); st.Sent != 200 || st.Retried == 0 || q.ActiveCount() != 200 {
		t.Fatalf("relay %+v, broker holds %d", st, q.ActiveCount())
	}
	checkOrder(t, q.Active())
}

// flakySender fails every every-th request with a transient error, without storing it.
type flakySender struct {
	*sbtest.Sender
	every int64
	n     atomic.Int64
}

func (f *flakySender) fail() bool { return f.n.Add(1)%f.every == 0 }

func (f *flakySender) SendMessage(ctx context.Context, m *azservicebus.Message, o *azservicebus.SendMessageOptions) error {
	if f.fail() {
		return sbtest.TransientError
	}
	return f.Sender.SendMessage(ctx, m, o)
}

func (f *flakySender) SendBatch(ctx context.Context, b sbkit.Batch, o *azservicebus.SendMessageBatchOptions) error {
	if f.fail() {
		return sbtest.TransientError
	}
	return f.Sender.SendBatch(ctx, b, o)
}

// runRelay runs r until the test ends.
func runRelay(t *testing.T, r *pgoutbox.Relay) {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- r.Run(context.Background()) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := r.Close(ctx); err != nil {
			t.Errorf("Close: %v", err)
		}
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
}

// TestRelaysRacing: three relays on one outbox, small claims, rows of many transactions
// and one session: every message is accepted exactly once (no relay sends a row another
// one holds), nothing is dropped as a duplicate, and order holds.
func TestRelaysRacing(t *testing.T) {
	e := newEnv(t)
	e.ns.SetLatency(sbtest.Latency{RoundTrip: 2 * time.Millisecond})
	q := e.queue("q", nil)
	var acc acceptances
	var relays []*pgoutbox.Relay
	var res results
	for range 3 {
		r, _ := e.relay(&pgoutbox.RelayOptions{ClaimBatch: 7, MaxInFlight: 20, PollInterval: 10 * time.Millisecond,
			Sender: &sender.Options{Hooks: []sender.Hook{&acc}}, Hooks: []pgoutbox.Hook{&res}})
		relays = append(relays, r)
	}
	const txs, per = 60, 5
	ctx := context.Background()
	for tx := range txs { // committed while the relays run
		err := pgx.BeginFunc(ctx, e.pool, func(ptx pgx.Tx) error {
			var msgs []*azservicebus.Message
			for i := range per {
				msgs = append(msgs, &azservicebus.Message{MessageID: ptr(idOf("r", tx, i)), SessionID: sessionOf(tx, i),
					ApplicationProperties: map[string]any{"tx": tx, "i": i}})
			}
			return e.ob.Add(ctx, ptx, "q", msgs...)
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	start := time.Now()
	e.drained(relays...)
	if time.Since(start) > 2*time.Second {
		for _, r := range res.all {
			if r.Outcome != pgoutbox.OutcomeSent {
				t.Logf("%+v", r)
			}
		}
	}
	if twice := acc.twice(); len(twice) > 0 {
		t.Fatalf("accepted more than once: %v", twice)
	}
	var sent int64
	for i, r := range relays {
		st := r.Stats()
		sent += st.Sent
		t.Logf("relay %d: %+v", i, st)
	}
	if sent != txs*per || q.ActiveCount() != txs*per || q.Stats().DuplicatesDropped != 0 {
		t.Fatalf("relays sent %d, broker holds %d and dropped %d duplicates; want %d, %d, 0",
			sent, q.ActiveCount(), q.Stats().DuplicatesDropped, txs*per, txs*per)
	}
	checkOrder(t, q.Active())
}
