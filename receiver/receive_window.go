package receiver

import (
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
)

// The receive window: how long one ReceiveMessages call waits, after its first message,
// for the rest of those it asked for ([azservicebus.ReceiveMessagesOptions]
// TimeAfterFirstMessage), and what the calls tell of the receive round trip.
//
// azservicebus returns a call when every message it asked for has arrived, or
// TimeAfterFirstMessage after the first (20 ms by default in peek-lock mode). The
// credits a call leaves open stay on the link: messages that arrive for them during the
// next call go to that call, and those that arrive between two calls are released by
// the SDK (azservicebus receiver.go, newReleaserFunc). The released outcome gives a
// message back unchanged: its delivery count is not incremented (AMQP 1.0 part 3.4.4,
// "Released"; Service Bus counts a delivery only on an abandon or a lock's expiry,
// "Messages, payloads, and serialization"), but it has cost a transfer each way and
// comes back a receive later.
//
// The window is minWindow in peek-lock mode: a wait after the first message is not an
// idle timeout, so every millisecond of it delays every message already received. When
// the broker has fewer messages than asked for (a queue that is not backed up: the
// loads most consumers run at), the SDK's 20 ms was 20 ms added to every message. When
// it has them, the messages a call asks for arrive one after the other over a spread
// that grows with their number (each transfer costs the client's CPU: about 40 µs per
// message of 1 KiB on the 2 cores of docs/benchmarks.md, 40 ms for 1,000); a call that
// waits for the last one holds the first ones, and the places of the messages freed
// meanwhile, for that whole spread before it can ask again. A short window returns
// what has arrived and the receive loop asks again at once: the rest of the batch goes
// to the next call, which starts microseconds later, so only what arrives in between
// is released (Stats.CreditsLeft bounds it, sbtest's Stats.Released counts it; a tenth
// of a percent in the wire benchmarks), and the credits for the places freed meanwhile
// are on their way a whole spread earlier. With the bound on places fixed (65 ×
// MaxConcurrency), that is what keeps 32 handlers busy at a 100 ms round trip.
//
// A call that got fewer than it asked for leaves credits open, so the next call's
// messages may be those, already on their way: its duration says nothing of the round
// trip. The receive round trip the adaptive prefetch needs is the time from asking for a
// message to receiving it. Messages come in the order of the credits they use, so a call
// that issued credit (it asked for more than were open: azservicebus tops the link's
// credit up to what a call asks for, receiveMessagesImpl, creditsToIssue) and got every
// message it asked for returned when a message sent for its own credit arrived: its
// duration is a round trip (and the spread of what came before). The window keeps count
// of the credits open to know which calls issued credit; released messages spend
// credits it does not see, so it may miss one, never count one wrongly.
//
// A call that got fewer than it asked for, at least cutMinimum messages that the broker
// locked within a fraction of the window of one another (cutSpread), was cut: they were
// sent together, and more were on their way; Stats.CutReceives counts such calls.
// Without LockedUntil (receive-and-delete mode) nothing is released: the SDK's default
// window is kept there.
const (
	// minWindow is the window in peek-lock mode: the spread of the few messages a broker
	// that is not backed up sends at once is tens of microseconds.
	minWindow = time.Millisecond
	// cutSpread: a call that got fewer messages than it asked for was cut when its
	// messages' locks lie within window / cutSpread of one another (messages sent as
	// the broker gets them lie about as far apart as the window).
	cutSpread = 8
	// cutMinimum is the fewest messages a call must have got to be called cut: a few
	// messages sent together may be a burst of a sender, not a batch still arriving.
	cutMinimum = 4
)

// receiveWindow gives the window of each receive call of one run's receive loop, and
// counts the credits its calls left open. It is used by the receive loop's goroutine
// only.
type receiveWindow struct {
	window time.Duration // the calls' window; zero for the SDK's default
	open   int           // credits open on the link, at most: released messages spend some
	fresh  bool          // the call under way started with no credits open
	topped bool          // the call under way issued credit
}

// newReceiveWindow returns the window of a run in peek-lock mode (minWindow) or not (the
// SDK's default).
func newReceiveWindow(peekLock bool) *receiveWindow {
	w := &receiveWindow{}
	if peekLock {
		w.window = minWindow
	}
	return w
}

// ask records a call asking for n messages, and returns its options: nil for the SDK's
// default window.
func (w *receiveWindow) ask(n int) *azservicebus.ReceiveMessagesOptions {
	w.fresh, w.topped = w.open == 0, n > w.open
	w.open = max(w.open, n)
	if w.window <= 0 {
		return nil
	}
	return &azservicebus.ReceiveMessagesOptions{TimeAfterFirstMessage: w.window}
}

// windowResult is what a call showed: whether it started with no credits open (then a
// call that got fewer than it asked for took at least a round trip), whether its
// duration is a round trip (it issued credit and got every message it asked for: see
// estimates.observeReceive), whether the window cut a batch that was still arriving,
// and how many credits it left open.
type windowResult struct {
	clean     bool
	roundTrip bool
	cut       bool
	left      int
}

// observe records a call that asked for n messages and returned msgs with err.
func (w *receiveWindow) observe(n int, msgs []*azservicebus.ReceivedMessage, err error) windowResult {
	res := windowResult{clean: w.fresh}
	got := 0
	var first, last time.Time
	for _, m := range msgs {
		if m == nil {
			continue
		}
		got++
		if m.LockedUntil == nil {
			continue
		}
		if t := *m.LockedUntil; first.IsZero() || t.Before(first) {
			first = t
		}
		if t := *m.LockedUntil; t.After(last) {
			last = t
		}
	}
	if got == 0 && err != nil {
		// A failed or cancelled call: the SDK's recovery may replace the link and its
		// credits.
		w.open = 0
		return res
	}
	w.open = max(0, w.open-got)
	if got >= n {
		res.roundTrip = w.topped
		return res
	}
	res.left = n - got
	res.cut = w.window > 0 && got >= cutMinimum && !first.IsZero() && last.Sub(first)*cutSpread < w.window
	return res
}
