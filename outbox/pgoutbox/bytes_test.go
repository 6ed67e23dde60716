package pgoutbox_test

import (
	"strings"
	"sync/atomic"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/sbkit/sbkit"
	"github.com/sbkit/sbkit/outbox/pgoutbox"
	"github.com/sbkit/sbkit/sender"
)

// TestInFlightBoundedByBytes: with sends held, the relay reads no more rows into memory
// than MaxInFlightBytes allows (here 1 MiB: 4 rows of 200 KiB, and the one that starts
// within it), whatever MaxInFlight and ClaimBatch allow; the rows then all go, in order.
func TestInFlightBoundedByBytes(t *testing.T) {
	e := newEnv(t)
	q := e.queue("q", nil)
	s, err := e.ns.NewSender("q", nil)
	if err != nil {
		t.Fatal(err)
	}
	g := newGateSender(s)
	var opened atomic.Bool
	defer func() {
		if !opened.Load() {
			close(g.open)
		}
	}()
	r, err := pgoutbox.NewRelay(e.ob, func(string) (sbkit.MessageSender, error) { return g, nil },
		&pgoutbox.RelayOptions{MaxInFlightBytes: 1 << 20, DisableListen: true,
			Sender: &sender.Options{Retry: noRetry}})
	if err != nil {
		t.Fatal(err)
	}
	body := strings.Repeat("x", 200<<10)
	var msgs []*azservicebus.Message
	for i := range 40 {
		msgs = append(msgs, &azservicebus.Message{MessageID: ptr(idOf("b", 0, i)), Body: []byte(body), SessionID: ptr("s")})
	}
	e.add("q", msgs...)
	runRelay(t, r)
	<-g.started
	eventually(t, "the claim loop to rest", claimLoopParked)
	if n := r.Stats().InFlight; n > 6 {
		t.Errorf("%d rows of 200 KiB in flight, want at most 6 with MaxInFlightBytes 1 MiB", n)
	}
	close(g.open)
	opened.Store(true)
	e.drained(r)
	if active := q.Counts().Active; active != 40 {
		t.Fatalf("broker holds %d", active)
	}
	for i, m := range q.Active() { // in the order the broker stored them
		if m.MessageID != idOf("b", 0, i) {
			t.Fatalf("message %d stored is %s, want %s", i, m.MessageID, idOf("b", 0, i))
		}
	}
}
