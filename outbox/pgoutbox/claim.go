package pgoutbox

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/Azure/go-amqp"
	"github.com/jackc/pgx/v5"
	"github.com/sbkit/sbkit"
	"github.com/sbkit/sbkit/sender"
)

func (r *Relay) buildSQL() {
	t, d := r.ob.table, r.ob.dead
	// The claim's transaction: PostgreSQL ends it when the relay stays silent on it for a
	// Lease; its marks commit asynchronously unless DisableAsyncCommit; its plans read
	// the primary key in order; and they are never JIT-compiled. The claim must stop at
	// its LIMIT: after a large commit the planner may prefer a bitmap (or sequential)
	// scan of the whole backlog, which evaluates every row's filters and sorts them all
	// (25 ms instead of 2 ms for 500 of 10,000 rows, measured), and every other statement
	// of the transaction looks rows up by id. The planner prices that ordered read over
	// the whole backlog, so a claim's custom plan over 100,000 rows costs more than
	// jit_above_cost: compiling it took 0.5 to 0.7 s, running it 3 ms (measured).
	idle := strconv.FormatInt(max(1, r.o.Lease.Milliseconds()), 10)
	r.beginSQL = `SELECT set_config('idle_in_transaction_session_timeout', '` + idle + `', true),
set_config('enable_bitmapscan', 'off', true), set_config('enable_seqscan', 'off', true),
set_config('jit', 'off', true)`
	if !r.o.DisableAsyncCommit {
		r.beginSQL += `, set_config('synchronous_commit', 'off', true)`
	}
	// A row is a candidate when it comes after $5 (a relay working through a backlog
	// goes on after its previous claim instead of stepping over the rows it holds: a
	// locked row costs a lock attempt), it is due, no earlier row of its order waits for
	// a retry (a probe of the retry index, which holds only rows that failed), its order
	// is not one the relay was told to skip ($3, $4), and it is not locked by another
	// transaction (SKIP LOCKED: other relays' claims, and this relay's other open
	// claims). The candidates of an order may be sent when the row before the first of
	// them is none, or the last the relay holds of that order in another claim ($2),
	// and no row of the order between the first and the last candidate is missing (one
	// index probe and one range count per order); otherwise the order's candidates come
	// back blocked. A row another transaction holds still exists in this statement's
	// snapshot, so it holds back the rows after it. The rows it may send are cut by
	// bytes too: a row that starts past $6 bytes (body and properties, summed in id
	// order over the rows it may send) comes back over, so that a claim reads no more
	// than the relay's MaxInFlightBytes into memory (the first row always fits): the
	// running sum grows with id, so the rows over are the ones it may send from the
	// first that starts past $6 on (cut), a single id the final select compares with
	// rather than joins (a generic plan joined 500 rows to 500 by nested loop, 60 ms,
	// measured). The CTEs are MATERIALIZED so that a generic plan cannot evaluate them
	// once per row. The claim returns no message: the rows' ids, orders and sizes are
	// all the claim loop needs to make the next claim, and load reads the messages of
	// the rows it took on the claim's connection while the next claim runs.
	const size = `coalesce(octet_length(o.body), 0) + coalesce(octet_length(o.application_properties::text), 0)`
	// Whether a row's order is blocked is a lookup in b (a hashed subplan, built once),
	// not a join of c with b: a generic plan joined them by nested loop, which for 500
	// rows of 500 blocked orders (another relay holds their predecessors) took 27 ms
	// instead of 4 (measured).
	const blocked = `(c.destination, c.order_key) IN (SELECT destination, order_key FROM b)`
	r.claimSQL = `WITH c AS MATERIALIZED (
	SELECT o.id, o.destination, o.order_key, o.attempts, ` + size + ` AS size FROM ` + t + ` o
	WHERE o.id > $5 AND o.not_before <= now()
	AND (SELECT f.id FROM ` + t + ` f WHERE f.destination = o.destination AND f.order_key = o.order_key
		AND f.attempts > 0 AND f.id < o.id AND f.not_before > now() LIMIT 1) IS NULL
	AND (o.destination, o.order_key) NOT IN (SELECT * FROM unnest($3::text[], $4::text[]))
	ORDER BY o.id LIMIT $1
	FOR UPDATE SKIP LOCKED
), b AS MATERIALIZED (
	SELECT g.destination, g.order_key FROM (
		SELECT destination, order_key, min(id) AS first, max(id) AS last, count(*) AS n FROM c GROUP BY destination, order_key
	) g CROSS JOIN LATERAL (SELECT max(e.id) AS pred FROM ` + t + ` e
		WHERE e.destination = g.destination AND e.order_key = g.order_key AND e.id < g.first) p
	WHERE (p.pred IS NOT NULL AND p.pred <> ALL($2::bigint[]))
		OR (g.n > 1 AND (SELECT count(*) FROM ` + t + ` e
			WHERE e.destination = g.destination AND e.order_key = g.order_key AND e.id BETWEEN g.first AND g.last) <> g.n)
), s AS MATERIALIZED (
	SELECT c.id, ` + blocked + ` AS blocked, c.size FROM c
), cut AS MATERIALIZED (
	SELECT min(id) AS id FROM (
		SELECT id, blocked, sum(CASE WHEN blocked THEN 0 ELSE size END) OVER (ORDER BY id) - size AS before FROM s
	) w WHERE NOT blocked AND before >= $6
)
SELECT x.blocked, NOT x.blocked AND coalesce(x.id >= (SELECT id FROM cut), false),
	x.size, x.id, x.destination, x.order_key, x.attempts
FROM (SELECT c.*, ` + blocked + ` AS blocked FROM c) x`
	// The messages of the rows a claim took, which its transaction holds.
	r.loadSQL = `SELECT id, ` + messageColumns + ` FROM ` + t + ` WHERE id = ANY($1)`
	// After a claim found blocked (or over) rows, it rolls back to its savepoint (so it
	// holds no row it will not send) and locks again the rows it will send.
	r.relockSQL = `SELECT id FROM ` + t + ` WHERE id = ANY($1) AND not_before <= now() FOR UPDATE SKIP LOCKED`
	// The marks run in the claim's transaction, on rows it holds.
	r.sentSQL = `DELETE FROM ` + t + ` WHERE id = ANY($1)`
	// A row moves to the dead-letter table only when no dead-letter row has its id
	// (there is one only when the outbox's ids restarted: a move and its delete are one
	// transaction, and Requeue gives a row a new id). A row that cannot move stays, and
	// deadTakenSQL, which runs next, gives it its next attempt with the error.
	r.deadSQL = `WITH f AS (SELECT * FROM unnest($1::bigint[], $2::text[]) AS f(id, error)),
moved AS (DELETE FROM ` + t + ` t USING f WHERE t.id = f.id
	AND NOT EXISTS (SELECT FROM ` + d + ` x WHERE x.id = f.id) RETURNING t.*, f.error)
INSERT INTO ` + d + ` (id, destination, order_key, ` + messageColumns + `, created_at, attempts, error)
SELECT id, destination, order_key, ` + messageColumns + `, created_at, attempts + 1, error FROM moved`
	r.deadTakenSQL = `UPDATE ` + t + ` t SET attempts = t.attempts + 1,
not_before = now() + f.delay * interval '1 microsecond', last_error = f.error
FROM unnest($1::bigint[], $2::bigint[], $3::text[]) AS f(id, delay, error)
WHERE t.id = f.id
RETURNING t.id`
	r.retrySQL = `UPDATE ` + t + ` t SET attempts = t.attempts + 1,
not_before = now() + f.delay * interval '1 microsecond', last_error = f.error
FROM unnest($1::bigint[], $2::bigint[], $3::text[]) AS f(id, delay, error)
WHERE t.id = f.id`
}

