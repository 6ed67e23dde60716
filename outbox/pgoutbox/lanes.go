package pgoutbox

import (
	"context"
	"slices"

	"github.com/sbkit/sbkit/sender"
)

// The rows of an order that goes through an ordered lane of a sender (a session, a
// partition key, or a transaction's rows sent together) travel one request at a time.
// The rows of such an order that a later claim brings while earlier rows of the order
// are still in the sender wait here, in the relay, and go to the sender together once
// the last of those earlier rows has its outcome, as many as the sender's window
// (sender.Options.MaxInFlightMessages, counted in run.given) has room for. In the
// sender they would wait in the order's lane and count against its window: with claims
// arriving over time, about half of that window then waited and half was on the wire,
// which capped 20 sessions at about 1,024 messages per two round trips. Here they count
// against the relay's own window (RelayOptions.MaxInFlight and MaxInFlightBytes), as
// every claimed row does, and the sender's window holds what can go on the wire.

// laned reports whether o's rows go through an ordered lane of the sender.
func (o *order) laned() bool { return !isTx(o.okey) || o.chained }

// hold decides, in the dispatcher, which of a claim's rows (in id order) go to their
// senders now, and returns them, counted in given; the others wait for the earlier
// rows of their orders, queued on the orders. A claim's rows of an order with nothing
// in the sender go at once, all of them.
func (u *run) hold(rows []*row) []*row {
	direct := make(map[*order]bool)
	u.lmu.Lock()
	defer u.lmu.Unlock()
	now := rows[:0]
	for _, rw := range rows {
		if o := rw.order; o != nil && o.laned() {
			// waiting is empty when sending is 0 and o is not ready (left makes it
			// ready), so a row queued here always has earlier rows that hand it over.
			if !direct[o] && (o.sending > 0 || o.ready) {
				o.waiting = append(o.waiting, rw)
				continue
			}
			direct[o] = true
			o.sending++
			rw.counted = true
		}
		u.given[rw.destination]++
		rw.given = true
		now = append(now, rw)
	}
	return now
}

// left records that rw, given to a sender (or about to be), has its outcome. The
// outcome is reported first: a row that failed has stopped the later rows of its
// order, whose contexts have ended by the time they are handed over. When rw was its
// order's last row in the sender, the rows that waited are ready to go, and handOver
// runs when it does not (the room rw leaves in the window may be what they wait for).
func (u *run) left(rw *row) {
	u.lmu.Lock()
	if rw.given {
		rw.given = false
		if u.given[rw.destination]--; u.given[rw.destination] == 0 {
			delete(u.given, rw.destination)
		}
	}
	if rw.counted {
		rw.counted = false
		o := rw.order
		o.sending--
		if o.sending == 0 && len(o.waiting) > 0 {
			o.ready = true
			u.ready = append(u.ready, o)
		}
	}
	start := len(u.ready) > 0 && !u.handing
	u.handing = u.handing || start
	u.lmu.Unlock()
	if start {
		// Not in the result hook that called left: a send may wait for room in the
		// window, which frees only after the hook returns.
		u.workers.Go(u.handOver)
	}
}

// handOver gives the rows of the ready orders to the senders, as many as their
// windows have room for, until it cannot give any more, and seals the senders' open
// batches after each round. An order's rows that find no room wait in the relay for
// those that went: were the sender to take them while it waits for room, they would
// wait in its lane, counted against its window.
func (u *run) handOver() {
	for {
		rows, ended := u.takeReady()
		for _, rw := range ended {
			// Its order failed, its claim's lease is ending, or the run aborted: as the
			// sender would report it, with the cause.
			u.report(rw, u.r.classify(rw, context.Cause(rw.ctx)))
		}
		if len(rows) == 0 && len(ended) == 0 {
			return
		}
		u.sendRows(rows, func(rw *row, b sendBatch) { b.send(rw) })
	}
}

// takeReady takes from the ready orders, in the order they became ready, the rows
// their senders' windows have room for (counted in given and their orders' sending),
// and the rows whose contexts have ended, which need no room. When it takes nothing,
// handOver ends: the next left starts it again.
func (u *run) takeReady() (rows, ended []*row) {
	u.lmu.Lock()
	defer u.lmu.Unlock()
	keep := u.ready[:0]
	for _, o := range u.ready {
		live := o.waiting[:0]
		for _, rw := range o.waiting {
			if rw.ctx.Err() != nil {
				ended = append(ended, rw)
			} else {
				live = append(live, rw)
			}
		}
		clear(o.waiting[len(live):])
		o.waiting = live
		n := min(len(live), u.r.window-u.given[o.dest])
		if n > 0 {
			rows = append(rows, live[:n]...)
			for _, rw := range live[:n] {
				rw.counted, rw.given = true, true
			}
			o.waiting = slices.Clone(live[n:])
			o.sending = n
			u.given[o.dest] += n
		}
		if o.sending == 0 && len(o.waiting) > 0 {
			keep = append(keep, o)
		} else {
			o.ready = false
		}
	}
	clear(u.ready[len(keep):])
	u.ready = keep
	if len(rows) == 0 && len(ended) == 0 {
		u.handing = false
	}
	return rows, ended
}

// sendBatch is one round of rows given to the senders: by the dispatcher for a claim,
// or by handOver.
type sendBatch struct {
	u        *run
	destErrs map[string]error // Destinations is asked once per round
	used     map[*sender.Sender]bool
}

// sendRows calls each for each row of rows, with sendMu held, and then seals the open
// batches of the senders it used: the rows are all in the senders, and the next ones
// come later than a Linger would wait for. Flush with an ended context seals them and
// returns at once. One round at a time holds sendMu, so that no round's Flush seals
// the batch of an order another round is halfway through giving over.
func (u *run) sendRows(rows []*row, each func(*row, sendBatch)) {
	u.sendMu.Lock()
	defer u.sendMu.Unlock()
	b := sendBatch{u: u, destErrs: make(map[string]error), used: make(map[*sender.Sender]bool)}
	for _, rw := range rows {
		each(rw, b)
	}
	for s := range b.used {
		_ = s.Flush(ended)
	}
}

// send gives rw to its destination's sender; the result hook reports its outcome,
// accepted or not. When the destination has no sender, rw's outcome is that error.
func (b sendBatch) send(rw *row) {
	u := b.u
	d, err := (*dest)(nil), b.destErrs[rw.destination]
	if err == nil {
		d, err = u.dest(rw.destination)
	}
	if err != nil {
		b.destErrs[rw.destination] = err
		u.report(rw, u.r.classify(rw, err))
		u.left(rw)
		return
	}
	rw.dest = d
	u.rows.Store(rw.msg, rw)
	_, _ = d.s.SendAsync(rw.ctx, rw.msg)
	b.used[d.s] = true
}
