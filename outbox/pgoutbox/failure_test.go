package pgoutbox_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/sbkit/sbkit"
	"github.com/sbkit/sbkit/outbox/pgoutbox"
	"github.com/sbkit/sbkit/sbtest"
)

// noRetry turns the senders' own retries off: every failure reaches the relay.
var noRetry = sbkit.RetryOptions{MaxRetries: -1}

// fastRetry retries rows at once-ish: 5 ms, doubling to 20 ms.
var fastRetry = sbkit.RetryOptions{RetryDelay: 5 * time.Millisecond, MaxRetryDelay: 20 * time.Millisecond}

// results records a relay's results.
type results struct {
	mu  sync.Mutex
	all []pgoutbox.RelayResult
}

func (h *results) OnRelayResult(_ context.Context, e pgoutbox.RelayResult) {
	h.mu.Lock()
	h.all = append(h.all, e)
	h.mu.Unlock()
}

func (h *results) of(id string) []pgoutbox.Outcome {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []pgoutbox.Outcome
	for _, e := range h.all {
		if e.MessageID == id {
			out = append(out, e.Outcome)
		}
	}
	return out
}

// deadRow is a row of the dead-letter table.
type deadRow struct {
	messageID, destination, err string
	attempts                    int
}

func (e *env) dead() map[string]deadRow {
	e.t.Helper()
	rows, err := e.pool.Query(context.Background(), `SELECT message_id, destination, error, attempts FROM `+e.ob.DeadLetterTable())
	if err != nil {
		e.t.Fatal(err)
	}
	defer rows.Close()
	out := make(map[string]deadRow)
	for rows.Next() {
		var d deadRow
		if err := rows.Scan(&d.messageID, &d.destination, &d.err, &d.attempts); err != nil {
			e.t.Fatal(err)
		}
		out[d.messageID] = d
	}
	if err := rows.Err(); err != nil {
		e.t.Fatal(err)
	}
	return out
}

// TestPoisonMessages: a message the broker refuses for good (too large, destination
// missing) is dead-lettered at once with its error; one that fails with an error nobody
// can classify is dead-lettered after Retry.MaxRetries retries; the messages after them
// in the same transaction or session are not held back.
func TestPoisonMessages(t *testing.T) {
	e := newEnv(t)
	e.ns = sbtest.NewNamespace(&sbtest.NamespaceOptions{MaxMessageSize: 1024})
	q := e.queue("q", nil)
	flaky := e.queue("flaky", nil)
	flaky.InjectFault(sbtest.Fault{Op: sbtest.OpSend, Err: errors.New("the broker said something odd")})
	huge := msg("huge", strings.Repeat("x", 2000))
	e.add("q", msg("before", "1"), huge, msg("after", "2"))
	e.add("q", &azservicebus.Message{MessageID: ptr("s-huge"), SessionID: ptr("s"), Body: []byte(strings.Repeat("y", 2000))},
		&azservicebus.Message{MessageID: ptr("s-next"), SessionID: ptr("s")})
	e.add("missing", msg("lost-entity", "3"))
	e.add("flaky", msg("odd", "4"))
	var res results
	r, _ := e.relay(&pgoutbox.RelayOptions{Retry: sbkit.RetryOptions{MaxRetries: 2, RetryDelay: time.Millisecond},
		Sender: &sbtestSenderNoRetry, Hooks: []pgoutbox.Hook{&res}})
	e.drained(r)

	dead := e.dead()
	want := map[string]struct {
		attempts int
		err      string
	}{
		"huge": {1, "too large"}, "s-huge": {1, "too large"},
		"lost-entity": {1, "notfound"}, "odd": {3, "something odd"},
	}
	for id, d := range dead {
		d.err = strings.ToLower(d.err)
		dead[id] = d
	}
	if len(dead) != len(want) {
		t.Fatalf("dead-letter table %v, want %v", dead, want)
	}
	for id, w := range want {
		d := dead[id]
		if d.attempts != w.attempts || !strings.Contains(d.err, w.err) {
			t.Errorf("%s: dead-lettered after %d attempts with %q; want %d attempts, an error with %q", id, d.attempts, d.err, w.attempts, w.err)
		}
	}
	if got := res.of("odd"); len(got) != 3 || got[0] != pgoutbox.OutcomeRetry || got[2] != pgoutbox.OutcomeDeadLettered {
		t.Errorf("odd's outcomes %v, want retry, retry, dead-lettered", got)
	}
	var ids []string
	for _, m := range q.Active() { // in the order the broker stored them
		ids = append(ids, m.MessageID)
	}
	if len(ids) != 3 || !slices.Contains(ids, "s-next") || slices.Index(ids, "before") > slices.Index(ids, "after") {
		t.Errorf("broker holds %v, want before, after (in this order) and s-next", ids)
	}
	if st := r.Stats(); st.DeadLettered != 4 || st.Sent != 3 {
		t.Errorf("stats %+v", st)
	}
}

