package dedupe

import (
	"context"
	"sync"
	"time"
)

// renewal refreshes a running handler's lease every Options.LeaseRenewal, on a timer
// (no goroutine while idle), until stop. stop waits for a refresh in flight, so no
// refresh can recreate a lease after it was released or marked done.
type renewal struct {
	f          *Filter
	ctx        context.Context // the handler's values, without its cancellation
	key, owner string

	mu      sync.Mutex
	stopped bool
	timer   *time.Timer
}

func (f *Filter) startRenewal(ctx context.Context, key, owner string) *renewal {
	r := &renewal{f: f, ctx: context.WithoutCancel(ctx), key: key, owner: owner}
	r.mu.Lock()
	r.timer = time.AfterFunc(f.o.LeaseRenewal, r.renew)
	r.mu.Unlock()
	return r
}

func (r *renewal) renew() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stopped {
		return
	}
	f := r.f
	sctx, cancel := context.WithTimeout(r.ctx, f.o.StoreTimeout)
	state, err := f.store.Acquire(sctx, r.key, r.owner, f.o.LeaseTTL)
	cancel()
	switch {
	case err != nil:
		f.storeError(r.ctx, OpRenew, r.key, err) // try again at the next interval
	case state != Acquired:
		// The lease expired before a refresh and another owner took the key: a
		// duplicate may be running now. Nothing to renew any more.
		f.c.leasesLost.Add(1)
		f.o.Logger.WarnContext(r.ctx, "dedupe: lease lost while the handler runs", "key", r.key, "state", state.String())
		return
	}
	r.timer.Reset(f.o.LeaseRenewal)
}

func (r *renewal) stop() {
	if r == nil {
		return
	}
	r.mu.Lock()
	r.stopped = true
	r.timer.Stop()
	r.mu.Unlock()
}