// claim is one claim: a transaction on a connection of the run's own that holds its
// rows' locks until their outcomes are marked, then commits.
type claim struct {
	conn   *pgx.Conn
	rows   []*row // in id order
	ctx    context.Context
	cancel context.CancelFunc // ends ctx: half the lease is over, or the claim is marked

	loaded  chan struct{} // closed when load has read the rows' messages, or failed
	loadErr error         // why load failed: the rows are released unsent

	orderCtx map[*order]context.Context // the context of each order's rows (see join)

	mu       sync.Mutex
	outcomes []outcome
}

// add records a row's outcome and reports whether it was the claim's last.
func (c *claim) add(oc outcome) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.outcomes = append(c.outcomes, oc)
	return len(c.outcomes) == len(c.rows)
}

// claim claims up to n rows on a connection of the run's own, starts reading their
// messages (load), and makes them members of their orders. It returns the claim, or nil
// when it took no row, and whether another claim should follow at once (this one found
// n rows, or did not scan from the first).
func (u *run) claim(n int, budget int64) (*claim, bool, error) {
	r := u.r
	start := time.Now() // before the transaction begins: the local deadline comes first
	conn, err := u.conns.get(u.life)
	if err != nil {
		return nil, false, err
	}
	own, skipDest, skipKey, pinned := u.claimParams()
	defer u.unpin(pinned)
	if u.rescan.Swap(false) || time.Since(u.scannedAll) > r.o.PollInterval {
		u.after = 0
	}
	if u.after == 0 {
		u.scannedAll = time.Now()
	}
	rows, blocked, over, err := r.claimRows(u.life, conn, n, u.after, own, skipDest, skipKey, budget)
	if err == nil && len(blocked) > 0 {
		u.noteBlocked(blocked)
	}
	if err == nil && len(blocked)+over > 0 && len(rows) > 0 {
		rows, err = r.relock(u.life, conn, rows)
	}
	if err == nil && len(rows) == 0 {
		_, err = conn.Exec(u.life, "ROLLBACK")
	}
	more := len(rows)+len(blocked)+over == n && over == 0 // over: the bytes wait for room
	from := u.after
	u.after = 0
	if more && err == nil {
		for _, rw := range append(rows, blocked...) {
			u.after = max(u.after, rw.id)
		}
	}
	// A claim that started after the scan position and found fewer than n rows did not
	// look at the rows before it (committed late, or freed since): the next claim
	// starts from the first row at once, rather than when something wakes the loop.
	more = more || (from > 0 && over == 0)
	if err != nil || len(rows) == 0 {
		u.conns.put(conn) // closes it unless idle
		return nil, more, err
	}
	c := &claim{conn: conn, rows: rows, orderCtx: make(map[*order]context.Context), loaded: make(chan struct{})}
	c.ctx, c.cancel = context.WithDeadlineCause(u.life, start.Add(r.o.Lease/2), errLeaseEnding)
	u.workers.Go(func() { u.load(c) }) // while the next claim runs on another connection
	var size int64
	for _, rw := range rows {
		rw.claim = c
		size += rw.size
	}
	u.addBytes(size)
	u.join(c, rows)
	r.stats.inFlight.Add(int64(len(rows)))
	r.stats.claims.Add(1)
	r.stats.claimed.Add(int64(len(rows)))
	return c, more, nil
}

