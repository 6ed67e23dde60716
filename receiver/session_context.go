package receiver

import (
	"context"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
)

// Session is what a handler of a [SessionProcessor] may do with the session of its
// message: learn its id and lock expiry, and read and write its state. Its methods are
// safe for concurrent use.
type Session interface {
	SessionID() string
	LockedUntil() time.Time
	GetSessionState(ctx context.Context, options *azservicebus.GetSessionStateOptions) ([]byte, error)
	SetSessionState(ctx context.Context, state []byte, options *azservicebus.SetSessionStateOptions) error
}

type sessionKey struct{}

// SessionFrom returns the session of the message whose handler ctx belongs to, when the
// handler runs under a [SessionProcessor]; false otherwise.
func SessionFrom(ctx context.Context) (Session, bool) {
	s, ok := ctx.Value(sessionKey{}).(Session)
	return s, ok
}
