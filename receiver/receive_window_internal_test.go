package receiver

import (
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

// TestReceiveWindowCreditAges: the round trip a call gives is the mean age of the
// credits its messages used, oldest first, not its duration. A call cut by its window
// leaves 60 credits open; the next one tops the credit up to 100 and gets all 100 a
// millisecond later: 60 asked for 101 ms before, 40 asked for 1 ms before, a mean of
// 61 ms. The call after it finds no credit open (it issued credit and got all it asked
// for), so what the SDK released meanwhile does not age the model; a call that gets
// fewer than it asked for gives no age, and lowers the average only when it started
// with no credit open.
func TestReceiveWindowCreditAges(t *testing.T) {
	ms := time.Millisecond
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	lock := t0.Add(time.Minute)
	w := newReceiveWindow(true)
	if o := w.ask(100, t0); o == nil || o.TimeAfterFirstMessage != minWindow {
		t.Fatalf("options %+v, want a window of %v", o, minWindow)
	}
	// 40 of 100 arrive, locked together: the window cut a batch still arriving.
	r := w.observe(100, received(40, lock), nil, t0.Add(100*ms))
	if !r.clean || !r.cut || r.left != 60 || r.age != 0 {
		t.Fatalf("first call: %+v", r)
	}
	w.ask(100, t0.Add(100*ms))
	r = w.observe(100, received(100, lock), nil, t0.Add(101*ms))
	if want := (60*101*ms + 40*1*ms) / 100; r.clean || r.cut || r.left != 0 || r.age != want {
		t.Fatalf("second call: %+v, want age %v", r, want)
	}
	if w.open != 0 || len(w.asks) != 0 {
		t.Fatalf("after a full call that issued credit: %d open, %v", w.open, w.asks)
	}
	w.ask(10, t0.Add(200*ms))
	r = w.observe(10, received(10, lock), nil, t0.Add(207*ms))
	if !r.clean || r.age != 7*ms {
		t.Fatalf("third call: %+v, want age 7ms", r)
	}
	// Two messages enqueued a while apart: not a cut batch.
	w.ask(10, t0.Add(300*ms))
	r = w.observe(10, []*azservicebus.ReceivedMessage{received(1, lock)[0], received(1, lock.Add(ms))[0]}, nil, t0.Add(350*ms))
	if !r.clean || r.cut || r.age != 0 || r.left != 8 {
		t.Fatalf("fourth call: %+v", r)
	}
	// Receive-and-delete: the SDK's default window.
	if o := newReceiveWindow(false).ask(5, t0); o != nil {
		t.Fatalf("receive-and-delete options %+v, want nil", o)
	}
}
