package pgoutbox

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"
)

// Hook is an observer of a [Relay]: a value implementing any of [RelayResultHook] and
// [RelayErrorHook]. Hooks run synchronously on the relay's goroutines, possibly
// concurrently, and must be fast; a panic in a hook is recovered and logged. To observe
// the sends themselves (spans, retries, batches), use sender hooks
// ([RelayOptions.Sender], [RelayOptions.SenderHooks]).
type Hook any

// RelayResultHook is told what became of every row the relay claimed, once the outcome
// is written to the database.
type RelayResultHook interface {
	OnRelayResult(ctx context.Context, e RelayResult)
}

// RelayErrorHook is told every failed database call of the relay (claim, mark,
// listen). A claim or a listen is retried after RelayErrorEvent.Retry; a mark is not
// (its claim's rows are back in the outbox as they were; Retry is 0).
type RelayErrorHook interface {
	OnRelayError(ctx context.Context, e RelayErrorEvent)
}

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

// RelayErrorEvent is the event of RelayErrorHook.
type RelayErrorEvent struct {
	Op    string        // "claim", "mark" or "listen"
	Rows  int           // rows the failed call was about (0 for claim and listen)
	Retry time.Duration // the wait before the relay tries again
	Err   error         // the database's error
}

// RelayStats is a snapshot of a Relay's counters (cumulative) and gauge (current).
// Every claimed row ends in exactly one of Sent, Retried, DeadLettered and Released,
// and is counted in InFlight meanwhile, unless its claim's mark failed (counted in
// Abandoned: the claim's transaction ended without it, so the row is back in the outbox
// as it was, and is sent again if it was sent).
type RelayStats struct {
	// Claims counts claim statements that took rows; Claimed the rows they took.
	Claims, Claimed int64
	// Sent, Retried, DeadLettered and Released count rows by outcome (see [Outcome]).
	Sent, Retried, DeadLettered, Released int64
	// Abandoned counts rows whose outcome could not be written: the mark of their claim
	// failed (the connection broke, PostgreSQL ended the transaction after a Lease, or
	// the relay stopped and the database did not answer within a second).
	Abandoned int64
	// DBErrors counts failed database calls (claim, mark, listen).
	DBErrors int64
	// Wakeups counts notifications received.
	Wakeups int64
	// InFlight is the rows claimed and not yet marked.
	InFlight int64
}

type relayCounters struct {
	claims, claimed, sent, retried, dead, released, abandoned, dbErrors, wakeups, inFlight atomic.Int64
}

func (c *relayCounters) snapshot() RelayStats {
	return RelayStats{
		Claims: c.claims.Load(), Claimed: c.claimed.Load(), Sent: c.sent.Load(), Retried: c.retried.Load(),
		DeadLettered: c.dead.Load(), Released: c.released.Load(), Abandoned: c.abandoned.Load(),
		DBErrors: c.dbErrors.Load(), Wakeups: c.wakeups.Load(), InFlight: c.inFlight.Load(),
	}
}
