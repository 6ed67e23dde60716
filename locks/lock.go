package locks

import (
	"context"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/cenkalti/backoff/v4"
)

type lockState int

const (
	stateWaiting  lockState = iota // in the heap, or popped and on its way to a worker
	stateRenewing                  // a worker is calling RenewMessageLock
	stateDone                      // released, lost, or the engine closed
)

type dueKind int

const (
	dueRenew  dueKind = iota // renew at due
	dueExpire                // no renewal will be made: the lock runs out at due
)

// Lock is one message tracked by an Engine. Its methods are safe for concurrent use.
type Lock struct {
	e       *Engine
	ctx     context.Context               // for hooks
	msg     *azservicebus.ReceivedMessage // nil for a session lock (AddSession)
	session Session                       // nil for a message lock
	added   time.Time
	done    chan struct{} // closed when tracking ends for any reason
	expired Reason        // the reason given when a dueExpire entry fires

	// Guarded by e.mu.
	state       lockState
	lockedUntil time.Time
	period      time.Duration // longest lock duration observed
	due         time.Time
	kind        dueKind
	index       int // in e.heap; -1 when not in it
	lostErr     error
	renewals    int
	bo          backoff.BackOff
	attempts    int // consecutive failed renewals
	lastErr     error
	cancelRenew context.CancelFunc
	renewDone   chan struct{}
}

// Message returns the tracked message. Do not read its LockedUntil field while the lock
// is tracked; use LockedUntil.
func (l *Lock) Message() *azservicebus.ReceivedMessage { return l.msg }

// LockedUntil returns the lock's current expiry, as of the last successful renewal.
func (l *Lock) LockedUntil() time.Time {
	l.e.mu.Lock()
	defer l.e.mu.Unlock()
	return l.lockedUntil
}

// Renewals returns how many times the lock was renewed.
func (l *Lock) Renewals() int {
	l.e.mu.Lock()
	defer l.e.mu.Unlock()
	return l.renewals
}

// Done returns a channel closed when the engine stops tracking the lock: it was released,
// lost, or the engine was closed.
func (l *Lock) Done() <-chan struct{} { return l.done }

// Err returns nil while the lock is held, and after it was released or the engine closed;
// once the lock is lost it returns the *LostError.
func (l *Lock) Err() error {
	l.e.mu.Lock()
	defer l.e.mu.Unlock()
	return l.lostErr
}

// Release stops renewing the lock, typically because the message is about to be settled.
// It waits for an in-flight renewal call to return (cancelling it), so that the caller may
// then hand the message to a settlement call without racing on message.LockedUntil. It
// returns the *LostError when the lock was lost before, and nil otherwise (also when
// called again). No loss is reported for the lock after Release returned nil.
func (l *Lock) Release() error {
	e := l.e
	e.mu.Lock()
	switch l.state {
	case stateDone:
		err := l.lostErr
		e.mu.Unlock()
		return err
	case stateRenewing:
		e.doneLocked(l)
		cancel, renewDone := l.cancelRenew, l.renewDone
		e.mu.Unlock()
		cancel()
		<-renewDone
		return nil
	}
	e.doneLocked(l)
	e.mu.Unlock()
	return nil
}
