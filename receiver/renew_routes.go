package receiver

import (
	"context"
	"sync"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/sbkit/sbkit"
)

// renewRoutes is the lock engine's renewer of a run with MoreReceivers: it renews each
// message's lock through the receiver the message came from, when that receiver
// implements [sbkit.LockRenewer], else through the processor's. azservicebus renews a
// message lock through $management with the message's own link name
// (associated-link-name), and receivers made from different Clients are not even on
// one connection. Safe for concurrent use.
type renewRoutes struct {
	own sbkit.LockRenewer

	mu sync.Mutex
	by map[*azservicebus.ReceivedMessage]sbkit.LockRenewer // from the delivery's receipt to its end
}

func newRenewRoutes(own sbkit.LockRenewer) *renewRoutes {
	return &renewRoutes{own: own, by: make(map[*azservicebus.ReceivedMessage]sbkit.LockRenewer)}
}

// add routes m's renewals to src, when src can renew.
func (rr *renewRoutes) add(m *azservicebus.ReceivedMessage, src sbkit.MessageReceiver) {
	if lr, ok := src.(sbkit.LockRenewer); ok {
		rr.mu.Lock()
		rr.by[m] = lr
		rr.mu.Unlock()
	}
}

// drop forgets m.
func (rr *renewRoutes) drop(m *azservicebus.ReceivedMessage) {
	rr.mu.Lock()
	delete(rr.by, m)
	rr.mu.Unlock()
}

// RenewMessageLock renews m's lock through its route.
func (rr *renewRoutes) RenewMessageLock(ctx context.Context, m *azservicebus.ReceivedMessage, o *azservicebus.RenewMessageLockOptions) error {
	rr.mu.Lock()
	lr, ok := rr.by[m]
	rr.mu.Unlock()
	if !ok {
		lr = rr.own
	}
	return lr.RenewMessageLock(ctx, m, o)
}