// TestBrokerOutage: while every send fails with a transient error the rows wait (past
// Retry.MaxRetries: transient errors are never dead-lettered); once the broker is back
// every message is delivered, once, in order.
func TestBrokerOutage(t *testing.T) {
	e := newEnv(t)
	q := e.queue("q", nil)
	q.InjectFault(sbtest.Fault{Op: sbtest.OpSend}) // every send fails, transient, until cleared
	for tx := range 4 {
		var msgs []*azservicebus.Message
		for i := range 5 {
			msgs = append(msgs, &azservicebus.Message{MessageID: ptr(idOf("t", tx, i)), SessionID: sessionOf(tx, i),
				ApplicationProperties: map[string]any{"tx": tx, "i": i}})
		}
		e.add("q", msgs...)
	}
	r, _ := e.relay(&pgoutbox.RelayOptions{Retry: sbkit.RetryOptions{MaxRetries: 1, RetryDelay: time.Millisecond, MaxRetryDelay: 5 * time.Millisecond},
		Sender: &sbtestSenderNoRetry})
	ctx := context.Background()
	// The first row of every order (4 transactions, 1 session) fails again and again;
	// the rows after it wait for it.
	eventually(t, "the first row of every order to fail three times", func() bool {
		var n int
		err := e.pool.QueryRow(ctx, `SELECT count(*) FROM `+e.ob.Table()+` t WHERE attempts >= 3 AND NOT EXISTS
			(SELECT 1 FROM `+e.ob.Table()+` e WHERE e.order_key = t.order_key AND e.id < t.id)`).Scan(&n)
		return err == nil && n == 5
	})
	rows, dead := e.count()
	if active := q.Counts().Active; rows != 20 || dead != 0 || active != 0 {
		t.Fatalf("during the outage: %d rows, %d dead, %d at the broker", rows, dead, active)
	}
	q.ClearFaults()
	e.drained(r)
	if st := r.Stats(); st.Sent != 20 || st.DeadLettered != 0 || q.Stats().DuplicatesDropped != 0 {
		t.Fatalf("relay %+v, queue %+v", st, q.Stats())
	}
	checkOrder(t, q.Active())
}

// TestRequeue: a message dead-lettered because its destination was missing is sent
// once the destination exists and the row is requeued.
func TestRequeue(t *testing.T) {
	e := newEnv(t)
	r, _ := e.relay(nil)
	e.add("later", msg("early", "1"))
	eventually(t, "the dead-lettering", func() bool { return r.Stats().DeadLettered == 1 })
	var id int64
	if err := e.pool.QueryRow(context.Background(), `SELECT id FROM `+e.ob.DeadLetterTable()).Scan(&id); err != nil {
		t.Fatal(err)
	}
	q := e.queue("later", nil)
	if n, err := e.ob.Requeue(context.Background(), id, id+1000); err != nil || n != 1 {
		t.Fatalf("Requeue = %d, %v; want 1", n, err)
	}
	e.drained(r)
	if rows, dead := e.count(); rows+dead != 0 || q.Active()[0].MessageID != "early" {
		t.Fatalf("%d rows, %d dead, broker holds %v", rows, dead, q.Active())
	}
}

// TestCorruptRowDeadLettered: a row whose application properties cannot be decoded
// (edited by hand) is dead-lettered with the reason, not retried.
func TestCorruptRowDeadLettered(t *testing.T) {
	e := newEnv(t)
	q := e.queue("q", nil)
	e.add("q", &azservicebus.Message{MessageID: ptr("bad"), ApplicationProperties: map[string]any{"n": 1}}, msg("good", "x"))
	if _, err := e.pool.Exec(context.Background(), `UPDATE `+e.ob.Table()+` SET application_properties = '{"n": ["complex128", "1i"]}' WHERE message_id = 'bad'`); err != nil {
		t.Fatal(err)
	}
	e.relay(nil)
	e.drained()
	d := e.dead()["bad"]
	if active := q.Counts().Active; !strings.Contains(d.err, "complex128") || d.attempts != 1 || active != 1 {
		t.Fatalf("dead row %+v, broker holds %d", d, active)
	}
}

// TestInfiniteScheduleDeadLettered: a row whose scheduled_enqueue_time was set to
// 'infinity' by hand (no time.Time holds it) is dead-lettered with the reason; the
// other rows are sent. It used to fail every claim that read it.
func TestInfiniteScheduleDeadLettered(t *testing.T) {
	e := newEnv(t)
	q := e.queue("q", nil)
	e.add("q", msg("bad", "x"), msg("good", "y"))
	if _, err := e.pool.Exec(context.Background(), `UPDATE `+e.ob.Table()+` SET scheduled_enqueue_time = 'infinity' WHERE message_id = 'bad'`); err != nil {
		t.Fatal(err)
	}
	e.relay(nil)
	e.drained()
	d := e.dead()["bad"]
	if active := q.Counts().Active; !strings.Contains(d.err, "infinite") || d.attempts != 1 || active != 1 {
		t.Fatalf("dead row %+v, broker holds %d", d, active)
	}
}
