package pgoutbox_test

import (
	"testing"

	"github.com/sbkit/sbkit/outbox/pgoutbox"
	"github.com/sbkit/sbkit/sender"
)

// TestDefaultWindowsKeepSendersFull holds the relay's default windows to what their
// docs promise: four times the senders' window, in rows and in bytes, and open claims
// enough to fill it. With half of that (2,000 rows, 4 claims) a relay drained 20
// sessions at 75–79% of the sender's rate, the claims' rows waiting to be marked or
// for their sessions' earlier rows (BenchmarkRelay/relay/sessions).
func TestDefaultWindowsKeepSendersFull(t *testing.T) {
	if got, want := pgoutbox.DefaultMaxInFlight, 4*sender.DefaultMaxInFlightMessages; got != want {
		t.Errorf("DefaultMaxInFlight = %d, want four times the sender's %d", got, want)
	}
	if got, want := int64(pgoutbox.DefaultMaxInFlightBytes), 4*int64(sender.DefaultMaxInFlightBytes); got != want {
		t.Errorf("DefaultMaxInFlightBytes = %d, want four times the sender's %d", got, want)
	}
	if got := pgoutbox.DefaultMaxOpenClaims * pgoutbox.DefaultClaimBatch; got < pgoutbox.DefaultMaxInFlight {
		t.Errorf("DefaultMaxOpenClaims claims of DefaultClaimBatch hold %d rows, less than DefaultMaxInFlight %d", got, pgoutbox.DefaultMaxInFlight)
	}
}
