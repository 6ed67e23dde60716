package receiver

import (
	"context"
	"fmt"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/sbkit/sbkit"
)

type settlerKey struct{}

// SettlerFrom returns the [sbkit.Settler] of the message a handler is processing, for
// handlers that settle their message themselves (Options.DisableAutoComplete). Its calls
// accept only that message (else ErrWrongMessage), stop its lock renewal, retry transient
// failures like the processor does, and return ErrAlreadySettled when the message was
// settled before or its lock was lost. A context that is not a handler's gives a Settler
// whose calls return ErrNoSettler. The Settler is safe for concurrent use; only the first
// settlement is made.
func SettlerFrom(ctx context.Context) sbkit.Settler {
	if ctx != nil {
		if s, ok := ctx.Value(settlerKey{}).(*handlerSettler); ok && s.d.r.cfg.peekLock {
			return s
		}
	}
	return noSettler{}
}

// LockedUntilFrom returns the current lock expiry of the message a handler is processing
// (handlers must not read message.LockedUntil, which renewals write). ok is false for a
// context that is not a handler's, or when the expiry is unknown.
func LockedUntilFrom(ctx context.Context) (t time.Time, ok bool) {
	s, isHandler := ctx.Value(settlerKey{}).(*handlerSettler)
	switch {
	case !isHandler:
		return time.Time{}, false
	case s.d.lock != nil:
		return s.d.lock.LockedUntil(), true
	}
	return s.d.expires, !s.d.expires.IsZero()
}

type handlerSettler struct{ d *delivery }

func (s *handlerSettler) settle(ctx context.Context, m *azservicebus.ReceivedMessage, job settleJob) error {
	if m != s.d.msg {
		return ErrWrongMessage
	}
	if !s.d.claim() {
		s.d.mu.Lock()
		lost := s.d.lostCause
		s.d.mu.Unlock()
		if lost != nil {
			return fmt.Errorf("%w: %w", ErrAlreadySettled, lost)
		}
		return ErrAlreadySettled
	}
	job.d = s.d
	return s.d.r.settle(ctx, job)
}

func (s *handlerSettler) CompleteMessage(ctx context.Context, m *azservicebus.ReceivedMessage, _ *azservicebus.CompleteMessageOptions) error {
	return s.settle(ctx, m, settleJob{action: sbkit.ActionComplete})
}

func (s *handlerSettler) AbandonMessage(ctx context.Context, m *azservicebus.ReceivedMessage, o *azservicebus.AbandonMessageOptions) error {
	return s.settle(ctx, m, settleJob{action: sbkit.ActionAbandon, abandon: o})
}

func (s *handlerSettler) DeadLetterMessage(ctx context.Context, m *azservicebus.ReceivedMessage, o *azservicebus.DeadLetterOptions) error {
	return s.settle(ctx, m, settleJob{action: sbkit.ActionDeadLetter, deadLetter: o})
}

func (s *handlerSettler) DeferMessage(ctx context.Context, m *azservicebus.ReceivedMessage, o *azservicebus.DeferMessageOptions) error {
	return s.settle(ctx, m, settleJob{action: sbkit.ActionDefer, deferOpts: o})
}

type noSettler struct{}

func (noSettler) CompleteMessage(context.Context, *azservicebus.ReceivedMessage, *azservicebus.CompleteMessageOptions) error {
	return ErrNoSettler
}

func (noSettler) AbandonMessage(context.Context, *azservicebus.ReceivedMessage, *azservicebus.AbandonMessageOptions) error {
	return ErrNoSettler
}

func (noSettler) DeadLetterMessage(context.Context, *azservicebus.ReceivedMessage, *azservicebus.DeadLetterOptions) error {
	return ErrNoSettler
}

func (noSettler) DeferMessage(context.Context, *azservicebus.ReceivedMessage, *azservicebus.DeferMessageOptions) error {
	return ErrNoSettler
}
