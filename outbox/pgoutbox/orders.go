package pgoutbox

import (
	"context"
	"strings"
	"time"
)

// order is what a run knows of one order (a destination and an order key) while rows of
// it are locked by the run's open claims. It lets the run claim the rows that follow its
// own before those are marked (their predecessor is then one of the run's, sent first
// by the ordered sender), and stop every later row of the order when one fails. Fields
// are guarded by run.omu.
type order struct {
	key     string // destination + "\x00" + order key
	dest    string
	okey    string
	last    int64                              // the highest id locked by the run
	held    int                                // rows locked by the run's open claims
	pins    int                                // claims being made that count on last
	failed  bool                               // a row will be sent again: the later ones wait
	waiters bool                               // a claim found later rows it could not take: skipped until a row is marked
	chained bool                               // a transaction's rows, sent with its OrderKey
	sending int                                // rows given to a sender, outcome unknown (laned orders; see lanes.go; run.lmu)
	waiting []*row                             // rows waiting for those, in id order (run.lmu)
	ready   bool                               // sending is 0 and waiting is not: on run.ready (run.lmu)
	cancels map[*claim]context.CancelCauseFunc // the contexts of the order's rows, per claim
}

// orderLimit bounds the rows of one order the run holds: two claims' worth, so that an
// order whose sends hang (its destination, its session) cannot take the whole window.
func (u *run) orderLimit() int { return 2 * u.r.o.ClaimBatch }

// isTx reports whether an order key is a transaction's (messages without a session or a
// partition key).
func isTx(orderKey string) bool { return strings.HasPrefix(orderKey, "t:") }

// follows reports whether the run may claim the rows right after o's: o's rows go
// through an ordered lane of the sender (a session, a partition key, or a chained
// transaction), none of them failed, and the order holds fewer than limit rows.
func (o *order) follows(limit int) bool {
	return !o.failed && o.held < limit && (o.chained || !isTx(o.okey))
}

// claimParams returns what the next claim must know, and pins the orders whose last
// row it counts on (unpin releases them once the claim's rows are dispatched):
//   - own: the last row of every order whose later rows the run may claim now;
//   - skip: the orders the claim must leave alone, as parallel destination and key
//     lists: the run's orders that failed, hold orderLimit rows, or whose later rows
//     a claim found blocked behind the run's own (until one of its rows is marked:
//     claiming them again before would find them blocked again, and the claim loop
//     would spin), and the orders another relay was found holding (see noteBlocked).
func (u *run) claimParams() (own []int64, skipDest, skipKey []string, pinned []*order) {
	// Never nil: pgx sends a nil slice as NULL, and "x <> ALL(NULL)" is NULL, not true.
	own, skipDest, skipKey = []int64{}, []string{}, []string{}
	u.omu.Lock()
	defer u.omu.Unlock()
	limit := u.orderLimit()
	for _, o := range u.orders {
		switch {
		case o.held == 0:
		case o.waiters:
			// Its later rows were found blocked behind the run's own: they stay so until
			// one of its rows is marked (settle then rescans).
			skipDest, skipKey = append(skipDest, o.dest), append(skipKey, o.okey)
		case o.follows(limit):
			own = append(own, o.last)
			o.pins++
			pinned = append(pinned, o)
		case o.failed || o.held >= limit:
			skipDest, skipKey = append(skipDest, o.dest), append(skipKey, o.okey)
		}
	}
	now := time.Now()
	for key, until := range u.contended {
		if now.After(until) {
			delete(u.contended, key)
			u.rescan.Store(true) // its rows may be behind the scan position
			continue
		}
		dest, okey, _ := strings.Cut(key, "\x00")
		skipDest, skipKey = append(skipDest, dest), append(skipKey, okey)
	}
	return own, skipDest, skipKey, pinned
}

// unpin releases the orders claimParams pinned.
func (u *run) unpin(pinned []*order) {
	u.omu.Lock()
	defer u.omu.Unlock()
	for _, o := range pinned {
		o.pins--
		u.dropLocked(o)
	}
}

// dropLocked forgets o when no claim holds or counts on it.
func (u *run) dropLocked(o *order) {
	if o.held == 0 && o.pins == 0 && u.orders[o.key] == o {
		delete(u.orders, o.key)
	}
}

// contendedFor is how long the claims leave an order alone that another relay holds.
const contendedFor = 100 * time.Millisecond

