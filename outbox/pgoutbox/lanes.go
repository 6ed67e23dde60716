package pgoutbox

import (
	"context"
	"slices"

	"github.com/sbkit/sbkit"
	"github.com/sbkit/sbkit/sender"
)

// The rows of an order that goes through an ordered lane of a sender (a session, a
// partition key, or a transaction's rows sent together) travel one request at a time.
// The rows of such an order that a later claim brings while earlier rows of the order
// are still in the sender wait here, in the relay, and go to the sender once the last
// of those earlier rows has its outcome. In the sender they would wait in the order's
// lane and count against its window: with claims arriving over time, about half of
// that window then waited and half was on the wire, which capped 20 sessions at about
// 1,024 messages per two round trips. Here they count against the relay's own window
// (RelayOptions.MaxInFlight and MaxInFlightBytes), as every claimed row does.
//
// Every row, a claim's or a waiting one, goes to its sender only when the sender's
// window has room for it (sender.Options.MaxInFlightMessages and MaxInFlightBytes,
// counted per destination in run.given and run.givenBytes from the moment a row is
// given until its outcome), so that no send waits in the sender for room while it
// holds sendMu. Room that frees goes first to the orders whose rows are ready, then to
// the claims' rows. A row that finds no room before its context ends was never given:
// it is released, with no attempt and no backoff.

// laned reports whether o's rows go through an ordered lane of the sender.
func (o *order) laned() bool { return !isTx(o.okey) || o.chained }

// hold decides, in the dispatcher, which of a claim's rows (in id order) go to their
// senders (as their windows have room, see give), and returns them, counted in their
// orders' sending; the others wait for the earlier rows of their orders, queued on the
// orders. A claim's rows of an order with nothing in the sender all go.
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
		now = append(now, rw)
	}
	return now
}

// fitLocked counts rw in given when its sender's window has room for it, and reports
// whether it had. rw's weight is its message's estimated size, as the sender counts it:
// after the sender's DefaultTTL, which fitLocked applies first as the sender would, and
// capped at the window's bytes, so that a row always fits an empty window. u.lmu is
// held.
func (u *run) fitLocked(rw *row) bool {
	if rw.weight == 0 {
		if u.r.defaultTTL > 0 && rw.msg.TimeToLive == nil {
			_ = sbkit.SetTTL(rw.msg, u.r.defaultTTL) // as sender.Sender's admit does
		}
		rw.weight = min(sbkit.MessageSize(rw.msg), u.r.windowBytes)
	}
	d := rw.destination
	if u.given[d] >= u.r.window || u.givenBytes[d]+rw.weight > u.r.windowBytes {
		return false
	}
	u.given[d]++
	u.givenBytes[d] += rw.weight
	rw.given = true
	return true
}

// give gives a claim's rows (from hold, in id order) to their senders, as their
// windows have room, after the rows of the orders that are ready. It waits for room
// without holding sendMu, so that handOver may give what it took meanwhile. A row
// whose context ends before it found room is released.
func (u *run) give(rows []*row) {
	for len(rows) > 0 {
		u.lmu.Lock()
		ready, ended := u.takeReadyLocked()
		n := 0
		var now []*row
		for _, rw := range rows {
			if rw.ctx.Err() != nil {
				ended = append(ended, rw)
			} else if u.fitLocked(rw) {
				now = append(now, rw)
			} else {
				break
			}
			n++
		}
		rows = rows[n:]
		var room chan struct{}
		if len(rows) > 0 {
			if u.roomWait == nil {
				u.roomWait = make(chan struct{})
			}
			room = u.roomWait
		}
		u.lmu.Unlock()
		u.release(ended)
		u.sendRows(append(ready, now...))
		if room != nil {
			select {
			case <-room: // an outcome freed room, maybe for another destination
			case <-rows[0].ctx.Done(): // released on the next round
			}
		}
	}
}

// release reports rows the relay never gave to a sender, whose contexts ended (their
// order failed, their claim's lease is ending, or the run aborted), as released: no
// attempt was made, so none is charged and no backoff is due.
func (u *run) release(rows []*row) {
	for _, rw := range rows {
		u.report(rw, outcome{kind: outcomeReleased, err: context.Cause(rw.ctx)})
		u.left(rw)
	}
}

// left records that rw, given to a sender (or about to be, or released before it
// was), has its outcome. The outcome is reported first: a row that failed has stopped
// the later rows of its order, whose contexts have ended by the time they are handed
// over. When rw was its order's last row in the sender, the rows that waited are ready
// to go, and handOver runs when it does not (the room rw leaves in the window may be
// what they wait for). A dispatcher waiting for room is woken.
func (u *run) left(rw *row) {
	u.lmu.Lock()
	if rw.given {
		rw.given = false
		d := rw.destination
		u.givenBytes[d] -= rw.weight
		if u.given[d]--; u.given[d] == 0 {
			delete(u.given, d)
			delete(u.givenBytes, d)
		}
		if u.roomWait != nil {
			close(u.roomWait)
			u.roomWait = nil
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
		// Not in the result hook that called left: sendRows may wait for sendMu, which
		// a round holds while its sends wait for the room the hook frees.
		u.workers.Go(u.handOver)
	}
}

// handOver gives the rows of the ready orders to the senders, as many as their
// windows have room for, until it cannot give any more. An order's rows that find no
// room wait in the relay for those that went: were the sender to take them while it
// waits for room, they would wait in its lane, counted against its window.
func (u *run) handOver() {
	for {
		u.lmu.Lock()
		rows, ended := u.takeReadyLocked()
		if len(rows) == 0 && len(ended) == 0 {
			u.handing = false // the next left starts it again
		}
		u.lmu.Unlock()
		if len(rows) == 0 && len(ended) == 0 {
			return
		}
		u.release(ended)
		u.sendRows(rows)
	}
}

// takeReadyLocked takes from the ready orders, in the order they became ready, the
// rows their senders' windows have room for (counted in given and their orders'
// sending), and the rows whose contexts have ended, which need no room. u.lmu is held.
func (u *run) takeReadyLocked() (rows, ended []*row) {
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
		n := 0
		for n < len(live) && u.fitLocked(live[n]) {
			live[n].counted = true
			n++
		}
		rows = append(rows, live[:n]...)
		o.waiting = live
		if n > 0 {
			o.waiting = slices.Clone(live[n:])
			o.sending = n
		}
		if o.sending == 0 && len(o.waiting) > 0 {
			keep = append(keep, o)
		} else {
			o.ready = false
		}
	}
	clear(u.ready[len(keep):])
	u.ready = keep
	return rows, ended
}

// sendBatch is one round of rows given to the senders: by the dispatcher for a claim,
// or by handOver.
type sendBatch struct {
	u        *run
	destErrs map[string]error // Destinations is asked once per round
	used     map[*sender.Sender]bool
}

// sendRows gives rows, counted in given, to their senders, with sendMu held, and then
// seals the open batches of the senders it used: the rows are all in the senders, and
// the next ones come later than a Linger would wait for. Flush with an ended context
// seals them and returns at once. One round at a time holds sendMu, so that no round's
// Flush seals the batch of an order another round is halfway through giving over.
func (u *run) sendRows(rows []*row) {
	if len(rows) == 0 {
		return
	}
	u.sendMu.Lock()
	defer u.sendMu.Unlock()
	b := sendBatch{u: u, destErrs: make(map[string]error), used: make(map[*sender.Sender]bool)}
	for _, rw := range rows {
		b.send(rw)
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
