package receiver

import (
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
)

// The receive window: how long one ReceiveMessages call waits, after its first message,
// for the rest of those it asked for ([azservicebus.ReceiveMessagesOptions]
// TimeAfterFirstMessage).
//
// azservicebus returns a call when every message it asked for has arrived, or
// TimeAfterFirstMessage after the first (20 ms by default in peek-lock mode). The
// credits a call leaves open stay on the link, and until the next call the SDK releases
// every message that arrives for them (azservicebus receiver.go, newReleaserFunc). The
// released outcome gives a message back unchanged: its delivery count is not
// incremented (AMQP 1.0 part 3.4.4, "Released"; Service Bus counts a delivery only on an
// abandon or a lock's expiry, "Messages, payloads, and serialization"), but it has cost
// a transfer each way and comes back a receive later. Messages that arrive during the
// next call go to that call.
//
// The messages a call asks for are sent by the broker together, locked at about the
// same moment, and arrive one after the other over a spread that grows with their number
// (each transfer costs the client's CPU: about 40 µs per message of 1 KiB on the 2 cores
// of docs/benchmarks.md, so 40 ms for 1,000). A window shorter than that spread cuts the
// batch: the call returns part of it, its credits stay open, and what arrives before the
// next call is released. A window longer than the spread costs nothing when the broker
// has the messages (the call returns at its last one), but when it has fewer than asked
// for (a queue that is not backed up: the loads most consumers run at) every call waits
// out the whole window, and every message with it.
//
// So the window follows what the calls show:
//   - a call that got every message it asked for keeps the window: it returned at the
//     last one, not at the window;
//   - a call that got fewer, whose messages the broker locked within a fraction of the
//     window of one another (cutSpread), was cut: they were sent together, and more
//     were on their way. The window doubles, up to max(defaultWindow, 2 × the receive
//     round trip): the spread of a batch never exceeds the round trip that brings it by
//     much, and the SDK's own default is the floor of that bound;
//   - a call that got fewer, whose messages were locked as far apart as the window lets
//     them be (or one message), got what the broker had: it sent them as they came. The
//     window halves, down to minWindow.
//
// A call that got fewer than it asked for leaves credits open: the next call's messages
// may be those, already on their way, so its duration says nothing of the round trip
// (see clean). Without LockedUntil (receive-and-delete mode) nothing is released and
// nothing tells a cut batch from a trickle: the SDK's default window is kept.
const (
	// minWindow is the shortest window: the spread of the few messages a broker that is
	// not backed up sends at once is tens of microseconds.
	minWindow = time.Millisecond
	// defaultWindow is the SDK's TimeAfterFirstMessage in peek-lock mode, the floor of
	// the longest window.
	defaultWindow = 20 * time.Millisecond
	// cutSpread: a call that got fewer messages than it asked for was cut when its
	// messages' locks lie within window / cutSpread of one another. Messages sent as the
	// broker gets them lie about as far apart as the window; two of them come closer than
	// an eighth of it about a quarter of the time, and the halving that follows the
	// other three quarters keeps the window at its minimum.
	cutSpread = 8
)

// receiveWindow sizes the window of each receive call of one run's receive loop, and
// tells which calls started with no credits open. It is used by the receive loop's
// goroutine only.
type receiveWindow struct {
	window time.Duration // the next call's window; zero for the SDK's default
	open   bool          // the previous call returned fewer messages than it asked for
}

// newReceiveWindow returns the window of a run in peek-lock mode (sized) or not (the
// SDK's default).
func newReceiveWindow(peekLock bool) *receiveWindow {
	w := &receiveWindow{}
	if peekLock {
		w.window = minWindow
	}
	return w
}

// options returns the next call's options: nil for the SDK's default.
func (w *receiveWindow) options() *azservicebus.ReceiveMessagesOptions {
	if w.window <= 0 {
		return nil
	}
	return &azservicebus.ReceiveMessagesOptions{TimeAfterFirstMessage: w.window}
}

// windowResult is what a call showed: whether it started with no credits open (its
// duration is a receive round trip, see estimates.observeReceive), whether the window
// cut a batch that was still arriving, and how many credits it left open.
type windowResult struct {
	clean bool
	cut   bool
	left  int
}

// observe records a call that asked for n messages and returned msgs with err, and sizes
// the next window; rtt is the receive round trip measured so far (zero if none).
func (w *receiveWindow) observe(n int, msgs []*azservicebus.ReceivedMessage, err error, rtt time.Duration) windowResult {
	res := windowResult{clean: !w.open}
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
	if got >= n || got == 0 {
		// Every message asked for (credits used up), or none: an error or a cancelled
		// call, which leave the credits as the SDK's recovery leaves them.
		w.open = got == 0 && err == nil
		return res
	}
	w.open = true
	res.left = n - got
	if w.window <= 0 {
		return res
	}
	if got >= 2 && !first.IsZero() && last.Sub(first)*cutSpread < w.window {
		res.cut = true
		w.window = min(2*w.window, maxWindow(rtt))
	} else {
		w.window = max(w.window/2, minWindow)
	}
	return res
}

// maxWindow is the longest window for a receive round trip rtt: max(defaultWindow,
// 2 × rtt).
func maxWindow(rtt time.Duration) time.Duration { return max(defaultWindow, 2*rtt) }
