package sender

import (
	"errors"
	"fmt"
	"strconv"
)

// ErrClosed is the cause of a send attempted after [Sender.Close] was called, and of the
// messages still in flight when Close gave up waiting.
var ErrClosed = errors.New("sender: closed")

// ErrFull is the cause of a [Sender.TrySend] that found a window full.
var ErrFull = errors.New("sender: window full")

// ErrPending is returned by [Result.Err] before the result is known.
var ErrPending = errors.New("sender: result pending")

// ErrInvalidOptions is wrapped by the error [New] returns for invalid [Options].
var ErrInvalidOptions = errors.New("sender: invalid options")

// ErrNilDestination is returned by [New] for a nil destination (including a nil
// [*azservicebus.Sender]).
var ErrNilDestination = errors.New("sender: nil destination")

// SendError is the error of a message that was not sent. Every error the Sender reports
// for a message is a *SendError; [errors.Is] and [errors.As] see its cause through Unwrap
// ([ErrClosed], [ErrFull], [sbkit.ErrNilMessage], a context error,
// [azservicebus.ErrMessageTooLarge], an [*azservicebus.Error], ...).
type SendError struct {
	// MessageID is the message's ID (empty for a nil message).
	MessageID string
	// Attempts is how many requests carried the message; 0 when it was never sent.
	Attempts int
	// Err is the cause: the last attempt's error, or why no attempt was made.
	Err error
}

// Error implements error.
func (e *SendError) Error() string {
	return "sender: message " + strconv.Quote(e.MessageID) + " not sent after " +
		strconv.Itoa(e.Attempts) + " attempt(s): " + fmt.Sprint(e.Err)
}

// Unwrap returns the cause.
func (e *SendError) Unwrap() error { return e.Err }

// SendAllError is the error of a [Sender.SendAll] call in which some messages were not sent.
type SendAllError struct {
	// Errs has one entry per message given to SendAll, in the same order: nil for a
	// message that was sent, its *SendError otherwise.
	Errs []error
}

// Error implements error.
func (e *SendAllError) Error() string {
	failed := e.Failed()
	msg := "sender: " + strconv.Itoa(len(failed)) + " of " + strconv.Itoa(len(e.Errs)) + " messages not sent"
	if len(failed) > 0 {
		msg += "; first: " + e.Errs[failed[0]].Error()
	}
	return msg
}

// Failed returns the indexes of the messages that were not sent, in increasing order.
func (e *SendAllError) Failed() []int {
	var idx []int
	for i, err := range e.Errs {
		if err != nil {
			idx = append(idx, i)
		}
	}
	return idx
}

// Unwrap returns the errors of the messages that were not sent.
func (e *SendAllError) Unwrap() []error {
	var errs []error
	for _, err := range e.Errs {
		if err != nil {
			errs = append(errs, err)
		}
	}
	return errs
}