// claimRows begins the claim's transaction and runs the claim statement: the rows it
// may send, in id order, the rows it found blocked, and how many rows it left for
// want of bytes (budget).
func (r *Relay) claimRows(ctx context.Context, conn *pgx.Conn, n int, after int64, own []int64, skipDest, skipKey []string, budget int64) (rows, blocked []*row, over int, err error) {
	b := &pgx.Batch{}
	b.Queue("BEGIN")
	b.Queue(r.beginSQL)
	b.Queue("SAVEPOINT claim")
	b.Queue(r.claimSQL, n, own, skipDest, skipKey, after, budget)
	err = queryBatch(ctx, conn, b, func(res pgx.Rows) error {
		rw, err := scanKeys(res)
		switch {
		case err != nil:
			return err
		case rw.blocked:
			blocked = append(blocked, rw)
		case rw.over:
			over++
		default:
			rows = append(rows, rw)
		}
		return nil
	})
	if err != nil {
		return nil, nil, 0, err
	}
	slices.SortFunc(rows, func(a, b *row) int { return cmp.Compare(a.id, b.id) })
	return rows, blocked, over, nil
}

// load reads the messages of c's rows on c's connection, in c's transaction (which
// holds the rows), and closes c.loaded. The read is bounded by the claim's context: it
// ends at half the Lease, as the claim's sends do. A row whose message cannot be decoded
// gets its decodeErr. When the read fails, c.loadErr says why: the dispatcher then releases the
// rows unsent, and the mark that follows ends the transaction (or finds the connection
// gone). A read the server is slow to answer usually ends the second way: when the
// context ends mid-read, pgx v5 (its DeadlineContextWatcherHandler) closes the
// connection, so the mark fails and the rows come back as they were, reported as a
// "mark" RelayError with no RelayResult, not as released rows. Either way no attempt is
// charged. TestSlowLoadEndsWithTheLease holds the query before it is sent, so it sees
// the first way.
func (u *run) load(c *claim) {
	defer close(c.loaded)
	ids := make([]int64, len(c.rows))
	byID := make(map[int64]*row, len(c.rows))
	for i, rw := range c.rows {
		ids[i] = rw.id
		byID[rw.id] = rw
	}
	res, err := c.conn.Query(c.ctx, u.r.loadSQL, ids)
	if err == nil {
		for res.Next() {
			id, m, decodeErr, serr := scanMessage(res)
			if serr != nil {
				err = serr
				break
			}
			if rw := byID[id]; rw != nil {
				rw.msg, rw.decodeErr = m, decodeErr
			}
		}
		res.Close()
		if err == nil {
			err = res.Err()
		}
	}
	if err == nil {
		for _, rw := range c.rows {
			if rw.msg == nil {
				err = fmt.Errorf("pgoutbox: claimed row %d not found by its claim's transaction", rw.id)
				break
			}
		}
	}
	if err != nil {
		c.loadErr = err
		u.r.dbError(context.Background(), "claim", len(c.rows), 0, err)
	}
}

