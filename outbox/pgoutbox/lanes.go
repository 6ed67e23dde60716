package pgoutbox

import (
	"context"

	"github.com/sbkit/sbkit/sender"
)

// The rows of an order that goes through an ordered lane of a sender (a session, a
// partition key, or a transaction's rows sent together) travel one request at a time.
// The rows of such an order that a later claim brings while earlier rows of the order
// are still in the sender wait here, in the relay, and go to the sender together once
// the last of those earlier rows has its outcome. In the sender they would wait in the
// order's lane and count against its window (sender.Options.MaxInFlightMessages): with
// claims arriving over time, about half of that window then waited and half was on the
// wire, which capped 20 sessions at about 1,024 messages per two round trips. Here
// they count against the relay's own window (RelayOptions.MaxInFlight and
// MaxInFlightBytes), as every claimed row does, and the sender's window holds what is
// on the wire.

// laned reports whether o's rows go through an ordered lane of the sender.
func (o *order) laned() bool { return !isTx(o.okey) || o.chained }

// hold decides, in the dispatcher, whether rw goes to its sender now (false) or waits
// for the earlier rows of its order (true: it is queued on the order). A claim's rows of
// an order with nothing in the sender go at once, all of them (direct records those
// orders for the claim); the others wait.
func (u *run) hold(rw *row, direct map[*order]bool) bool {
	u.omu.Lock()
	defer u.omu.Unlock()
	o := rw.order
	if o == nil || !o.laned() {
		return false
	}
	// waiting is empty when sending is 0 (left hands it over), so a row queued here
	// always has earlier rows in the sender whose outcomes will hand it over.
	if !direct[o] && o.sending > 0 {
		o.waiting = append(o.waiting, rw)
		return true
	}
	direct[o] = true
	o.sending++
	rw.counted = true
	return false
}

// left records that rw, given to a sender (or about to be), has its outcome. The
// outcome is reported first: a row that failed has stopped the later rows of its
// order, whose contexts have ended by the time they are handed over. When rw was its
// order's last row in the sender, the rows that waited go to the handover goroutine.
func (u *run) left(rw *row) {
	u.omu.Lock()
	if !rw.counted {
		u.omu.Unlock()
		return
	}
	rw.counted = false
	o := rw.order
	o.sending--
	var next []*row
	if o.sending == 0 && len(o.waiting) > 0 {
		next, o.waiting = o.waiting, nil
		o.sending = len(next)
		for _, w := range next {
			w.counted = true
		}
	}
	u.omu.Unlock()
	if len(next) == 0 {
		return
	}
	u.handMu.Lock()
	u.handq = append(u.handq, next...)
	start := !u.handing
	u.handing = true
	u.handMu.Unlock()
	if start {
		// Not in the result hook that called left: a send may wait for room in the
		// window, which frees only after the hook returns.
		u.workers.Go(u.handOver)
	}
}

// handOver gives the rows that waited for their orders to the senders, until none
// waits, and seals the senders' open batches after each round.
func (u *run) handOver() {
	for {
		u.handMu.Lock()
		rows := u.handq
		u.handq = nil
		if len(rows) == 0 {
			u.handing = false
			u.handMu.Unlock()
			return
		}
		u.handMu.Unlock()
		u.sendRows(rows, func(rw *row, used sendBatch) {
			if err := rw.ctx.Err(); err != nil {
				// Its order failed, its claim's lease is ending, or the run aborted: as
				// the sender would report it, with the cause.
				u.report(rw, u.r.classify(rw, context.Cause(rw.ctx)))
				u.left(rw)
				return
			}
			used.send(rw)
		})
	}
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
