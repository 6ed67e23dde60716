package pgoutbox_test

import (
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/sbkit/sbkit"
	"github.com/sbkit/sbkit/outbox/pgoutbox"
	"github.com/sbkit/sbkit/sender"
)

// claimLoopParked reports whether a relay's claim loop waits in its select for a
// wake-up or its poll (not in a claim, nor in a retry's wait).
func claimLoopParked() bool {
	buf := make([]byte, 1<<20)
	for _, g := range strings.Split(string(buf[:runtime.Stack(buf, true)]), "\n\n") {
		// runtime.Stack leaves the runtime's frames out: the top frame is the select's.
		lines := strings.SplitN(g, "\n", 3)
		if len(lines) >= 2 && strings.Contains(lines[0], "[select") &&
			strings.HasPrefix(lines[1], "github.com/sbkit/sbkit/outbox/pgoutbox.(*run).claimLoop(") {
			return true
		}
	}
	return false
}

// TestClaimLoopDoesNotSpinOnBlockedRows: while the first row of a transaction is in
// flight, the claims that find the transaction's next rows blocked behind it do not
// claim again and again: with polling an hour apart and no LISTEN, the claim loop comes
// to rest after a handful of claim statements until the row's outcome wakes it. The
// rows are then sent.
func TestClaimLoopDoesNotSpinOnBlockedRows(t *testing.T) {
	for _, tt := range []struct {
		name       string
		claimBatch int
		before     int // single-row transactions committed first
		tx         int // rows of the transaction
	}{
		{"ClaimBatch 1, a transaction of 2", 1, 0, 2},
		// The first claim takes the transaction's first row alone, after the others;
		// the next claims find the rest blocked behind it.
		{"defaults, a transaction of 2 claims behind a claim less one", 0, pgoutbox.DefaultClaimBatch - 1, 2 * pgoutbox.DefaultClaimBatch},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			e.queue("q", nil)
			claims := e.watchClaims()
			ob := e.ob
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
			r, err := pgoutbox.NewRelay(ob, func(string) (sbkit.MessageSender, error) { return g, nil },
				&pgoutbox.RelayOptions{ClaimBatch: tt.claimBatch, PollInterval: time.Hour, DisableListen: true,
					Sender: &sender.Options{Retry: noRetry}})
			if err != nil {
				t.Fatal(err)
			}
			for i := range tt.before {
				e.add("q", msg(idOf("s", i, 0), "x"))
			}
			var tx []*azservicebus.Message
			for i := range tt.tx {
				tx = append(tx, msg(idOf("t", 0, i), "y"))
			}
			e.add("q", tx...)
			runRelay(t, r)
			<-g.started
			// The sends are held: whatever the relay claims now, it claims while the
			// transaction's first row is in flight. The claim loop must come to rest
			// (waiting for a wake-up or its poll) after a few claims.
			eventually(t, "the claim loop to rest, or to spin", func() bool {
				return claims.count() > 8 || claimLoopParked()
			})
			if n := claims.count(); n > 8 {
				t.Errorf("%d claim statements while a row was in flight, want a few (at most 8)", n)
			}
			close(g.open)
			opened.Store(true)
			e.drained(r)
			if st := r.Stats(); st.Sent != int64(tt.before+tt.tx) {
				t.Fatalf("stats %+v", st)
			}
		})
	}
}
