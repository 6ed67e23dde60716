package sbkit

import (
	"errors"
	"fmt"
	"time"
)

// Action is the settlement a handler's result asks for. The zero value is no action
// (its String is "none"): an event or error that is not about a settlement carries it.
type Action int

const (
	// ActionComplete removes the message from the entity.
	ActionComplete Action = iota + 1
	// ActionAbandon releases the lock so the message is delivered again; the broker
	// increments its delivery count and dead-letters it after MaxDeliveryCount.
	ActionAbandon
	// ActionDeadLetter moves the message to the dead-letter sub-queue.
	ActionDeadLetter
	// ActionDefer sets the message aside; it can be received only by sequence number.
	ActionDefer
)

// String returns the action's name in lower case, for logs and metrics.
func (a Action) String() string {
	switch a {
	case 0:
		return "none"
	case ActionComplete:
		return "complete"
	case ActionAbandon:
		return "abandon"
	case ActionDeadLetter:
		return "deadletter"
	case ActionDefer:
		return "defer"
	}
	return fmt.Sprintf("Action(%d)", int(a))
}

// SettleError is a handler result that names its settlement explicitly. Make one with
// DeadLetter, Defer or Skip; read one with SettlementOf. It wraps the cause, if any.
type SettleError struct {
	// Action is the settlement asked for.
	Action Action
	// Reason is the dead-letter reason, or why a message was skipped.
	Reason string
	// Description is the dead-letter error description.
	Description string
	// Properties are application properties to modify when dead-lettering or deferring.
	Properties map[string]any
	// Err is the cause, or nil.
	Err error
	// Redeliver asks for a delayed redelivery through the broker (see RetryAfter), and
	// Delay is the delay asked for (zero: the processor's policy decides). Action is then
	// ActionAbandon, what a processor without a redelivery policy does.
	Redeliver bool
	Delay     time.Duration
}

// Error returns "sbkit: <action>" followed by the reason, description and cause that are set.
func (e *SettleError) Error() string {
	msg := "sbkit: " + e.Action.String()
	if e.Redeliver {
		msg = "sbkit: redeliver"
		if e.Delay > 0 {
			msg += " after " + e.Delay.String()
		}
	}
	if e.Reason != "" {
		msg += ": " + e.Reason
	}
	if e.Description != "" {
		msg += ": " + e.Description
	}
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg
}

// Unwrap returns the cause, or nil.
func (e *SettleError) Unwrap() error { return e.Err }

// DeadLetter returns a handler result that asks for the message to be dead-lettered with
// the given reason and description. cause may be nil.
func DeadLetter(reason, description string, cause error) error {
	return &SettleError{Action: ActionDeadLetter, Reason: reason, Description: description, Err: cause}
}

// Defer returns a handler result that asks for the message to be deferred. cause may be nil.
func Defer(cause error) error {
	return &SettleError{Action: ActionDefer, Err: cause}
}

// Skip returns a handler result that asks for the message to be completed without having
// been processed (a duplicate, an expired message). The processor completes it even when
// auto-complete is off, and counts it as skipped rather than as handled.
func Skip(reason string) error {
	return &SettleError{Action: ActionComplete, Reason: reason}
}

// SettlementOf tells which settlement a handler's result asks for: ActionComplete for nil,
// the marker's settlement for a *SettleError anywhere in err's chain, ActionAbandon for any
// other error. The returned *SettleError is nil for nil and for plain errors.
func SettlementOf(err error) (Action, *SettleError) {
	if err == nil {
		return ActionComplete, nil
	}
	var se *SettleError
	if errors.As(err, &se) {
		return se.Action, se
	}
	return ActionAbandon, nil
}