// noteBlocked records the orders of rows a claim found but could not take because an
// earlier row of their order is locked by a transaction that is not one of the run's
// claims (another relay's): the next claims leave them alone for contendedFor (at most
// PollInterval), instead of finding (and locking) their rows again. The relay that holds
// them goes on with them; if it dies, they wait for this relay's next claim.
func (u *run) noteBlocked(blocked []*row) {
	u.omu.Lock()
	defer u.omu.Unlock()
	until := time.Now().Add(min(u.r.o.PollInterval, contendedFor))
	for _, rw := range blocked {
		key := rw.destination + "\x00" + rw.orderKey
		o := u.orders[key]
		switch {
		case o != nil && o.held > 0:
			o.waiters = true // the run's own rows hold it back
		case o != nil:
			// The claim counted on the order's last row (o is pinned), and every row the
			// run held of it was marked while the claim ran: the row before rw was the
			// run's own (marks may finish out of claim order, so o.last may have gone
			// first), and no mark is left to wake the claim loop. Claim again at once.
			u.rescan.Store(true)
			u.signal()
		default:
			u.contended[key] = until
		}
	}
}

// join makes the claim's rows members of their orders, in id order, and decides for
// each whether it is sent (with the context it is sent with) or released at once
// because an earlier row of its order failed. It runs before any of the rows is given
// to a sender.
func (u *run) join(c *claim, rows []*row) {
	keys := make([]string, len(rows))
	count := make(map[string]int, len(rows))
	// The orders this join makes. Not a field of order: an order that kept the claim that
	// made it would keep that claim's rows, their orders, and so every claim before alive.
	made := make(map[*order]bool)
	for i, rw := range rows {
		keys[i] = rw.destination + "\x00" + rw.orderKey
		count[keys[i]]++
	}
	u.omu.Lock()
	defer u.omu.Unlock()
	for i, rw := range rows {
		key := keys[i]
		o := u.orders[key]
		if o == nil {
			o = &order{key: key, dest: rw.destination, okey: rw.orderKey, chained: isTx(rw.orderKey) && count[key] > 1}
			u.orders[key] = o
			made[o] = true
		}
		o.held++
		o.last = max(o.last, rw.id)
		rw.order = o
		switch {
		case o.failed || rw.stranded:
			rw.ctx = nil // released at once
		case !made[o] && isTx(o.okey) && !o.chained:
			// The transaction has a row in flight outside an ordered lane (the claim
			// found this one before it: a requeued row): it waits for that one.
			rw.ctx = nil
		case isTx(o.okey) && !o.chained:
			// A transaction's only row in flight: no later row of it can be claimed
			// before this one is marked, so it needs no context of its own, and it
			// shares batches with any other row.
			rw.ctx = c.ctx
		default:
			cancel := o.cancels[c]
			if cancel == nil {
				if o.cancels == nil {
					o.cancels = make(map[*claim]context.CancelCauseFunc)
				}
				var ctx context.Context
				ctx, cancel = context.WithCancelCause(c.ctx) // ends with the claim at the latest
				o.cancels[c] = cancel
				c.orderCtx[o] = ctx
			}
			rw.ctx = c.orderCtx[o]
			rw.chained = o.chained
		}
	}
}

// fail stops the later rows of rw's order: the ordered sender drops those waiting
// (their context ends before the order's next request), the claims being made release
// theirs, and no claim takes the order's next rows until every row of it is marked.
func (u *run) fail(rw *row) {
	u.omu.Lock()
	defer u.omu.Unlock()
	o := rw.order
	if o == nil || o.failed {
		return
	}
	o.failed = true
	for _, cancel := range o.cancels {
		cancel(errBlocked)
	}
}

// settle removes a claim's rows from their orders once the claim's transaction ended.
func (u *run) settle(c *claim) {
	u.omu.Lock()
	defer u.omu.Unlock()
	limit := u.orderLimit()
	for _, rw := range c.rows {
		o := rw.order
		if o == nil {
			continue
		}
		if o.held == limit || (o.held == 1 && o.failed) || o.waiters {
			u.rescan.Store(true) // rows the claims left behind may be free now
			o.waiters = false    // the next claim looks at them again
		}
		o.held--
		if cancel := o.cancels[c]; cancel != nil {
			delete(o.cancels, c)
			cancel(nil)
		}
		u.dropLocked(o)
	}
}
