package receiver

import (
	"errors"
	"fmt"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/sbkit/sbkit"
)

var (
	// ErrClosed is returned by Run after Close, and is the cause of the handlers' contexts
	// when a shutdown cancels them.
	ErrClosed = errors.New("receiver: processor closed")
	// ErrRunning is returned by Run while another Run of the same Processor is active.
	ErrRunning = errors.New("receiver: processor already running")
	// ErrNilReceiver is returned by New for a nil MessageReceiver and by
	// NewSessionProcessor for a nil SessionAcceptor.
	ErrNilReceiver = errors.New("receiver: nil receiver")
	// ErrNoLockRenewer is returned by New in peek-lock mode with lock renewal on when the
	// MessageReceiver does not implement [sbkit.LockRenewer].
	ErrNoLockRenewer = errors.New("receiver: MessageReceiver does not implement sbkit.LockRenewer; disable lock renewal or pass an *azservicebus.Receiver")
	// ErrInvalidOptions is wrapped by New's errors for options out of range.
	ErrInvalidOptions = errors.New("receiver: invalid options")
	// ErrNotSettled is reported (SourceHandler) when auto-complete is off and a handler
	// returned nil without settling its message; the processor then abandons it.
	ErrNotSettled = errors.New("receiver: handler returned nil without settling the message (auto-complete is off)")
	// ErrAlreadySettled is returned by a handler's Settler when the message was already
	// settled, abandoned by a shutdown, or its lock was lost (the error then also wraps
	// the loss).
	ErrAlreadySettled = errors.New("receiver: message already settled or lock lost")
	// ErrNoSettler is returned by the Settler of a context that does not belong to a
	// processor's handler, and by it in ReceiveAndDelete mode.
	ErrNoSettler = errors.New("receiver: no message to settle in this context")
	// ErrWrongMessage is returned by a handler's Settler for a message other than the one
	// being handled.
	ErrWrongMessage = errors.New("receiver: the Settler of a handler settles only its own message")
	// ErrDropped is reported in ReceiveAndDelete mode for a received message that a
	// shutdown left unhandled (the broker already deleted it).
	ErrDropped = errors.New("receiver: message received in ReceiveAndDelete mode dropped by shutdown")
	// ErrSettleFailed is reported (SourceSettle) for each message whose settlement failed
	// for good (an error that is not transient, or SettleTimeout): the message counts in
	// Stats.LocksLost and the broker delivers it again when its lock expires (a
	// session's message: when the session is given up, which a SessionProcessor does at
	// once). Failed attempts that are retried are reported without it.
	ErrSettleFailed = errors.New("receiver: settlement failed; the message is delivered again when its lock expires")
	// ErrLeftLocked is reported (SourceSettle) for each message whose settlement was
	// still pending when a shutdown's deadline passed: the processor gave up on it and its
	// lock expires at the broker, which then delivers it again. Stats.LeftLocked counts them.
	ErrLeftLocked = errors.New("receiver: shutdown deadline passed before the message was settled; its lock will expire")
	// ErrMessageExpired is the cause of a handler's context cancelled by the Expiry
	// middleware at the message's expiry.
	ErrMessageExpired = errors.New("receiver: message expired")
)

// ErrorSource tells which part of the processor an error came from.
type ErrorSource int

const (
	// SourceReceive: ReceiveMessages failed (the processor retries unless permanent).
	SourceReceive ErrorSource = iota + 1
	// SourceHandler: the handler returned an error, panicked, or left the message
	// unsettled.
	SourceHandler
	// SourceSettle: a settlement call failed; the message then counts as lock-lost.
	SourceSettle
	// SourceRenew: a lock renewal attempt failed or a lock was lost (a session's lock
	// too, under a SessionProcessor).
	SourceRenew
	// SourceAccept: accepting a session failed (SessionProcessor; a wait for a session
	// that timed out is not an error).
	SourceAccept
)

// String returns the source's name in lower case.
func (s ErrorSource) String() string {
	switch s {
	case SourceReceive:
		return "receive"
	case SourceHandler:
		return "handler"
	case SourceSettle:
		return "settle"
	case SourceRenew:
		return "renew"
	case SourceAccept:
		return "accept"
	}
	return fmt.Sprintf("ErrorSource(%d)", int(s))
}

// Error is what an [ErrorHook] receives: an error and where it came from.
type Error struct {
	// Source says where the error came from.
	Source ErrorSource
	// Action is the settlement concerned: the one that failed for SourceSettle, the one
	// about to be made when a lock was found lost at settlement; zero (no action)
	// otherwise.
	Action sbkit.Action
	// Message is the message concerned, nil for SourceReceive. Do not read its
	// LockedUntil field (a renewal may be writing it).
	Message *azservicebus.ReceivedMessage
	// Err is the error.
	Err error
}

// logArgs are e's attributes for a log record: the source, the action and the message's
// MessageID when there is one (never its body), and the error.
func (e *Error) logArgs() []any {
	args := []any{"source", e.Source.String()}
	if e.Action != 0 {
		args = append(args, "action", e.Action.String())
	}
	if e.Message != nil {
		args = append(args, "messageID", e.Message.MessageID)
	}
	return append(args, "error", e.Err)
}

// Error names the source, the action and the message's MessageID when known, then the error.
func (e *Error) Error() string {
	msg := "receiver: " + e.Source.String()
	if e.Action != 0 {
		msg += " (" + e.Action.String() + ")"
	}
	if e.Message != nil && e.Message.MessageID != "" {
		msg += ": message " + e.Message.MessageID
	}
	return msg + ": " + fmt.Sprint(e.Err)
}

// Unwrap returns the error.
func (e *Error) Unwrap() error { return e.Err }

// PanicError is the error a recovered handler panic becomes.
type PanicError struct {
	// Value is what the handler panicked with.
	Value any
	// Stack is the goroutine's stack at the panic.
	Stack []byte
}

// Error returns "receiver: handler panicked: " and the panic value.
func (e *PanicError) Error() string { return fmt.Sprintf("receiver: handler panicked: %v", e.Value) }

// Unwrap returns the panic value when it is an error.
func (e *PanicError) Unwrap() error {
	err, _ := e.Value.(error)
	return err
}