// relock rolls the claim back to its savepoint, which releases every row it locked,
// and locks again the rows it may send. A row another transaction took meanwhile is
// dropped; the later rows of its order stay locked until the claim ends, stranded:
// released without being sent.
func (r *Relay) relock(ctx context.Context, conn *pgx.Conn, rows []*row) ([]*row, error) {
	ids := make([]int64, len(rows))
	for i, rw := range rows {
		ids[i] = rw.id
	}
	b := &pgx.Batch{}
	b.Queue("ROLLBACK TO SAVEPOINT claim")
	b.Queue(r.relockSQL, ids)
	locked := make(map[int64]bool, len(ids))
	err := queryBatch(ctx, conn, b, func(res pgx.Rows) error {
		var id int64
		if err := res.Scan(&id); err != nil {
			return err
		}
		locked[id] = true
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(locked) == len(rows) {
		return rows, nil
	}
	lost := make(map[string]bool)
	kept := rows[:0]
	for _, rw := range rows {
		key := rw.destination + "\x00" + rw.orderKey
		switch {
		case !locked[rw.id]:
			lost[key] = true
			continue
		case lost[key]:
			rw.stranded = true
		}
		kept = append(kept, rw)
	}
	return kept, nil
}

// queryBatch sends b, whose last statement is a query and whose others return no rows,
// and calls scan for each row of the query.
func queryBatch(ctx context.Context, conn *pgx.Conn, b *pgx.Batch, scan func(pgx.Rows) error) error {
	br := conn.SendBatch(ctx, b)
	err := func() error {
		for range b.Len() - 1 {
			if _, err := br.Exec(); err != nil {
				return err
			}
		}
		rows, err := br.Query()
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			if err := scan(rows); err != nil {
				return err
			}
		}
		return rows.Err()
	}()
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	return err
}

// outcomeKind is what the mark does with a row.
type outcomeKind int

const (
	outcomeSent     outcomeKind = iota + 1 // delete
	outcomeRetry                           // one more attempt, retry after delay
	outcomeDead                            // move to the dead-letter table
	outcomeReleased                        // nothing: the commit releases it as it was
)

// outcome is a row's outcome, as the mark writes it.
type outcome struct {
	row   *row
	kind  outcomeKind
	err   error
	delay time.Duration // outcomeRetry
}

// classify decides what becomes of rw after a send that ended with err.
func (r *Relay) classify(rw *row, err error) outcome {
	switch {
	case err == nil:
		return outcome{kind: outcomeSent}
	case rw.ctx != nil && rw.ctx.Err() != nil && errors.Is(context.Cause(rw.ctx), errBlocked),
		errors.Is(err, errBlocked), errors.Is(err, errClosing), errors.Is(err, sender.ErrClosed):
		// The relay's own doing: its order stopped, or the relay closed or retired the
		// sender.Sender.
		return outcome{kind: outcomeReleased, err: err}
	}
	n := rw.attempts + 1
	// CodeClosed is the destination's sender closed by the application (the relay
	// closes what Destinations returned only after its last send): not the message's
	// fault, so it waits and is never dead-lettered for it; the next attempt goes
	// through a new sender (see linkFailed).
	retryable := sbkit.IsTransient(err) || errors.Is(err, errLeaseEnding) || hasCode(err, azservicebus.CodeClosed) ||
		errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
	if !retryable && (sbkit.IsPermanent(err) || errors.Is(err, ErrInvalidMessage) || n > int(r.retry.MaxRetries)) {
		return outcome{kind: outcomeDead, err: err}
	}
	return outcome{kind: outcomeRetry, err: err, delay: r.retryDelay(n)}
}

// retryDelay is the wait after a row's n-th failed attempt.
func (r *Relay) retryDelay(n int) time.Duration {
	bo := r.delay.BackOff()
	var d time.Duration
	for range min(n, 30) { // capped long before 30 doublings
		d = bo.NextBackOff()
	}
	return d
}

// linkFailed reports whether err means that the sender that returned it will never
// send again: it was closed (CodeClosed), or the broker detached its link for a reason
// the SDK does not recover from (the entity not found, or disabled, or the rights
// revoked: CodeNotFound, CodeUnauthorizedAccess, or the bare [*amqp.Error] the SDK
// returns for such a detach; see azservicebus's internal/errors.go).
func linkFailed(err error) bool {
	var amqpErr *amqp.Error
	if errors.As(err, &amqpErr) {
		switch amqpErr.Condition {
		case amqp.ErrCondNotFound, amqp.ErrCondUnauthorizedAccess, "com.microsoft:entity-disabled":
			return true
		}
	}
	return hasCode(err, azservicebus.CodeClosed) || hasCode(err, azservicebus.CodeNotFound) ||
		hasCode(err, azservicebus.CodeUnauthorizedAccess)
}

func hasCode(err error, code azservicebus.Code) bool {
	var e *azservicebus.Error
	return errors.As(err, &e) && e.Code == code
}

// nopSender is the destination NewRelay checks the sender options against.
type nopSender struct{}

func (nopSender) SendMessage(context.Context, *azservicebus.Message, *azservicebus.SendMessageOptions) error {
	return nil
}
