package deadletter

import "time"

// Stats counts what an operation did. Every distinct message the operation received or
// peeked is counted once in Seen and once in exactly one of Moved, Skipped and Failed,
// so Moved + Skipped + Failed = Seen. A message that comes back during the operation
// (its lock expired, or it was abandoned) is not counted again.
type Stats struct {
	// Seen counts the distinct messages received or peeked.
	Seen int64
	// Moved counts the messages the operation did what it is for with: re-driven (the
	// broker accepted the copy), exported, imported, purged, or, in a dry run, the
	// messages that would have been.
	Moved int64
	// Skipped counts the messages the Filter did not match; they stay where they were.
	Skipped int64
	// Failed counts the messages the operation could not move; they stay where they were
	// (a dead letter whose copy failed is abandoned). Errors holds the first few causes.
	Failed int64
	// CompleteFailed counts re-driven messages (counted in Moved) whose copy was accepted
	// but whose original could not be completed: both exist until the original is
	// received again, by this operation (which then completes it without a second copy)
	// or a later one (which sends a second copy, dropped by the destination's duplicate
	// detection when it is on).
	CompleteFailed int64
	// Stopped says why the operation ended.
	Stopped StopReason
	// Errors holds the first [MaxErrors] failures, in the order they happened.
	Errors []error
	// Elapsed is the operation's duration so far.
	Elapsed time.Duration
}

// MaxErrors is how many failures [Stats.Errors] keeps.
const MaxErrors = 10

// StopReason says why an operation ended.
type StopReason string

// The reasons an operation ends.
const (
	// StopDrained: the queue had nothing more (a receive waited IdleTimeout for nothing,
	// or a peek returned nothing).
	StopDrained StopReason = "drained"
	// StopAllSeen: a receive returned only messages the operation had already handled
	// (skipped or failed messages whose locks expired), so nothing new is left to reach.
	StopAllSeen StopReason = "all-seen"
	// StopMaxMessages: the operation handled its maximum count of messages.
	StopMaxMessages StopReason = "max-messages"
	// StopHoldLimit: the operation held as many skipped or failed messages as
	// MaxHeld allows, and stopped rather than hold more.
	StopHoldLimit StopReason = "hold-limit"
	// StopPermanentFailure: a send failed for good and StopOnPermanentFailure was set.
	StopPermanentFailure StopReason = "permanent-failure"
	// StopCancelled: ctx ended.
	StopCancelled StopReason = "cancelled"
	// StopError: receiving or peeking failed.
	StopError StopReason = "error"
)

func (s *Stats) addError(err error) {
	if len(s.Errors) < MaxErrors {
		s.Errors = append(s.Errors, err)
	}
}
