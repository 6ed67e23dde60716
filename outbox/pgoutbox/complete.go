package pgoutbox

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// finalMarkTimeout bounds the marks written after the run aborted.
const finalMarkTimeout = time.Second

// mark writes a claim's outcomes in its transaction and commits it: sent rows are
// deleted, dead-lettered ones moved, failed ones given their next attempt; released
// rows are left as they were, and the commit frees them all. When the mark fails (the
// connection broke, the server ended the transaction, the run aborted and the database
// did not answer within finalMarkTimeout) the transaction ends without it: the rows are
// back as they were, and a sent row is sent again with the same MessageID (dropped by
// duplicate detection).
func (u *run) mark(c *claim) {
	err := u.r.writeMarks(u.markCtx, c.conn, c.outcomes)
	if err != nil {
		u.r.dbError(context.Background(), "mark", len(c.outcomes), 0, err)
	}
	u.conns.put(c.conn) // closes it unless the transaction ended
	c.cancel()
	u.settle(c)
	u.finish(c, err == nil)
}

// writeMarks writes outcomes and commits, in one round trip. A row to dead-letter whose
// id the dead-letter table already holds stays, with its next attempt: its outcome
// becomes that retry, with an error wrapping [ErrDeadLetterIDTaken].
func (r *Relay) writeMarks(ctx context.Context, conn *pgx.Conn, outcomes []outcome) error {
	var (
		sent      []int64
		deadIDs   []int64
		deadErrs  []string
		takenErrs []string
		takenWait []int64
		retIDs    []int64
		retDelay  []int64
		retErrs   []string
		wait      = make(map[int64]time.Duration) // the next attempt of a row that cannot be dead-lettered
	)
	for _, oc := range outcomes {
		id := oc.row.id
		switch oc.kind {
		case outcomeSent:
			sent = append(sent, id)
		case outcomeDead:
			deadIDs, deadErrs = append(deadIDs, id), append(deadErrs, errText(oc.err))
			takenErrs = append(takenErrs, errText(deadTaken(oc.err)))
			wait[id] = r.retryDelay(oc.row.attempts + 1)
			takenWait = append(takenWait, wait[id].Microseconds())
		case outcomeRetry:
			retIDs, retDelay, retErrs = append(retIDs, id), append(retDelay, oc.delay.Microseconds()), append(retErrs, errText(oc.err))
		}
	}
	b := &pgx.Batch{}
	if len(sent) > 0 {
		b.Queue(r.sentSQL, sent)
	}
	taken := make(map[int64]bool)
	if len(deadIDs) > 0 {
		b.Queue(r.deadSQL, deadIDs, deadErrs)
		b.Queue(r.deadTakenSQL, deadIDs, takenWait, takenErrs).Query(func(rows pgx.Rows) error {
			var id int64
			_, err := pgx.ForEachRow(rows, []any{&id}, func() error {
				taken[id] = true
				return nil
			})
			return err
		})
	}
	if len(retIDs) > 0 {
		b.Queue(r.retrySQL, retIDs, retDelay, retErrs)
	}
	b.Queue("COMMIT")
	if err := conn.SendBatch(ctx, b).Close(); err != nil {
		return err
	}
	for i := range outcomes {
		if oc := &outcomes[i]; oc.kind == outcomeDead && taken[oc.row.id] {
			oc.kind, oc.err, oc.delay = outcomeRetry, deadTaken(oc.err), wait[oc.row.id]
		}
	}
	return nil
}

// deadTaken is the error of a row that could not move to the dead-letter table.
func deadTaken(err error) error {
	return fmt.Errorf("%w; the send's error: %w", ErrDeadLetterIDTaken, err)
}

// errText is err's message as PostgreSQL's text holds it (valid UTF-8, no NUL).
func errText(err error) string {
	return strings.ReplaceAll(strings.ToValidUTF8(err.Error(), "\uFFFD"), "\x00", "\uFFFD")
}

// finish accounts for a marked (or abandoned) claim: stats, hooks, the window, and a
// wake-up for the claim loop, which may now claim the rows that waited for these.
func (u *run) finish(c *claim, marked bool) {
	r := u.r
	var due time.Duration = -1 // the earliest retry of the claim
	for _, oc := range c.outcomes {
		rw := oc.row
		e := RelayResult{ID: rw.id, Destination: rw.destination, Outcome: OutcomeSent, Attempts: rw.attempts, Err: oc.err}
		if rw.msg != nil && rw.msg.MessageID != nil {
			e.MessageID = *rw.msg.MessageID
		}
		switch {
		case !marked:
			r.stats.abandoned.Add(1)
		case oc.kind == outcomeSent:
			e.Attempts++
			r.stats.sent.Add(1)
		case oc.kind == outcomeDead:
			e.Attempts++
			e.Outcome = OutcomeDeadLettered
			r.stats.dead.Add(1)
			r.o.Logger.Warn("pgoutbox: message dead-lettered", "id", rw.id, "destination", rw.destination, "messageID", e.MessageID, "err", oc.err)
		case oc.kind == outcomeRetry:
			e.Attempts++
			e.Outcome, e.Retry = OutcomeRetry, oc.delay
			r.stats.sendRetries.Add(1)
			if due < 0 || oc.delay < due {
				due = oc.delay
			}
			if errors.Is(oc.err, ErrDeadLetterIDTaken) {
				r.o.Logger.Error("pgoutbox: message not dead-lettered, its id is taken in the dead-letter table", "id", rw.id,
					"destination", rw.destination, "messageID", e.MessageID, "retryIn", oc.delay, "err", oc.err)
			} else {
				r.o.Logger.Debug("pgoutbox: send failed, retrying", "id", rw.id, "destination", rw.destination, "retryIn", oc.delay, "err", oc.err)
			}
		default:
			e.Outcome = OutcomeReleased
			r.stats.released.Add(1)
		}
		if !marked || oc.kind != outcomeSent {
			u.rescan.Store(true) // it, or the rows after it, may be free now
		}
		if marked {
			r.result(context.Background(), e)
		}
	}
	r.stats.inFlight.Add(-int64(len(c.outcomes)))
	var size int64
	for _, rw := range c.rows {
		size += rw.size
	}
	u.addBytes(-size)
	u.giveBack(len(c.outcomes), true)
	u.signal()
	if due >= 0 {
		u.wakeAfter(due)
	}
}

// wakeAfter makes sure the claim loop wakes within d (when a retry is due), however
// long PollInterval is.
func (u *run) wakeAfter(d time.Duration) {
	u.retryMu.Lock()
	defer u.retryMu.Unlock()
	at := time.Now().Add(d)
	if u.retryTimer != nil && !u.retryAt.After(at) && u.retryAt.After(time.Now()) {
		return // an earlier wake-up is already set
	}
	if u.retryTimer == nil {
		u.retryTimer = time.AfterFunc(d, func() {
			u.rescan.Store(true)
			u.signal()
		})
	} else {
		u.retryTimer.Reset(d)
	}
	u.retryAt = at
}
