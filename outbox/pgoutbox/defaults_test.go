package pgoutbox

import (
	"testing"

	"github.com/sbkit/sbkit/sender"
)

// TestDefaultWindowsKeepSendersFull holds the relay's default windows to what their
// docs promise: four times the senders' window, in rows and in bytes, and as many open
// claims of ClaimBatch rows as fill it. With 2,000 rows in 4 claims of 500 a relay
// drained 20 sessions at 75 to 89% of the sender's rate, its claims' rows waiting to be
// marked or for their sessions' earlier rows (docs/benchmarks.md, "The relay's window").
func TestDefaultWindowsKeepSendersFull(t *testing.T) {
	o, err := (*RelayOptions)(nil).withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	if want := 4 * sender.DefaultMaxInFlightMessages; o.MaxInFlight != want {
		t.Errorf("MaxInFlight = %d, want four times the sender's %d", o.MaxInFlight, want)
	}
	if want := 4 * int64(sender.DefaultMaxInFlightBytes); o.MaxInFlightBytes != want {
		t.Errorf("MaxInFlightBytes = %d, want four times the sender's %d", o.MaxInFlightBytes, want)
	}
	if got := o.MaxOpenClaims * o.ClaimBatch; got != o.MaxInFlight {
		t.Errorf("%d open claims of %d rows hold %d rows, want MaxInFlight's %d", o.MaxOpenClaims, o.ClaimBatch, got, o.MaxInFlight)
	}
}
