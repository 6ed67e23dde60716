package pgdedupe_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/sbkit/sbkit"
	"github.com/sbkit/sbkit/dedupe/pgdedupe"
	"github.com/sbkit/sbkit/receiver"
	"github.com/sbkit/sbkit/sbtest"
)

// e2e is an sbtest queue "orders" and a database with the dedupe table and a business
// table "work" (one row per run of the work, no unique key: duplicates would show).
type e2e struct {
	t     *testing.T
	ns    *sbtest.Namespace
	queue *sbtest.Entity
	pool  *pgxpool.Pool
	store *pgdedupe.Store
	runs  atomic.Int64
}

func newE2E(t *testing.T) *e2e {
	t.Helper()
	pool := newPool(t)
	if _, err := pool.Exec(context.Background(), `CREATE TABLE work (message_id text NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	ns := sbtest.NewTestNamespace(t, &sbtest.NamespaceOptions{Queues: map[string]*sbtest.EntityOptions{"orders": {LockDuration: 5 * time.Second}}})
	q, _ := ns.Entity("orders")
	return &e2e{t: t, ns: ns, queue: q, pool: pool, store: newStore(t, pool)}
}

func (e *e2e) send(ids ...string) {
	e.t.Helper()
	s, err := e.ns.NewSender("orders", nil)
	if err != nil {
		e.t.Fatal(err)
	}
	defer s.Close(context.Background())
	for _, id := range ids {
		if err := s.SendMessage(context.Background(), &azservicebus.Message{MessageID: &id}, nil); err != nil {
			e.t.Fatal(err)
		}
	}
}

// work is the business handler: one row per run, written through the filter's
// transaction.
func (e *e2e) work(ctx context.Context, m *azservicebus.ReceivedMessage) error {
	e.runs.Add(1)
	_, err := pgdedupe.TxFrom(ctx).Exec(ctx, `INSERT INTO work (message_id) VALUES ($1)`, m.MessageID)
	return err
}

// rows returns how many work rows and done marks exist for id.
func (e *e2e) rows(id string) (work, marks int) {
	e.t.Helper()
	ctx := context.Background()
	if err := e.pool.QueryRow(ctx, `SELECT count(*) FROM work WHERE message_id = $1`, id).Scan(&work); err != nil {
		e.t.Fatal(err)
	}
	if err := e.pool.QueryRow(ctx, `SELECT count(*) FROM `+e.store.Table()+` WHERE key = $1 AND done`, "orders:"+id).Scan(&marks); err != nil {
		e.t.Fatal(err)
	}
	return work, marks
}

// processor runs a processor over the queue with a TxFilter around h until the test
// ends (or stop is called).
func (e *e2e) processor(h sbkit.Handler, concurrency int, hooks ...pgdedupe.Hook) (f *pgdedupe.TxFilter, p *receiver.Processor, stop func()) {
	e.t.Helper()
	f, err := pgdedupe.NewTxFilter(e.store, &pgdedupe.TxOptions{Entity: "orders", Hooks: hooks})
	if err != nil {
		e.t.Fatal(err)
	}
	r, err := e.ns.NewReceiverForQueue("orders", nil)
	if err != nil {
		e.t.Fatal(err)
	}
	wrapped, err := f.Wrap(h)
	if err != nil {
		e.t.Fatal(err)
	}
	p, err = receiver.New(r, wrapped, &receiver.Options{MaxConcurrency: concurrency})
	if err != nil {
		e.t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = p.Run(context.Background())
	}()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			_ = p.Close(ctx)
			<-done
		})
	}
	e.t.Cleanup(stop)
	return f, p, stop
}

// drained waits until the queue holds no message, failing the test after 20 s.
func (e *e2e) drained() {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := e.queue.WaitDrained(ctx); err != nil {
		e.t.Fatalf("queue not drained: %v (%+v)", err, e.queue.Counts())
	}
}

// TestCompleteFailsWorkCommittedOnce is the failed Complete of "Message transfers, locks,
// and settlement" end to end: the work commits, Complete fails (the lock is lost), the
// message comes back: it is completed without running the work again, and the work's
// row exists once.
func TestCompleteFailsWorkCommittedOnce(t *testing.T) {
	e := newE2E(t)
	e.queue.InjectFault(sbtest.Fault{Op: sbtest.OpComplete, Count: 1, Err: &azservicebus.Error{Code: azservicebus.CodeLockLost}})
	e.send("job-42")
	f, _, _ := e.processor(e.work, 1)
	e.drained()
	if work, marks := e.rows("job-42"); e.runs.Load() != 1 || work != 1 || marks != 1 {
		t.Fatalf("handler ran %d times, %d work rows, %d marks; want 1, 1, 1", e.runs.Load(), work, marks)
	}
	if st := f.Stats(); st.Committed != 1 || st.DuplicatesSkipped != 1 || e.queue.Stats().Completed != 1 {
		t.Fatalf("filter %+v, queue %+v", st, e.queue.Stats())
	}
}

// resultHook counts a TxFilter's outcomes.
type resultHook struct {
	committed chan struct{}
}

func (h resultHook) OnTxResult(_ context.Context, e pgdedupe.TxResult) {
	if e.Outcome == pgdedupe.OutcomeCommitted {
		h.committed <- struct{}{}
	}
}

// TestCrashAfterCommit: the process dies between the commit and Complete (the
// processor is closed abruptly while Complete hangs); a new processor gets the
// redelivery and completes it without running the handler.
func TestCrashAfterCommit(t *testing.T) {
	e := newE2E(t)
	e.queue.InjectFault(sbtest.Fault{Op: sbtest.OpComplete, Count: 1, Hang: true})
	e.send("job-7")
	hook := resultHook{committed: make(chan struct{}, 1)}
	_, _, stopA := e.processor(e.work, 1, hook)
	select {
	case <-hook.committed:
	case <-time.After(20 * time.Second):
		t.Fatal("the first worker never committed")
	}
	stopA() // the hanging Complete is given up: the message stays locked, as after a crash
	for _, m := range e.queue.Locked() {
		e.queue.ExpireLock(m.LockToken) // the crashed worker's lock runs out
	}
	fb, _, _ := e.processor(func(ctx context.Context, m *azservicebus.ReceivedMessage) error {
		t.Error("the handler ran again after a committed transaction")
		return e.work(ctx, m)
	}, 1)
	e.drained()
	if work, marks := e.rows("job-7"); e.runs.Load() != 1 || work != 1 || marks != 1 {
		t.Fatalf("handler ran %d times, %d work rows, %d marks; want 1, 1, 1", e.runs.Load(), work, marks)
	}
	if st := fb.Stats(); st.DuplicatesSkipped != 1 {
		t.Fatalf("second worker %+v, want one duplicate", st)
	}
}

// TestHandlerErrorRollsBack: a handler that wrote its row and then failed leaves no row
// and no mark; the redelivery runs the work again and commits it.
func TestHandlerErrorRollsBack(t *testing.T) {
	e := newE2E(t)
	e.send("job-9")
	var failed atomic.Bool
	seen := make(chan struct{})
	f, _, _ := e.processor(func(ctx context.Context, m *azservicebus.ReceivedMessage) error {
		if err := e.work(ctx, m); err != nil {
			return err
		}
		if failed.CompareAndSwap(false, true) {
			// Before the rollback: the row is visible to the transaction only.
			if work, marks := e.rows("job-9"); work != 0 || marks != 0 {
				t.Errorf("uncommitted work visible outside: %d rows, %d marks", work, marks)
			}
			close(seen)
			return errors.New("payment service down")
		}
		return nil
	}, 1)
	<-seen
	e.drained()
	if work, marks := e.rows("job-9"); e.runs.Load() != 2 || work != 1 || marks != 1 {
		t.Fatalf("handler ran %d times, %d work rows, %d marks; want 2, 1, 1", e.runs.Load(), work, marks)
	}
	if st := f.Stats(); st.RolledBack != 1 || st.Committed != 1 {
		t.Fatalf("stats %+v", st)
	}
}

// TestConcurrentDuplicates: two processors on one queue, every MessageId sent twice:
// each business row exists exactly once, whatever the interleaving.
func TestConcurrentDuplicates(t *testing.T) {
	e := newE2E(t)
	const n = 150
	ids := make([]string, 0, 2*n)
	for i := range n {
		id := fmt.Sprint("order-", i)
		ids = append(ids, id, id) // side by side: the copies run at the same time
	}
	e.send(ids...)
	slow := func(ctx context.Context, m *azservicebus.ReceivedMessage) error {
		if err := e.work(ctx, m); err != nil {
			return err
		}
		time.Sleep(time.Millisecond) // hold the transaction open: duplicates overlap
		return nil
	}
	fa, _, _ := e.processor(slow, 8)
	fb, _, _ := e.processor(slow, 8)
	e.drained()
	var rows, distinct, marks int
	ctx := context.Background()
	if err := e.pool.QueryRow(ctx, `SELECT count(*), count(DISTINCT message_id) FROM work`).Scan(&rows, &distinct); err != nil {
		t.Fatal(err)
	}
	if err := e.pool.QueryRow(ctx, `SELECT count(*) FROM `+e.store.Table()+` WHERE done`).Scan(&marks); err != nil {
		t.Fatal(err)
	}
	a, b := fa.Stats(), fb.Stats()
	if rows != n || distinct != n || marks != n || a.Committed+b.Committed != n || a.DuplicatesSkipped+b.DuplicatesSkipped != n {
		t.Fatalf("%d rows (%d distinct), %d marks, stats A %+v B %+v; want %d of each", rows, distinct, marks, a, b, n)
	}
	if a.Committed == 0 || b.Committed == 0 {
		t.Logf("one processor did all the work (A %+v, B %+v)", a, b)
	}
}
