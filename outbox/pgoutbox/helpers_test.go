package pgoutbox_test

import (
	"context"
	"fmt"
	"runtime"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/sbkit/sbkit"
	"github.com/sbkit/sbkit/dedupe/pgdedupe/pgtest"
	"github.com/sbkit/sbkit/outbox/pgoutbox"
	"github.com/sbkit/sbkit/sbtest"
	"github.com/sbkit/sbkit/sender"
)

// env is a database with an outbox (in a schema of its own) and an sbtest namespace
// whose queues detect duplicates.
type env struct {
	t      testing.TB
	schema string
	pool   *pgxpool.Pool
	ob     *pgoutbox.Outbox
	ns     *sbtest.Namespace
}

func newEnv(t testing.TB) *env {
	t.Helper()
	pool, schema := pgtest.NewPool(t)
	// The schema named, so that the notification channel is the test's own too.
	ob, err := pgoutbox.New(pool, &pgoutbox.Options{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	if err := ob.CreateSchema(context.Background()); err != nil {
		t.Fatal(err)
	}
	return &env{t: t, schema: schema, pool: pool, ob: ob, ns: sbtest.NewNamespace(nil)}
}

// queue creates a queue with duplicate detection.
func (e *env) queue(name string, opts *sbtest.EntityOptions) *sbtest.Entity {
	e.t.Helper()
	var o sbtest.EntityOptions
	if opts != nil {
		o = *opts
	}
	if o.DuplicateDetectionWindow == 0 {
		o.DuplicateDetectionWindow = time.Hour
	}
	q, err := e.ns.NewQueue(name, &o)
	if err != nil {
		e.t.Fatal(err)
	}
	return q
}

// destinations sends to e's namespace.
func (e *env) destinations(name string) (sbkit.MessageSender, error) {
	return e.ns.NewSender(name, nil)
}

// add stores msgs for destination in one committed transaction.
func (e *env) add(destination string, msgs ...*azservicebus.Message) {
	e.t.Helper()
	ctx := context.Background()
	err := pgx.BeginFunc(ctx, e.pool, func(tx pgx.Tx) error { return e.ob.Add(ctx, tx, destination, msgs...) })
	if err != nil {
		e.t.Fatal(err)
	}
}

// count returns the rows of the outbox table and of the dead-letter table.
func (e *env) count() (outbox, dead int) {
	e.t.Helper()
	ctx := context.Background()
	if err := e.pool.QueryRow(ctx, `SELECT count(*) FROM `+e.ob.Table()).Scan(&outbox); err != nil {
		e.t.Fatal(err)
	}
	if err := e.pool.QueryRow(ctx, `SELECT count(*) FROM `+e.ob.DeadLetterTable()).Scan(&dead); err != nil {
		e.t.Fatal(err)
	}
	return outbox, dead
}

// relay starts a relay over e's outbox, running until the test ends (or stop is
// called, which closes it and fails the test when Close or Run fails).
func (e *env) relay(opts *pgoutbox.RelayOptions) (r *pgoutbox.Relay, stop func()) {
	e.t.Helper()
	var o pgoutbox.RelayOptions
	if opts != nil {
		o = *opts
	}
	if o.PollInterval == 0 {
		o.PollInterval = 50 * time.Millisecond
	}
	r, err := pgoutbox.NewRelay(e.ob, e.destinations, &o)
	if err != nil {
		e.t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- r.Run(context.Background()) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := r.Close(ctx); err != nil {
				e.t.Errorf("relay Close: %v", err)
			}
			if err := <-done; err != nil {
				e.t.Errorf("relay Run: %v", err)
			}
		})
	}
	e.t.Cleanup(stop)
	return r, stop
}

// eventually waits until cond holds, failing the test after 20 s with what.
func eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	sbtest.Eventually(t, 20*time.Second, what, cond)
}

