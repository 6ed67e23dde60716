package sender

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
)

const (
	statePending uint32 = iota
	stateFinishing
	stateKnown
)

// Result is the future outcome of one accepted message. It is completed exactly once.
// Its methods are safe for concurrent use.
type Result struct {
	msg      *azservicebus.Message
	ctx      context.Context
	id       string
	key      string        // ordering and batching key; "" for none
	size     int64         // estimated size (sbkit.MessageSize)
	weight   int64         // bytes taken from the byte window
	start    time.Duration // when accepted, since Sender.epoch; set only for SendResultHooks
	attempts int           // written only by the goroutine that sends the message
	state    atomic.Uint32 // statePending, stateFinishing, stateKnown
	err      error
	done     chan struct{}
}

// Message returns the message.
func (r *Result) Message() *azservicebus.Message { return r.msg }

// MessageID returns the message's ID, set before the first attempt.
func (r *Result) MessageID() string { return r.id }

// Done returns a channel closed once the outcome is known.
func (r *Result) Done() <-chan struct{} { return r.done }

// Err returns the outcome once it is known (once Done is closed): nil when the broker
// accepted the message, a *[SendError] otherwise. Before that it returns [ErrPending].
func (r *Result) Err() error {
	if r.state.Load() != stateKnown {
		return ErrPending
	}
	return r.err
}

// Wait waits for the outcome and returns it as Err does. If ctx ends first it returns
// ctx.Err(); the message is still in flight and its outcome can be awaited again.
func (r *Result) Wait(ctx context.Context) error {
	select {
	case <-r.done:
		return r.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Attempts returns how many requests carried the message once the outcome is known,
// 0 before.
func (r *Result) Attempts() int {
	if r.state.Load() != stateKnown {
		return 0
	}
	return r.attempts
}
