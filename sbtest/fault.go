package sbtest

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
)

// Op names an operation that a Fault can target.
type Op int

const (
	// OpSend is SendMessage, SendBatch and ScheduleMessages.
	OpSend Op = iota
	// OpReceive is ReceiveMessages, ReceiveDeferredMessages and PeekMessages.
	OpReceive
	// OpComplete is CompleteMessage.
	OpComplete
	// OpAbandon is AbandonMessage.
	OpAbandon
	// OpDeadLetter is DeadLetterMessage.
	OpDeadLetter
	// OpDefer is DeferMessage.
	OpDefer
	// OpRenew is RenewMessageLock.
	OpRenew
	// OpAcceptSession is AcceptSession* and AcceptNextSession*.
	OpAcceptSession
	// OpRenewSessionLock is RenewSessionLock.
	OpRenewSessionLock
	// OpSessionState is GetSessionState and SetSessionState.
	OpSessionState
)

// String returns the operation's name.
func (o Op) String() string {
	switch o {
	case OpSend:
		return "send"
	case OpReceive:
		return "receive"
	case OpComplete:
		return "complete"
	case OpAbandon:
		return "abandon"
	case OpDeadLetter:
		return "deadletter"
	case OpDefer:
		return "defer"
	case OpRenew:
		return "renew"
	case OpAcceptSession:
		return "accept-session"
	case OpRenewSessionLock:
		return "renew-session-lock"
	case OpSessionState:
		return "session-state"
	}
	return fmt.Sprintf("Op(%d)", int(o))
}

// Fault makes calls of one operation on one entity fail. The zero Fault makes every
// send fail with TransientError until ClearFaults.
type Fault struct {
	// Op is the operation that fails.
	Op Op
	// Count is how many of the next calls of Op fail; 0 means every call until
	// ClearFaults.
	Count int
	// Err is the error returned; nil (with Hang false) means TransientError. A
	// settlement or renewal failing with an *azservicebus.Error of CodeLockLost (and After
	// false) also loses the lock at the broker, as ExpireLock does.
	Err error
	// Hang makes the call block until its context ends, then return ctx.Err(). The
	// operation is not applied.
	Hang bool
	// After applies the operation first and then returns Err: the broker did the work but
	// the client saw an error (for example a Complete whose reply was lost). With After
	// false (the default) the operation is not applied: a failed Complete leaves the
	// message locked, so it is redelivered when the lock expires.
	After bool
}

// faultSet holds the faults injected into one entity. Safe for concurrent use.
type faultSet struct {
	n    atomic.Int32 // len(list), read without the mutex on the hot path
	mu   sync.Mutex
	list []Fault
}

func (fs *faultSet) inject(f Fault) {
	if f.Err == nil && !f.Hang {
		f.Err = TransientError
	}
	fs.mu.Lock()
	fs.list = append(fs.list, f)
	fs.n.Store(int32(len(fs.list)))
	fs.mu.Unlock()
}

func (fs *faultSet) clear() {
	fs.mu.Lock()
	fs.list = nil
	fs.n.Store(0)
	fs.mu.Unlock()
}

// take consumes one use of the first fault for op, if any.
func (fs *faultSet) take(op Op) (Fault, bool) {
	if fs.n.Load() == 0 {
		return Fault{}, false
	}
	fs.mu.Lock()
	defer fs.mu.Unlock()
	for i, f := range fs.list {
		if f.Op != op {
			continue
		}
		if f.Count > 0 {
			fs.list[i].Count--
			if fs.list[i].Count == 0 {
				fs.list = append(fs.list[:i], fs.list[i+1:]...)
				fs.n.Store(int32(len(fs.list)))
			}
		}
		return f, true
	}
	return Fault{}, false
}

// before runs the part of a fault that happens instead of the operation: a hang, or an
// error when After is false. It returns a non-nil error when the operation must not be
// applied.
func (f Fault) before(ctx context.Context) error {
	if f.Hang {
		<-ctx.Done()
		return ctx.Err()
	}
	if !f.After {
		return f.Err
	}
	return nil
}

// run runs a fault taken for an operation, when faulty: before, then the error to
// return once the operation is applied (After). err non-nil means the operation must
// not be applied.
func (f Fault) run(ctx context.Context, faulty bool) (after error, err error) {
	if !faulty {
		return nil, nil
	}
	if err := f.before(ctx); err != nil {
		return nil, err
	}
	return f.Err, nil
}
