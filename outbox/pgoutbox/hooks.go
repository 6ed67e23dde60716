package pgoutbox

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"
)

// Hook is an observer of a [Relay]: a value implementing any of [RelayResultHook] and
// [RelayErrorHook]. [NewRelay] refuses a value that implements neither (an error
// wrapping [ErrInvalidOptions]), so that a misspelt method is not silently ignored.
// Hooks run synchronously on the relay's goroutines, possibly concurrently, and must be
// fast; a panic in a hook is recovered and logged. To observe the sends themselves
// (spans, retries, batches), use sender hooks ([RelayOptions.Sender],
// [RelayOptions.SenderHooks]).
type Hook any

// hookNames are the interfaces a [Hook] may implement, for errors.
const hookNames = "RelayResultHook, RelayErrorHook"

// isHook reports whether x implements one of the interfaces of hookNames.
func isHook(x any) bool {
	switch x.(type) {
	case RelayResultHook, RelayErrorHook:
		return true
	}
	return false
}

// RelayResultHook is told what became of every row the relay claimed, once the outcome
// is written to the database.
type RelayResultHook interface {
	OnRelayResult(ctx context.Context, e RelayResult)
}

// RelayResultHookFunc adapts a function to a [RelayResultHook].
type RelayResultHookFunc func(ctx context.Context, e RelayResult)

// OnRelayResult calls f.
func (f RelayResultHookFunc) OnRelayResult(ctx context.Context, e RelayResult) { f(ctx, e) }

// RelayErrorHook is told every failed database call of the relay (claim, mark,
// listen), as a [*RelayError]. A claim or a listen is retried after its Retry; a mark
// is not (its claim's rows are back in the outbox as they were; Retry is 0).
type RelayErrorHook interface {
	OnRelayError(ctx context.Context, err *RelayError)
}

// RelayErrorHookFunc adapts a function to a [RelayErrorHook].
type RelayErrorHookFunc func(ctx context.Context, err *RelayError)

// OnRelayError calls f.
func (f RelayErrorHookFunc) OnRelayError(ctx context.Context, err *RelayError) { f(ctx, err) }

// Outcome is what a relay did with a claimed row.
type Outcome int

const (
	// OutcomeSent: the broker accepted the message; the row is deleted.
	OutcomeSent Outcome = iota + 1
	// OutcomeRetry: the send failed; the row waits for its next attempt (RelayResult.Retry
	// says when).
	OutcomeRetry
	// OutcomeDeadLettered: the broker refused the message for good, or its retries ran
	// out: the row moved to the dead-letter table with the error.
	OutcomeDeadLettered
	// OutcomeReleased: the row was not sent (an earlier message of its order was not
	// sent, or the relay was closing); it is free again at once, its attempts unchanged.
	OutcomeReleased
)

// String returns the outcome's name.
func (o Outcome) String() string {
	switch o {
	case OutcomeSent:
		return "sent"
	case OutcomeRetry:
		return "retry"
	case OutcomeDeadLettered:
		return "dead-lettered"
	case OutcomeReleased:
		return "released"
	}
	return fmt.Sprintf("Outcome(%d)", int(o))
}

// RelayResult is the event of RelayResultHook.
type RelayResult struct {
	ID          int64         // the row's id
	Destination string        // the queue or topic
	MessageID   string        // the message's id
	Outcome     Outcome       // what became of the row
	Attempts    int           // attempts to send the row so far, this one included when it counted
	Retry       time.Duration // OutcomeRetry: the wait before the next attempt
	Err         error         // the send's error; nil when sent
}

// RelayError is a failed database call of the relay, as a [RelayErrorHook] receives it.
// It wraps the database's error.
type RelayError struct {
	Op    string        // "claim", "mark" or "listen"
	Rows  int           // rows the failed call was about: a mark's, or a claim's whose messages could not be read (0 for a claim statement and listen)
	Retry time.Duration // the wait before the relay tries again; 0 for a mark, which is not retried, and for reading a claim's messages (its rows are released)
	Err   error         // the database's error
}

// Error names the call, its rows and the wait before the retry, then the database's
// error.
func (e *RelayError) Error() string {
	s := "pgoutbox: relay " + e.Op + " failed"
	if e.Rows > 0 {
		s += fmt.Sprintf(" (%d row(s))", e.Rows)
	}
	if e.Retry > 0 {
		s += fmt.Sprintf(", retrying in %v", e.Retry)
	}
	return s + ": " + fmt.Sprint(e.Err)
}

// Unwrap returns the database's error.
func (e *RelayError) Unwrap() error { return e.Err }

// RelayStats is a snapshot of a Relay's counters (cumulative) and gauge (current).
// Every claimed row ends in exactly one of Sent, SendRetries, DeadLettered and Released,
// and is counted in InFlight meanwhile, unless its claim's mark failed (counted in
// Abandoned: the claim's transaction ended without it, so the row is back in the outbox
// as it was, and is sent again if it was sent).
type RelayStats struct {
	// Claims counts claim statements that took rows; Claimed the rows they took.
	Claims, Claimed int64
	// Sent, DeadLettered and Released count rows by outcome (see [Outcome]).
	Sent, DeadLettered, Released int64
	// SendRetries counts rows whose send failed and that wait for their next attempt
	// ([OutcomeRetry]).
	SendRetries int64
	// Abandoned counts rows whose outcome could not be written: the mark of their claim
	// failed (the connection broke, PostgreSQL ended the transaction after a Lease, or
	// the relay stopped and the database did not answer within a second).
	Abandoned int64
	// DBErrors counts failed database calls (claim, mark, listen).
	DBErrors int64
	// Wakeups counts notifications received.
	Wakeups int64
	// InFlight is the rows claimed and not yet marked; InFlightBytes their bodies' and
	// properties' bytes (bounded by [RelayOptions.MaxInFlightBytes]).
	InFlight, InFlightBytes int64
}

type relayCounters struct {
	claims, claimed, sent, sendRetries, dead, released, abandoned, dbErrors, wakeups, inFlight, inFlightBytes atomic.Int64
}

func (c *relayCounters) snapshot() RelayStats {
	return RelayStats{
		Claims: c.claims.Load(), Claimed: c.claimed.Load(), Sent: c.sent.Load(), SendRetries: c.sendRetries.Load(),
		DeadLettered: c.dead.Load(), Released: c.released.Load(), Abandoned: c.abandoned.Load(),
		DBErrors: c.dbErrors.Load(), Wakeups: c.wakeups.Load(), InFlight: c.inFlight.Load(), InFlightBytes: c.inFlightBytes.Load(),
	}
}
