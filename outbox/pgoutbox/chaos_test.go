package pgoutbox_test

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
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

var relayChaosSeeds = flag.Int("chaos.relay.seeds", 2, "number of seeds TestRelayChaos runs")

// lockedRand is a seed's random source, shared by the test's goroutines.
type lockedRand struct {
	mu sync.Mutex
	r  *rand.Rand
}

func (l *lockedRand) n(n int) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.r.IntN(n)
}

// chaosSender fails a send request now and then with a transient error, without
// storing it, while faults is set.
type chaosSender struct {
	*sbtest.Sender
	rnd    *lockedRand
	faults *atomic.Bool
}

func (c *chaosSender) fail() bool { return c.faults.Load() && c.rnd.n(20) == 0 }

func (c *chaosSender) SendMessage(ctx context.Context, m *azservicebus.Message, o *azservicebus.SendMessageOptions) error {
	if c.fail() {
		return sbtest.TransientError
	}
	return c.Sender.SendMessage(ctx, m, o)
}

func (c *chaosSender) SendBatch(ctx context.Context, b sbkit.Batch, o *azservicebus.SendMessageBatchOptions) error {
	if c.fail() {
		return sbtest.TransientError
	}
	return c.Sender.SendBatch(ctx, b, o)
}

// TestRelayChaos runs three relays on one outbox while a writer commits transactions
// (some messages in sessions across transactions, some too large for the broker), and
// meanwhile: sends fail transiently at random, the relays' database sessions are
// terminated at random (claims and LISTEN alike), the destination "r" is deleted and
// re-created, and every relay is closed at a random moment with a short deadline and
// started again. Then the faults stop, the dead-lettered rows of "r" (refused while it
// was deleted) are requeued, and the outbox drains. Whatever happened: every Close
// returned by its deadline; every committed message was accepted by the broker, the
// too-large ones alone dead-lettered; "q" (never deleted, duplicate detection on) holds
// each message once, in order per transaction and per session; the claim statements
// stayed bounded per second; no goroutine is left. Each seed is reproducible in what
// it chooses, not in its timing; a failure names its seed.
func TestRelayChaos(t *testing.T) {
	if testing.Short() {
		t.Skip("chaos: not in -short")
	}
	for seed := range uint64(*relayChaosSeeds) {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) { relayChaos(t, seed) })
	}
}

