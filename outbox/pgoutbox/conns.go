package pgoutbox

import (
	"context"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// conns are a run's own database connections: one per open claim (a claim holds its
// connection in a transaction while its rows are sent), and the listener's. They are
// made from the outbox pool's configuration, its BeforeConnect and AfterConnect hooks
// included, outside the pool, so that a relay never holds the application's
// connections; application_name is the relay's Owner. They are safe for concurrent use.
type conns struct {
	pool  *pgxpool.Pool
	owner string

	mu   sync.Mutex
	idle []*pgx.Conn
}

// get returns an idle connection, or a new one.
func (cs *conns) get(ctx context.Context) (*pgx.Conn, error) {
	cs.mu.Lock()
	if n := len(cs.idle); n > 0 {
		c := cs.idle[n-1]
		cs.idle = cs.idle[:n-1]
		cs.mu.Unlock()
		return c, nil
	}
	cs.mu.Unlock()
	return cs.dial(ctx)
}

// dial makes a new connection.
func (cs *conns) dial(ctx context.Context) (*pgx.Conn, error) {
	pc := cs.pool.Config()
	cfg := pc.ConnConfig.Copy()
	if cfg.RuntimeParams == nil {
		cfg.RuntimeParams = make(map[string]string)
	}
	cfg.RuntimeParams["application_name"] = cs.owner
	if pc.BeforeConnect != nil {
		if err := pc.BeforeConnect(ctx, cfg); err != nil {
			return nil, err
		}
	}
	c, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, err
	}
	if pc.AfterConnect != nil {
		if err := pc.AfterConnect(ctx, c); err != nil {
			closeConn(c)
			return nil, err
		}
	}
	return c, nil
}

// put gives c back for another claim. A connection that is closed, or still in a
// transaction (after an error), is closed instead.
func (cs *conns) put(c *pgx.Conn) {
	if c.IsClosed() || c.PgConn().TxStatus() != 'I' {
		closeConn(c)
		return
	}
	cs.mu.Lock()
	cs.idle = append(cs.idle, c)
	cs.mu.Unlock()
}

// closeIdle closes the idle connections.
func (cs *conns) closeIdle() {
	cs.mu.Lock()
	idle := cs.idle
	cs.idle = nil
	cs.mu.Unlock()
	for _, c := range idle {
		closeConn(c)
	}
}

// closeTimeout bounds the goodbye to the server when a connection is closed.
const closeTimeout = time.Second

// closeConn closes c; the server then ends its transaction, which releases the rows it
// locked. A connection whose statement was cancelled is already closing (pgx drains it
// in the background) and returns at once.
func closeConn(c *pgx.Conn) {
	ctx, cancel := context.WithTimeout(context.Background(), closeTimeout)
	defer cancel()
	_ = c.Close(ctx)
}
