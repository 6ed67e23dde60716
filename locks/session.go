package locks

import (
	"context"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
)

// Session is a session lock the engine can renew: [*azservicebus.SessionReceiver] and
// sbtest's session receiver satisfy it. RenewSessionLock must update LockedUntil.
type Session interface {
	SessionID() string
	LockedUntil() time.Time
	RenewSessionLock(ctx context.Context, options *azservicebus.RenewSessionLockOptions) error
}

// AddSession starts tracking a session's lock and schedules its renewal from
// s.LockedUntil(), with the same scheduler, workers, limit, retries and hooks as message
// locks (the hooks' events carry SessionID and a nil Message). A lost session lock is
// reported once, with a *LostError whose SessionID is set. ctx is as for Add. It returns
// ErrNoLock when s has no lock expiry, and ErrClosed after Close.
func (e *Engine) AddSession(ctx context.Context, s Session) (*Lock, error) {
	until := s.LockedUntil()
	if until.IsZero() {
		return nil, ErrNoLock
	}
	return e.track(&Lock{ctx: ctx, session: s}, until)
}

// renewOnce makes one renewal call for l and returns the new expiry.
func (l *Lock) renewOnce(ctx context.Context) (time.Time, error) {
	if l.session != nil {
		if err := l.session.RenewSessionLock(ctx, nil); err != nil {
			return time.Time{}, err
		}
		return l.session.LockedUntil(), nil
	}
	if err := l.e.r.RenewMessageLock(ctx, l.msg, nil); err != nil {
		return time.Time{}, err
	}
	if l.msg.LockedUntil == nil {
		return time.Time{}, ErrNoLock
	}
	return *l.msg.LockedUntil, nil
}

// SessionID returns the id of a tracked session, "" for a message lock.
func (l *Lock) SessionID() string {
	if l.session == nil {
		return ""
	}
	return l.session.SessionID()
}

// logID names the lock in log records.
func (l *Lock) logID() (string, string) {
	if l.session != nil {
		return "sessionID", l.session.SessionID()
	}
	return "messageID", l.msg.MessageID
}
