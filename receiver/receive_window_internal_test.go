package receiver

import (
	"errors"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
)

// received returns n messages locked until at.
func received(n int, at time.Time) []*azservicebus.ReceivedMessage {
	out := make([]*azservicebus.ReceivedMessage, n)
	for i := range out {
		out[i] = &azservicebus.ReceivedMessage{LockedUntil: &at}
	}
	return out
}

// TestReceiveWindowRoundTrips: which calls' durations are receive round trips. A call
// cut by its window leaves 60 credits open; the next one asks for 50, issues no credit,
// gets 50 of the messages already on their way (a short call: not a round trip); the
// next asks for 100 with 10 open, tops the credit up by 90 and gets all 100 (its last
// messages came for its own credit: a round trip). A call that gets fewer than it asked
// for is clean only when it started with no credit open. The window: minWindow at
// first; after the cut, long enough for the batch the next call expects; minWindow again
// once a call got fewer messages than it expected and they were not sent together.
func TestReceiveWindowRoundTrips(t *testing.T) {
	lock := time.Date(2026, 1, 1, 0, 1, 0, 0, time.UTC)
	w := newReceiveWindow(true)
	if o := w.ask(100, time.Hour); o == nil || o.TimeAfterFirstMessage != minWindow {
		t.Fatalf("options %+v, want a window of %v", o, minWindow)
	}
	// 40 of 100 arrive, locked together: the window cut a batch still arriving.
	r := w.observe(100, received(40, lock), nil)
	if !r.clean || !r.cut || r.left != 60 || r.roundTrip {
		t.Fatalf("first call: %+v", r)
	}
	// The broker is backed up: the next call, which expects the 50 of the credits open,
	// waits for them (batchMargin × the 25 µs per message the cut batch came at × 50).
	if o := w.ask(50, time.Hour); o.TimeAfterFirstMessage != 2500*time.Microsecond {
		t.Fatalf("window after a cut batch %v, want 2.5ms", o.TimeAfterFirstMessage)
	}
	r = w.observe(50, received(50, lock), nil)
	if r.clean || r.cut || r.left != 0 || r.roundTrip {
		t.Fatalf("second call: %+v", r)
	}
	w.ask(100, time.Hour)
	r = w.observe(100, received(100, lock), nil)
	if r.clean || r.left != 0 || !r.roundTrip {
		t.Fatalf("third call: %+v", r)
	}
	w.ask(10, time.Hour)
	r = w.observe(10, received(10, lock), nil)
	if !r.clean || !r.roundTrip {
		t.Fatalf("fourth call: %+v", r)
	}
	// Two messages enqueued a while apart: not a cut batch, and the broker had fewer
	// than expected: it is not backed up, and the next window is minWindow again.
	w.ask(10, time.Hour)
	r = w.observe(10, []*azservicebus.ReceivedMessage{received(1, lock)[0], received(1, lock.Add(time.Millisecond))[0]}, nil)
	if !r.clean || r.cut || r.roundTrip || r.left != 8 {
		t.Fatalf("fifth call: %+v", r)
	}
	if o := w.ask(10, time.Hour); o.TimeAfterFirstMessage != minWindow {
		t.Fatalf("window once the broker had fewer than expected %v, want %v", o.TimeAfterFirstMessage, minWindow)
	}
	w.observe(10, nil, nil)
	// A failed call: the link may be new, with no credit.
	w.ask(10, time.Hour)
	if r = w.observe(10, nil, errors.New("link detached")); r.roundTrip || w.open != 0 {
		t.Fatalf("failed call: %+v, %d open", r, w.open)
	}
	// Receive-and-delete: the SDK's default window.
	if o := newReceiveWindow(false).ask(5, time.Hour); o != nil {
		t.Fatalf("receive-and-delete options %+v, want nil", o)
	}
}

// TestReceiveWindowBoundedByBusy: once the broker is backed up, the window covers the
// batch a call expects, but never more than the time the messages waiting keep the
// handlers busy, and never less than minWindow.
func TestReceiveWindowBoundedByBusy(t *testing.T) {
	lock := time.Date(2026, 1, 1, 0, 1, 0, 0, time.UTC)
	for _, tc := range []struct {
		busy, want time.Duration
	}{{time.Hour, 2500 * time.Microsecond}, {2 * time.Millisecond, 2 * time.Millisecond}, {0, minWindow}} {
		w := newReceiveWindow(true)
		w.ask(100, tc.busy)
		w.observe(100, received(40, lock), nil) // a cut batch: 25 µs per message
		if o := w.ask(50, tc.busy); o.TimeAfterFirstMessage != tc.want {
			t.Errorf("busy %v: window %v, want %v", tc.busy, o.TimeAfterFirstMessage, tc.want)
		}
	}
}
