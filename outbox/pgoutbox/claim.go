package pgoutbox

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/jackc/pgx/v5"
	"github.com/sbkit/sbkit"
	"github.com/sbkit/sbkit/sender"
)

func (r *Relay) buildSQL() {
	t, d := r.ob.table, r.ob.dead
	// A row is a candidate when it is due, not leased, and the first row of its order is
	// neither leased nor waiting for a retry (the rows of an order that are leased or
	// waiting always come first: claims take an order's first rows, and a failed row
	// holds back the rows after it). Among the candidates this statement locked, a row
	// is claimed only when every earlier row of its order is claimed with it: its
	// immediate predecessor (an index probe) is in the candidates, and so is each
	// earlier candidate's. A row another relay is claiming right now (locked, hence
	// skipped) still exists in this statement's snapshot and holds back the rows after
	// it.
	r.claimSQL = `WITH c AS (
	SELECT o.id, o.destination, o.order_key FROM ` + t + ` o
	WHERE o.not_before <= now() AND (o.lease_until IS NULL OR o.lease_until <= now())
	AND NOT EXISTS (SELECT 1 FROM (SELECT f.lease_until, f.not_before FROM ` + t + ` f
		WHERE f.destination = o.destination AND f.order_key = o.order_key ORDER BY f.id LIMIT 1) f
		WHERE f.lease_until > now() OR f.not_before > now())
	ORDER BY o.id LIMIT $1
	FOR UPDATE SKIP LOCKED
), ok AS (
	SELECT id FROM (
		SELECT c.id, bool_or(p.pred IS NOT NULL AND p.pred NOT IN (SELECT id FROM c))
			OVER (PARTITION BY c.destination, c.order_key ORDER BY c.id) AS blocked
		FROM c, LATERAL (SELECT max(e.id) AS pred FROM ` + t + ` e
			WHERE e.destination = c.destination AND e.order_key = c.order_key AND e.id < c.id) p
	) x WHERE NOT blocked
)
UPDATE ` + t + ` t SET lease_owner = $2, lease_until = now() + $3 * interval '1 microsecond'
FROM ok WHERE t.id = ok.id
RETURNING ` + rowColumns
	// A sent row is deleted whoever holds it now: its message is accepted.
	r.sentSQL = `DELETE FROM ` + t + ` WHERE id = ANY($1)`
	r.deadSQL = `WITH f AS (SELECT * FROM unnest($1::bigint[], $2::text[]) AS f(id, error)),
moved AS (DELETE FROM ` + t + ` t USING f WHERE t.id = f.id AND t.lease_owner = $3 RETURNING t.*, f.error)
INSERT INTO ` + d + ` (id, destination, order_key, ` + messageColumns + `, created_at, attempts, error)
SELECT id, destination, order_key, ` + messageColumns + `, created_at, attempts + 1, error FROM moved
ON CONFLICT (id) DO NOTHING`
	r.releaseSQL = `UPDATE ` + t + ` t SET lease_owner = NULL, lease_until = NULL, attempts = t.attempts + f.inc,
not_before = now() + f.delay * interval '1 microsecond', last_error = coalesce(f.error, t.last_error)
FROM unnest($1::bigint[], $2::int[], $3::bigint[], $4::text[]) AS f(id, inc, delay, error)
WHERE t.id = f.id AND t.lease_owner = $5`
}

// batch returns a pgx batch that runs as one transaction, with synchronous_commit off
// unless DisableAsyncCommit.
func (r *Relay) batch() *pgx.Batch {
	b := &pgx.Batch{}
	if !r.o.DisableAsyncCommit {
		b.Queue(`SET LOCAL synchronous_commit = off`)
	}
	return b
}

// claim claims up to n rows with one statement and returns them in id order, with the
// claim they share.
func (u *run) claim(ctx context.Context, n int) ([]*row, *claim, error) {
	r := u.r
	start := time.Now() // before the database's now(): the local deadline comes first
	b := r.batch()
	b.Queue(r.claimSQL, n, r.o.Owner, r.o.Lease.Microseconds())
	br := r.ob.pool.SendBatch(ctx, b)
	var rows []*row
	err := func() error {
		defer br.Close()
		if !r.o.DisableAsyncCommit {
			if _, err := br.Exec(); err != nil {
				return err
			}
		}
		res, err := br.Query()
		if err != nil {
			return err
		}
		defer res.Close()
		for res.Next() {
			rw, err := scanRow(res)
			if err != nil {
				return err
			}
			rows = append(rows, rw)
		}
		return res.Err()
	}()
	if err == nil {
		err = br.Close()
	}
	if err != nil {
		return nil, nil, err
	}
	if len(rows) == 0 {
		return nil, nil, nil
	}
	slices.SortFunc(rows, func(a, b *row) int { return cmp.Compare(a.id, b.id) })
	c := &claim{}
	c.ctx, c.cancel = context.WithDeadlineCause(u.life, start.Add(r.o.Lease/2), errLeaseEnding)
	c.left.Store(int64(len(rows)))
	r.stats.inFlight.Add(int64(len(rows)))
	r.stats.claims.Add(1)
	r.stats.claimed.Add(int64(len(rows)))
	return rows, c, nil
}

// outcomeKind is what the completer writes for a row.
type outcomeKind int

const (
	outcomeSent     outcomeKind = iota + 1 // delete
	outcomeRetry                           // release, one more attempt, retry after delay
	outcomeDead                            // move to the dead-letter table
	outcomeReleased                        // release at once, attempts unchanged
)

// outcome is a row's outcome, as the completer marks it.
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
	case errors.Is(err, errBlocked), errors.Is(err, errClosing), errors.Is(err, sender.ErrClosed), hasCode(err, azservicebus.CodeClosed):
		return outcome{kind: outcomeReleased, err: err}
	}
	n := rw.attempts + 1
	retryable := sbkit.IsTransient(err) || errors.Is(err, errLeaseEnding) ||
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

func hasCode(err error, code azservicebus.Code) bool {
	var e *azservicebus.Error
	return errors.As(err, &e) && e.Code == code
}

// nopSender is the destination NewRelay checks the sender options against.
type nopSender struct{}

func (nopSender) SendMessage(context.Context, *azservicebus.Message, *azservicebus.SendMessageOptions) error {
	return nil
}