func relayChaos(t *testing.T, seed uint64) {
	e := newEnv(t)
	leakCheck(t)
	rnd := &lockedRand{r: rand.New(rand.NewPCG(seed, 42))}
	e.ns = sbtest.NewNamespace(&sbtest.NamespaceOptions{MaxMessageSize: 4096})
	q := e.queue("q", nil)
	e.queue("r", nil)
	claims := e.watchClaims()
	ob := e.ob
	var faults atomic.Bool
	faults.Store(true)
	dests := func(name string) (sbkit.MessageSender, error) {
		s, err := e.ns.NewSender(name, nil)
		if err != nil {
			return nil, err
		}
		return &chaosSender{Sender: s, rnd: rnd, faults: &faults}, nil
	}
	var acc acceptances
	var kills atomic.Int64
	opts := &pgoutbox.RelayOptions{ClaimBatch: 20, MaxOpenClaims: 2, PollInterval: 100 * time.Millisecond,
		Retry: fastRetry, Sender: &sender.Options{Retry: noRetry, Hooks: []sender.Hook{&acc}}}
	start := time.Now()

	// The relays: each runs, is closed at a random moment with a short deadline, and
	// runs again, until stop.
	stop := make(chan struct{})
	var relays sync.WaitGroup
	var lateCloses atomic.Int64
	var owners sync.Map // Owner -> true
	for k := range 3 {
		relays.Go(func() {
			for {
				o := *opts
				o.Owner = fmt.Sprintf("chaos-%d-%d", seed, k)
				r, err := pgoutbox.NewRelay(ob, dests, &o)
				if err != nil {
					t.Error(err)
					return
				}
				owners.Store(o.Owner, true)
				done := make(chan error, 1)
				go func() { done <- r.Run(context.Background()) }()
				life := time.NewTimer(time.Duration(300+rnd.n(1200)) * time.Millisecond)
				select {
				case <-stop:
				case <-life.C:
				}
				life.Stop()
				deadline := time.Duration(rnd.n(100)) * time.Millisecond
				ctx, cancel := context.WithTimeout(context.Background(), deadline)
				began := time.Now()
				_ = r.Close(ctx)
				if took := time.Since(began); took > deadline+time.Second {
					lateCloses.Add(1)
					t.Errorf("Close(%v) took %v", deadline, took)
				}
				cancel()
				if err := <-done; err != nil {
					t.Errorf("Run = %v", err)
				}
				select {
				case <-stop:
					return
				default:
				}
			}
		})
	}

	// The killer: terminates a random session of the relays every few hundred ms.
	var killer sync.WaitGroup
	killerStop := make(chan struct{})
	killer.Go(func() {
		for {
			tick := time.NewTimer(time.Duration(100+rnd.n(300)) * time.Millisecond)
			select {
			case <-killerStop:
				tick.Stop()
				return
			case <-tick.C:
			}
			tag, _ := e.pool.Exec(context.Background(), `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
				WHERE application_name LIKE $1 ORDER BY random() LIMIT 1`, fmt.Sprintf("chaos-%d-%%", seed))
			kills.Add(tag.RowsAffected())
		}
	})

	// The writer: one transaction after another (so that commit order is tx order).
	const txs = 80
	want := make(map[string]bool) // every committed message
	poison := make(map[string]bool)
	ctx := context.Background()
	for tx := range txs {
		dest := "q"
		if tx%4 == 3 {
			dest = "r"
		}
		var msgs []*azservicebus.Message
		for i := range 1 + rnd.n(5) {
			id := fmt.Sprintf("%s-%d-%d", dest, tx, i)
			m := &azservicebus.Message{MessageID: &id, Body: []byte("x"),
				ApplicationProperties: map[string]any{"tx": tx, "i": i}}
			if i%2 == 1 {
				m.SessionID = ptr(fmt.Sprint("S", tx%3))
			}
			if rnd.n(25) == 0 {
				m.Body = []byte(strings.Repeat("p", 8192))
				poison[id] = true
			}
			msgs = append(msgs, m)
			want[id] = true
		}
		if err := pgx.BeginFunc(ctx, e.pool, func(t pgx.Tx) error { return ob.Add(ctx, t, dest, msgs...) }); err != nil {
			t.Fatal(err)
		}
		pace := time.NewTimer(time.Duration(rnd.n(60)) * time.Millisecond) // spreads the commits over the chaos
		<-pace.C
		if tx == txs/3 || tx == 2*txs/3 {
			if err := e.ns.DeleteQueue("r"); err != nil {
				t.Fatal(err)
			}
			e.queue("r", nil)
		}
	}

	// Calm: the chaos stops, a last relay drains the outbox, and the rows of "r"
	// refused while it was deleted are requeued.
	close(stop)
	relays.Wait()
	close(killerStop)
	killer.Wait()
	faults.Store(false)
	elapsed := time.Since(start)
	statements := claims.count()
	last, err := pgoutbox.NewRelay(ob, dests, opts)
	if err != nil {
		t.Fatal(err)
	}
	runRelay(t, last)
	eventually(t, "the outbox to drain", func() bool { n, _ := e.count(); return n == 0 && last.Stats().InFlight == 0 })
	var requeue []int64
	rows, err := e.pool.Query(ctx, `SELECT id FROM `+e.ob.DeadLetterTable()+` WHERE destination = 'r' AND error NOT ILIKE '%too large%'`)
	if err != nil {
		t.Fatal(err)
	}
	requeue, err = pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.ob.Requeue(ctx, requeue...); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the requeued rows to drain", func() bool { n, _ := e.count(); return n == 0 && last.Stats().InFlight == 0 })

	// Nothing silently dropped: each message accepted, or dead-lettered as too large.
	dead := e.dead()
	acc.mu.Lock()
	for id := range want {
		switch {
		case poison[id]:
			if _, ok := dead[id]; !ok || acc.n[id] != 0 {
				t.Errorf("%s (too large): dead-lettered %v, accepted %d times", id, ok, acc.n[id])
			}
		case acc.n[id] == 0:
			t.Errorf("%s: never accepted (dead-lettered: %+v)", id, dead[id])
		}
	}
	acc.mu.Unlock()
	if len(dead) != len(poison) {
		t.Errorf("%d dead-lettered rows, want the %d too large ones", len(dead), len(poison))
	}
	// "q": each message once, in order.
	seen := make(map[string]int)
	for _, m := range q.Active() {
		seen[m.MessageID]++
	}
	for id := range want {
		if strings.HasPrefix(id, "q-") && !poison[id] && seen[id] != 1 {
			t.Errorf("q holds %s %d times, want once", id, seen[id])
		}
	}
	checkOrder(t, q.Active())
	// Claims: bounded by the wake-ups (polls every 100 ms per relay, commits, marks),
	// never a spin (thousands per second).
	if perSec := float64(statements) / elapsed.Seconds(); perSec > 300 {
		t.Errorf("%d claim statements in %v (%.0f/s), want at most 300/s", statements, elapsed, perSec)
	}
	sent := 0
	acc.mu.Lock()
	for _, n := range acc.n {
		sent += n
	}
	acc.mu.Unlock()
	t.Logf("seed %d: %v, %d claim statements, %d sessions killed, %d acceptances (%d after the chaos), %d too large, %d requeued",
		seed, elapsed.Round(time.Millisecond), statements, kills.Load(), sent, last.Stats().Sent, len(poison), len(requeue))
}