// drained waits until the outbox table is empty and the relays rs have nothing in
// flight (their stats count every outcome).
func (e *env) drained(rs ...*pgoutbox.Relay) {
	e.t.Helper()
	eventually(e.t, "the outbox to drain", func() bool {
		for _, r := range rs {
			if r.Stats().InFlight != 0 {
				return false
			}
		}
		n, _ := e.count()
		return n == 0
	})
}

// msg returns a message with body and MessageID id.
func msg(id, body string) *azservicebus.Message {
	return &azservicebus.Message{MessageID: &id, Body: []byte(body)}
}

// acceptances counts, across relays, how often the broker accepted each MessageID: a
// sender hook to put in RelayOptions.Sender.Hooks.
type acceptances struct {
	mu sync.Mutex
	n  map[string]int
}

func (a *acceptances) OnSendResult(_ context.Context, e sender.SendResult) {
	if e.Err != nil {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.n == nil {
		a.n = make(map[string]int)
	}
	a.n[e.MessageID]++
}

// twice returns the ids accepted more than once.
func (a *acceptances) twice() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	var ids []string
	for id, n := range a.n {
		if n > 1 {
			ids = append(ids, id)
		}
	}
	return ids
}

// leakCheck fails t when, after t's cleanups registered later than this call,
// goroutines of sbkit's packages (a relay's, a sender's) remain for 5 seconds. The
// pool's own goroutines (health check, connection readers) do not count: the pool lives
// until the end of the test.
func leakCheck(t *testing.T) {
	t.Helper()
	t.Cleanup(func() {
		deadline := time.Now().Add(5 * time.Second)
		for {
			leaked := sbkitGoroutines()
			if len(leaked) == 0 {
				return
			}
			if time.Now().After(deadline) {
				t.Errorf("%d goroutines left after the test:\n%s", len(leaked), strings.Join(leaked, "\n\n"))
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
	})
}

// sbkitGoroutines returns the stacks of the goroutines running sbkit code, but for the
// test's own.
func sbkitGoroutines() []string {
	buf := make([]byte, 1<<20)
	var out []string
	for _, g := range strings.Split(string(buf[:runtime.Stack(buf, true)]), "\n\n") {
		if strings.Contains(g, "github.com/sbkit/sbkit/") && !strings.Contains(g, "pgoutbox_test.") {
			out = append(out, g)
		}
	}
	return out
}

// sbtestSenderNoRetry are sender options without the senders' own retries.
var sbtestSenderNoRetry = sender.Options{Retry: noRetry}

// idOf names message i of transaction tx.
func idOf(prefix string, tx, i int) string { return fmt.Sprintf("%s%d-%d", prefix, tx, i) }

// sessionOf gives the odd messages of every transaction the session "A" (so the
// session spans transactions) and the even ones none (so they are ordered by their
// transaction only).
func sessionOf(_, i int) *string {
	if i%2 == 1 {
		s := "A"
		return &s
	}
	return nil
}

// checkOrder fails t unless msgs (carrying properties "tx" and "i") were stored in
// order within every transaction (messages without a session) and within every
// session (across transactions): their sequence numbers grow with (tx, i).
func checkOrder(t testing.TB, msgs []*azservicebus.ReceivedMessage) {
	t.Helper()
	sort.Slice(msgs, func(a, b int) bool { return *msgs[a].SequenceNumber < *msgs[b].SequenceNumber })
	last := make(map[string]int)
	for _, m := range msgs {
		tx, i := m.ApplicationProperties["tx"].(int), m.ApplicationProperties["i"].(int)
		group := fmt.Sprint("tx", tx)
		if m.SessionID != nil {
			group = "session " + *m.SessionID
		}
		rank := tx*1_000_000 + i
		if prev, ok := last[group]; ok && prev > rank {
			t.Errorf("%s: message %s (tx %d, #%d) stored after a later one (rank %d)", group, m.MessageID, tx, i, prev)
		}
		last[group] = rank
	}
}
