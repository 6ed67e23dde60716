package sbkit

import (
	"context"
	"errors"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
)

// Handler processes one received message. What it returns decides the settlement the
// processor (package receiver) performs:
//
//   - nil: complete (when auto-complete is on);
//   - an error made by DeadLetter, Defer or Skip: that settlement (see SettlementOf);
//   - any other error: abandon, so that the broker delivers the message again.
//
// The context is cancelled when the message's lock is lost ([context.Cause] is then an error
// for which IsLockLost reports true) or when the processor shuts down.
type Handler func(ctx context.Context, message *azservicebus.ReceivedMessage) error

// Middleware wraps a Handler with behaviour that runs around it (duplicate skipping,
// expiry policy, decoding, logging).
type Middleware func(next Handler) Handler

// Chain wraps h with the middleware, the first one outermost: Chain(h, a, b) runs a, then b,
// then h. Nil middleware are skipped.
func Chain(h Handler, middleware ...Middleware) Handler {
	for i := len(middleware) - 1; i >= 0; i-- {
		if middleware[i] != nil {
			h = middleware[i](h)
		}
	}
	return h
}

// ErrNilHandler is wrapped by the error of every constructor in sbkit that is given a nil
// [Handler], or a nil function a handler is made of (the next handler of a middleware, a
// typed or reply function): a nil handler fails at construction, never per message.
// Other nil dependencies (a receiver, a store, a pool, a registry) fail with their
// package's own ErrNil sentinel.
var ErrNilHandler = errors.New("sbkit: nil handler")
