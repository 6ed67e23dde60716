package sbkit

import (
	"context"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
)

// SessionReceiver receives the messages of one locked session, in order, and keeps its
// lock and state. [*azservicebus.SessionReceiver] satisfies it, and so does the session
// receiver of package sbtest. ReceiveMessages must not be called from two goroutines at
// once; the other methods are safe for concurrent use.
type SessionReceiver interface {
	MessageReceiver
	ReceiveDeferredMessages(ctx context.Context, sequenceNumbers []int64, options *azservicebus.ReceiveDeferredMessagesOptions) ([]*azservicebus.ReceivedMessage, error)
	PeekMessages(ctx context.Context, maxMessageCount int, options *azservicebus.PeekMessagesOptions) ([]*azservicebus.ReceivedMessage, error)
	SessionID() string
	LockedUntil() time.Time
	RenewSessionLock(ctx context.Context, options *azservicebus.RenewSessionLockOptions) error
	GetSessionState(ctx context.Context, options *azservicebus.GetSessionStateOptions) ([]byte, error)
	SetSessionState(ctx context.Context, state []byte, options *azservicebus.SetSessionStateOptions) error
	Close(ctx context.Context) error
}

// SessionAcceptor accepts sessions of one queue or subscription that requires sessions.
// AcceptSession locks the session with the given id (even when it has no messages yet);
// AcceptNextSession waits for the next unlocked session with messages and fails with
// [*azservicebus.Error] of CodeTimeout when none comes before ctx's deadline (or the
// service's own minute). Implementations must be safe for concurrent use.
// NewQueueSessionAcceptor and NewSubscriptionSessionAcceptor adapt an
// [*azservicebus.Client]; sbtest's Namespace offers its own.
type SessionAcceptor interface {
	AcceptSession(ctx context.Context, sessionID string) (SessionReceiver, error)
	AcceptNextSession(ctx context.Context) (SessionReceiver, error)
}

// NewQueueSessionAcceptor accepts sessions of a queue through an SDK client. opts may be
// nil (peek-lock).
func NewQueueSessionAcceptor(client *azservicebus.Client, queue string, opts *azservicebus.SessionReceiverOptions) SessionAcceptor {
	return &sdkSessionAcceptor{
		byID: func(ctx context.Context, id string) (*azservicebus.SessionReceiver, error) {
			return client.AcceptSessionForQueue(ctx, queue, id, opts)
		},
		next: func(ctx context.Context) (*azservicebus.SessionReceiver, error) {
			return client.AcceptNextSessionForQueue(ctx, queue, opts)
		},
	}
}

// NewSubscriptionSessionAcceptor accepts sessions of a subscription through an SDK
// client. opts may be nil (peek-lock).
func NewSubscriptionSessionAcceptor(client *azservicebus.Client, topic, subscription string, opts *azservicebus.SessionReceiverOptions) SessionAcceptor {
	return &sdkSessionAcceptor{
		byID: func(ctx context.Context, id string) (*azservicebus.SessionReceiver, error) {
			return client.AcceptSessionForSubscription(ctx, topic, subscription, id, opts)
		},
		next: func(ctx context.Context) (*azservicebus.SessionReceiver, error) {
			return client.AcceptNextSessionForSubscription(ctx, topic, subscription, opts)
		},
	}
}

type sdkSessionAcceptor struct {
	byID func(ctx context.Context, id string) (*azservicebus.SessionReceiver, error)
	next func(ctx context.Context) (*azservicebus.SessionReceiver, error)
}

func (a *sdkSessionAcceptor) AcceptSession(ctx context.Context, sessionID string) (SessionReceiver, error) {
	r, err := a.byID(ctx, sessionID)
	if err != nil {
		return nil, err // not a typed nil inside the interface
	}
	return r, nil
}

func (a *sdkSessionAcceptor) AcceptNextSession(ctx context.Context) (SessionReceiver, error) {
	r, err := a.next(ctx)
	if err != nil {
		return nil, err
	}
	return r, nil
}

var _ SessionReceiver = (*azservicebus.SessionReceiver)(nil)
