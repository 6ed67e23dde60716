package pgoutbox

import (
	"context"
	"time"

	"github.com/cenkalti/backoff/v4"
)

// maxMark bounds the outcomes one mark transaction writes.
const maxMark = 1000

// finalMarkTimeout bounds the one attempt to mark outcomes after the run aborted.
const finalMarkTimeout = time.Second

// complete marks the run's outcomes in the database, many per transaction, until quit
// is closed (after the last outcome).
func (u *run) complete(quit <-chan struct{}) {
	batch := make([]outcome, 0, maxMark)
	for {
		select {
		case oc := <-u.outcomes:
			batch = append(batch[:0], oc)
		case <-quit:
			return
		}
	more:
		for len(batch) < maxMark {
			select {
			case oc := <-u.outcomes:
				batch = append(batch, oc)
			default:
				break more
			}
		}
		marked := u.markWithRetry(batch)
		u.finish(batch, marked)
		clear(batch)
	}
}

// markWithRetry writes batch's outcomes, retrying database errors with backoff until
// they are written or the run aborts; after the abort it tries once more, briefly. It
// reports whether the outcomes were written.
func (u *run) markWithRetry(batch []outcome) bool {
	var bo backoff.BackOff
	for {
		ctx, cancel := u.life, context.CancelFunc(func() {})
		if u.aborted() {
			ctx, cancel = context.WithTimeout(context.Background(), finalMarkTimeout)
		}
		err := u.mark(ctx, batch)
		cancel()
		if err == nil {
			return true
		}
		if u.aborted() && ctx != u.life {
			u.r.dbError(context.Background(), "mark", len(batch), 0, err)
			return false
		}
		u.r.retryDB(u.life, &bo, "mark", len(batch), err) // after an abort: the last attempt
	}
}

// mark writes batch's outcomes in one transaction.
func (u *run) mark(ctx context.Context, batch []outcome) error {
	r := u.r
	var (
		sent     []int64
		deadIDs  []int64
		deadErrs []string
		relIDs   []int64
		relInc   []int32
		relDelay []int64
		relErrs  []*string
	)
	for _, oc := range batch {
		id := oc.row.id
		switch oc.kind {
		case outcomeSent:
			sent = append(sent, id)
		case outcomeDead:
			deadIDs = append(deadIDs, id)
			deadErrs = append(deadErrs, oc.err.Error())
		case outcomeRetry:
			msg := oc.err.Error()
			relIDs, relInc, relDelay, relErrs = append(relIDs, id), append(relInc, 1), append(relDelay, oc.delay.Microseconds()), append(relErrs, &msg)
		case outcomeReleased:
			relIDs, relInc, relDelay, relErrs = append(relIDs, id), append(relInc, 0), append(relDelay, 0), append(relErrs, nil)
		}
	}
	b := r.batch()
	if len(sent) > 0 {
		b.Queue(r.sentSQL, sent)
	}
	if len(deadIDs) > 0 {
		b.Queue(r.deadSQL, deadIDs, deadErrs, r.o.Owner)
	}
	if len(relIDs) > 0 {
		b.Queue(r.releaseSQL, relIDs, relInc, relDelay, relErrs, r.o.Owner)
	}
	return r.ob.pool.SendBatch(ctx, b).Close()
}

// finish accounts for a marked (or abandoned) batch: stats, hooks, the claims' and the
// window's bookkeeping, and a wake-up for the claim loop, which may now claim the rows
// that waited for these.
func (u *run) finish(batch []outcome, marked bool) {
	r := u.r
	var due time.Duration = -1 // the earliest retry of the batch
	for _, oc := range batch {
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
			r.stats.retried.Add(1)
			if due < 0 || oc.delay < due {
				due = oc.delay
			}
			r.o.Logger.Debug("pgoutbox: send failed, retrying", "id", rw.id, "destination", rw.destination, "retryIn", oc.delay, "err", oc.err)
		default:
			e.Outcome = OutcomeReleased
			r.stats.released.Add(1)
		}
		if marked {
			r.result(context.Background(), e)
		}
		rw.claim.done()
	}
	u.addInFlight(-len(batch))
	r.stats.inFlight.Add(-int64(len(batch)))
	u.signal()
	if due >= 0 {
		u.wakeAfter(due)
	}
}

// wakeAfter makes sure the claim loops wake within d (when a retry is due), however
// long PollInterval is. Only the completer calls it.
func (u *run) wakeAfter(d time.Duration) {
	at := time.Now().Add(d)
	if u.retryTimer != nil && !u.retryAt.After(at) && u.retryAt.After(time.Now()) {
		return // an earlier wake-up is already set
	}
	if u.retryTimer == nil {
		u.retryTimer = time.AfterFunc(d, u.signal)
	} else {
		u.retryTimer.Reset(d)
	}
	u.retryAt = at
}
