package pgoutbox_test

import (
	"context"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/sbkit/sbkit"
	"github.com/sbkit/sbkit/outbox/pgoutbox"
	"github.com/sbkit/sbkit/sender"
)

// claimCounter is a pgx tracer that counts the relay's claim statements (the relay's
// connections are made from its outbox pool's configuration, tracer included).
type claimCounter struct{ n atomic.Int64 }

func (c *claimCounter) count(sql string) {
	if strings.HasPrefix(sql, "WITH c AS MATERIALIZED") {
		c.n.Add(1)
	}
}

func (c *claimCounter) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	c.count(d.SQL)
	return ctx
}
func (c *claimCounter) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}
func (c *claimCounter) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	return ctx
}
func (c *claimCounter) TraceBatchQuery(_ context.Context, _ *pgx.Conn, d pgx.TraceBatchQueryData) {
	c.count(d.SQL)
}
func (c *claimCounter) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}

// tracedOutbox returns e's outbox through a pool of its own whose connections count
// claim statements.
func (e *env) tracedOutbox(c *claimCounter) *pgoutbox.Outbox {
	e.t.Helper()
	cfg := e.pool.Config()
	cfg.ConnConfig.Tracer = c
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(pool.Close)
	ob, err := pgoutbox.New(pool, &pgoutbox.Options{Schema: e.schema})
	if err != nil {
		e.t.Fatal(err)
	}
	return ob
}

// claimLoopParked reports whether a relay's claim loop waits in its select for a
// wake-up or its poll (not in a claim, nor in a retry's wait).
func claimLoopParked() bool {
	buf := make([]byte, 1<<20)
	for _, g := range strings.Split(string(buf[:runtime.Stack(buf, true)]), "\n\n") {
		// runtime.Stack leaves the runtime's frames out: the top frame is the select's.
		lines := strings.SplitN(g, "\n", 3)
		if len(lines) >= 2 && strings.Contains(lines[0], "[select") &&
			strings.HasPrefix(lines[1], "github.com/sbkit/sbkit/outbox/pgoutbox.(*run).claimLoop(") {
			return true
		}
	}
	return false
}

// TestClaimLoopDoesNotSpinOnBlockedRows: while the first row of a transaction is in
// flight, the claims that find the transaction's next rows blocked behind it do not
// claim again and again: with polling an hour apart and no LISTEN, the claim loop comes
// to rest after a handful of claim statements until the row's outcome wakes it. The
// rows are then sent.
func TestClaimLoopDoesNotSpinOnBlockedRows(t *testing.T) {
	for _, tt := range []struct {
		name       string
		claimBatch int
		before     int // single-row transactions committed first
		tx         int // rows of the transaction
	}{
		{"ClaimBatch 1, a transaction of 2", 1, 0, 2},
		{"defaults, a transaction of 1000 behind 499 others", 0, 499, 1000},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			e.queue("q", nil)
			var claims claimCounter
			ob := e.tracedOutbox(&claims)
			s, err := e.ns.NewSender("q", nil)
			if err != nil {
				t.Fatal(err)
			}
			g := newGateSender(s)
			var opened atomic.Bool
			defer func() {
				if !opened.Load() {
					close(g.open)
				}
			}()
			r, err := pgoutbox.NewRelay(ob, func(string) (sbkit.MessageSender, error) { return g, nil },
				&pgoutbox.RelayOptions{ClaimBatch: tt.claimBatch, PollInterval: time.Hour, DisableListen: true,
					Sender: &sender.Options{Retry: noRetry}})
			if err != nil {
				t.Fatal(err)
			}
			for i := range tt.before {
				e.add("q", msg(idOf("s", i, 0), "x"))
			}
			var tx []*azservicebus.Message
			for i := range tt.tx {
				tx = append(tx, msg(idOf("t", 0, i), "y"))
			}
			e.add("q", tx...)
			runRelay(t, r)
			<-g.started
			// The sends are held: whatever the relay claims now, it claims while the
			// transaction's first row is in flight. The claim loop must come to rest
			// (waiting for a wake-up or its poll) after a few claims.
			eventually(t, "the claim loop to rest, or to spin", func() bool {
				return claims.n.Load() > 8 || claimLoopParked()
			})
			if n := claims.n.Load(); n > 8 {
				t.Errorf("%d claim statements while a row was in flight, want a few (at most 8)", n)
			}
			close(g.open)
			opened.Store(true)
			e.drained(r)
			if st := r.Stats(); st.Sent != int64(tt.before+tt.tx) {
				t.Fatalf("stats %+v", st)
			}
		})
	}
}
