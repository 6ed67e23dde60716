package pgoutbox

import (
	"context"

	"github.com/jackc/pgx/v5"
)

// listen keeps a connection of its own listening on the outbox's channel and wakes the
// claim loop at every notification, until ctx ends. A lost connection is made again
// with backoff; meanwhile the claim loop polls. After every (re)connection the claim
// loop is woken once, for the commits it may have missed.
func (u *run) listen(ctx context.Context) {
	rs := dbRetry.Retries()
	for ctx.Err() == nil {
		err := u.listenOnce(ctx, rs.Reset)
		if ctx.Err() != nil {
			return
		}
		if !u.r.retryDB(ctx, &rs, "listen", 0, err) {
			return
		}
	}
}

// listenOnce connects, listens and forwards notifications until the connection fails
// or ctx ends. It calls listening once LISTEN succeeded.
func (u *run) listenOnce(ctx context.Context, listening func()) error {
	conn, err := u.conns.dial(ctx)
	if err != nil {
		return err
	}
	defer closeConn(conn)
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{u.r.ob.channel}.Sanitize()); err != nil {
		return err
	}
	listening()
	u.signal()
	for {
		if _, err := conn.WaitForNotification(ctx); err != nil {
			return err
		}
		u.r.stats.wakeups.Add(1)
		u.signal()
	}
}
