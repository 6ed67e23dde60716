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
// next call go to that call; one that arrives between two calls goes to the SDK's
// releaser (azservicebus receiver.go, newReleaserFunc), a goroutine started when a call
// returns and stopped by the next call. It takes the first message that has arrived
// (even once stopped: go-amqp's Receive hands out what it holds before it looks at the
// context) and releases it: the message comes back unchanged, its delivery count not
// incremented (AMQP 1.0 part 3.4.4, "Released"; Service Bus counts a delivery only on
// an abandon or a lock's expiry, "Messages, payloads, and serialization"). But in
// peek-lock mode go-amqp waits for the broker's answer to a disposition
// (ReceiverSettleModeSecond; go-amqp receiver.go, messageDisposition), and the next
// call waits for the releaser to stop (receiveMessagesImpl, cancelReleaser): one
// message released costs the receive loop a whole round trip, with the places it would
// have asked for idle meanwhile. A call that returns while a batch is still arriving
// does that; with a 1 ms window at a 100 ms round trip, one call in a few did, and the
// wire benchmark ran at half of what the handlers could do.
//
// So the window follows what the calls show of the broker. When the broker had fewer
// messages than a call expected (a queue that is not backed up: the loads most
// consumers run at), the next call's window is minWindow: a wait after the first
// message is not an idle timeout, so every millisecond of it delays every message
// already received (the SDK's 20 ms was 20 ms added to every message). When a call got
// all it expected, or its window cut a batch that was still arriving (at least
// cutMinimum messages that the broker locked within a fraction of the window of one
// another, cutSpread: they were sent together, and more were on their way;
// Stats.CutReceives counts such calls), the broker is backed up, and the next call's
// window covers the batch it expects: batchMargin × the time per message at which cut
// batches arrived × the messages it expects, within [minWindow, maxWindow]. A call
// expects the messages of the credits already open (a batch on its way), or, with none
// open, all it asks for. Such a call returns when its last message arrives, not a
// window later, so the longer window costs nothing while the broker has the messages;
// it leaves no credit open behind a batch, and nothing is released. The window is also
// at most the time the messages waiting for a handler keep the handlers busy (at the
// rate the estimates give): a wait no longer than that delays no handler. Below
// saturation nothing waits, so the window stays minWindow even when a sender's burst
// (a batch it sent, sends stored at once) arrives locked together and looks like a cut
// batch; at saturation the messages of the latest batch wait, and the window covers
// the next. Without LockedUntil (receive-and-delete mode) nothing is released: the
// SDK's default window is kept there.
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
const (
	// minWindow is the window when the broker is not backed up: the spread of the few
	// messages a broker that is not backed up sends at once is tens of microseconds.
	minWindow = time.Millisecond
	// maxWindow bounds the window of a backed-up broker: the most one call waits after
	// its first message when the backlog ends during the call.
	maxWindow = 250 * time.Millisecond
	// batchMargin is how many times a batch's expected spread the window of a backed-up
	// broker is: arrivals slow down when the client's CPU is busy.
	batchMargin = 2
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
	peekLock bool
	window   time.Duration // the window of the call under way; zero for the SDK's default
	perMsg   time.Duration // moving average of the time per message of cut batches; 0 until one was cut
	backed   bool          // the latest call got all it expected, or was cut: the broker is backed up
	open     int           // credits open on the link, at most: released messages spend some
	expect   int           // the messages the call under way expects as one batch
	fresh    bool          // the call under way started with no credits open
	topped   bool          // the call under way issued credit
}

// newReceiveWindow returns the window of a run in peek-lock mode (adaptive, from
// minWindow) or not (the SDK's default).
func newReceiveWindow(peekLock bool) *receiveWindow {
	return &receiveWindow{peekLock: peekLock}
}

// ask records a call asking for n messages while the handlers have work for busy (the
// messages waiting for them, at the rate they drain), and returns its options: nil for
// the SDK's default window.
func (w *receiveWindow) ask(n int, busy time.Duration) *azservicebus.ReceiveMessagesOptions {
	w.fresh, w.topped = w.open == 0, n > w.open
	w.expect = n
	if w.open > 0 {
		w.expect = min(n, w.open)
	}
	w.open = max(w.open, n)
	if !w.peekLock {
		return nil
	}
	w.window = minWindow
	if w.backed {
		batch := batchMargin * w.perMsg * time.Duration(w.expect)
		w.window = max(minWindow, min(maxWindow, batch, busy))
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
		w.open, w.backed = 0, false
		return res
	}
	w.open = max(0, w.open-got)
	if got >= n {
		res.roundTrip = w.topped
		w.backed = true
		return res
	}
	res.left = n - got
	res.cut = w.window > 0 && got >= cutMinimum && !first.IsZero() && last.Sub(first)*cutSpread < w.window
	w.backed = res.cut || got >= w.expect
	if res.cut && got < w.expect {
		// got messages arrived within the window: the batch came at most window / got
		// apart per message.
		d := w.window / time.Duration(got)
		if w.perMsg == 0 {
			w.perMsg = d
		} else {
			w.perMsg += time.Duration(ewmaWeight * float64(d-w.perMsg))
		}
	}
	return res
}
