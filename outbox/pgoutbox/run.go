package pgoutbox

import (
	"context"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/cenkalti/backoff/v4"
	"github.com/sbkit/sbkit/sender"
)

// run is one Run of a Relay: its goroutines (MaxConcurrentClaims claim loops, the
// listener and the completer), its senders and its rows in flight.
type run struct {
	r *Relay

	life  context.Context // ends when the run aborts: sends are cancelled
	abort context.CancelCauseFunc

	stopOnce  sync.Once
	stopCtx   context.Context // ends when claiming must stop
	stopNow   context.CancelFunc
	stopAfter func() bool   // stops the abort scheduled at the stop context's end
	done      chan struct{} // closed when Run has returned

	wake     chan struct{} // a claim may find rows
	outcomes chan outcome  // rows whose outcome is known, to be marked
	rows     sync.Map      // *azservicebus.Message -> *row, for the rows given to a sender

	mu       sync.Mutex
	inFlight int           // claimed rows not yet marked
	cut      bool          // the grace ended with rows in flight
	idle     chan struct{} // closed when inFlight drops to 0; nil when nobody waits

	destMu sync.Mutex
	dests  map[string]*dest

	workers sync.WaitGroup // listener, completer

	retryTimer *time.Timer // wakes the claim loops when a retry is due; the completer's
	retryAt    time.Time
}

// dest is a destination's sender.
type dest struct {
	s   *sender.Sender
	dst any // what Destinations returned, closed at the end of the run
}

func newRun(r *Relay) *run {
	u := &run{r: r, done: make(chan struct{}), wake: make(chan struct{}, r.o.MaxConcurrentClaims),
		outcomes: make(chan outcome, r.o.MaxInFlight), dests: make(map[string]*dest)}
	u.stopCtx, u.stopNow = context.WithCancel(context.Background())
	u.life, u.abort = context.WithCancelCause(context.Background())
	return u
}

// stop asks the run to stop claiming and to abort what is still in flight when grace
// ends. Only the first call counts.
func (u *run) stop(grace context.Context) {
	u.stopOnce.Do(func() {
		u.stopAfter = context.AfterFunc(grace, func() {
			u.mu.Lock()
			u.cut = u.inFlight > 0
			u.mu.Unlock()
			u.abort(errClosing)
		})
		u.stopNow()
	})
}

// aborted reports whether the run's sends are cancelled (grace over, or the run ended).
func (u *run) aborted() bool { return u.life.Err() != nil }

// cutShort reports whether the grace ended with rows in flight.
func (u *run) cutShort() bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.cut
}

// signal wakes the claim loops.
func (u *run) signal() {
	for range cap(u.wake) {
		select {
		case u.wake <- struct{}{}:
		default:
			return
		}
	}
}

// serve runs the claim loops until ctx ends or stop, then shuts the run down.
func (u *run) serve(ctx context.Context) {
	listenCtx, stopListening := context.WithCancel(context.Background())
	if !u.r.o.DisableListen {
		u.workers.Go(func() { u.listen(listenCtx) })
	}
	quit := make(chan struct{})
	u.workers.Go(func() { u.complete(quit) })

	claimCtx, stopClaims := context.WithCancel(ctx)
	defer stopClaims()
	stopWatch := context.AfterFunc(u.stopCtx, stopClaims)
	defer stopWatch()
	var claimers sync.WaitGroup
	for range u.r.o.MaxConcurrentClaims {
		claimers.Go(func() { u.claimLoop(claimCtx) })
	}
	claimers.Wait()

	if ctx.Err() != nil {
		grace, cancel := context.WithTimeout(context.Background(), u.r.o.ShutdownGrace)
		defer cancel()
		u.stop(grace)
	}
	u.waitIdle(u.life.Done())
	for _, d := range u.dests {
		_ = d.s.Close(u.life) // nothing in flight, or aborted: cancels the requests in flight
	}
	u.waitIdle(nil) // the outcomes of the sends the closes cut short
	close(quit)
	stopListening()
	u.workers.Wait()
	u.stopAfter()
	if u.retryTimer != nil {
		u.retryTimer.Stop() // the completer has returned
	}
	u.abort(errClosing) // releases the run's contexts
	closeCtx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	for _, d := range u.dests {
		if c, ok := d.dst.(interface{ Close(context.Context) error }); ok {
			_ = c.Close(closeCtx)
		}
	}
}

// waitIdle waits until no claimed row is unmarked, or until abort is closed.
func (u *run) waitIdle(abort <-chan struct{}) {
	u.mu.Lock()
	if u.inFlight == 0 {
		u.mu.Unlock()
		return
	}
	if u.idle == nil {
		u.idle = make(chan struct{})
	}
	idle := u.idle
	u.mu.Unlock()
	select {
	case <-idle:
	case <-abort:
	}
}

// take reserves up to n rows of the in-flight window and returns how many it got; the
// claim gives back what it did not use.
func (u *run) take(n int) int {
	u.mu.Lock()
	defer u.mu.Unlock()
	got := max(0, min(n, u.r.o.MaxInFlight-u.inFlight))
	u.inFlight += got
	return got
}

// addInFlight adds n (negative: removes) rows to the window's count.
func (u *run) addInFlight(n int) {
	u.mu.Lock()
	u.inFlight += n
	if u.inFlight == 0 && u.idle != nil {
		close(u.idle)
		u.idle = nil
	}
	u.mu.Unlock()
}

// claimLoop claims rows and hands them to the senders until ctx ends (Run's context
// ended, or stop). MaxConcurrentClaims loops run at once.
func (u *run) claimLoop(ctx context.Context) {
	poll := time.NewTimer(0)
	defer poll.Stop()
	var errBackoff backoff.BackOff
	for {
		select {
		case <-ctx.Done():
			return
		default:
		}
		n := u.take(u.r.o.ClaimBatch)
		if n > 0 {
			// The statement runs to its end when claiming stops (a cancelled query costs
			// its connection, and pgxpool's Close waits for that one's cleanup); only
			// an abort cancels it.
			rows, c, err := u.claim(u.life, n)
			u.addInFlight(len(rows) - n)
			if err != nil {
				if ctx.Err() != nil {
					return
				}
				if !u.r.retryDB(ctx, &errBackoff, "claim", 0, err) {
					return
				}
				continue
			}
			errBackoff = nil
			if len(rows) > 0 {
				u.dispatch(c, rows)
			}
			if len(rows) == n {
				continue // there may be more
			}
		}
		poll.Reset(u.r.o.PollInterval)
		select {
		case <-ctx.Done():
			return
		case <-u.wake:
		case <-poll.C:
		}
	}
}

// claim is one claim statement's rows: their sends end when half the lease is over.
type claim struct {
	ctx    context.Context
	cancel context.CancelFunc
	left   atomic.Int64 // rows without a marked outcome
}

// done records that one more of the claim's rows is marked.
func (c *claim) done() {
	if c.left.Add(-1) == 0 {
		c.cancel()
	}
}

// dispatch hands a claim's rows to the senders, in id order. The rows of one order (a
// session, a partition key, or the rows of one transaction that have neither) share a
// context that a failure of any of them cancels, synchronously in the sender's result
// hook, so that the ordered sender drops the rest of the order instead of letting it
// overtake the failed row. Several rows of one transaction get the transaction as their
// sender OrderKey (batched together, one request at a time, in order); a transaction's
// single row gets none and batches with any other.
func (u *run) dispatch(c *claim, rows []*row) {
	count := make(map[string]int, len(rows))
	for _, rw := range rows {
		count[rw.destination+"\x00"+rw.orderKey]++
	}
	type keyState struct {
		ctx    context.Context
		cancel context.CancelCauseFunc
	}
	keys := make(map[string]keyState)
	destErrs := make(map[string]error) // Destinations is asked once per claim
	for _, rw := range rows {
		rw.claim = c
		if rw.decodeErr != nil {
			u.report(rw, u.r.classify(rw, rw.decodeErr))
			continue
		}
		d, err := (*dest)(nil), destErrs[rw.destination]
		if err == nil {
			d, err = u.dest(rw.destination)
		}
		if err != nil {
			destErrs[rw.destination] = err
			u.report(rw, u.r.classify(rw, err))
			continue
		}
		rw.sender = d.s
		rw.ctx = c.ctx
		if key := rw.destination + "\x00" + rw.orderKey; count[key] > 1 {
			k, ok := keys[key]
			if !ok {
				k.ctx, k.cancel = context.WithCancelCause(c.ctx) // ends with the claim at the latest
				keys[key] = k
			}
			rw.ctx, rw.cancelKey = k.ctx, k.cancel
			rw.chained = strings.HasPrefix(rw.orderKey, "t:")
		}
		u.rows.Store(rw.msg, rw)
		_, _ = rw.sender.SendAsync(rw.ctx, rw.msg) // the result hook reports the outcome, accepted or not
	}
}

// orderKey is the relay senders' [sender.Options.OrderKey]: a transaction's order key
// for a row sent with others of its transaction, none otherwise.
func (u *run) orderKey(m *azservicebus.Message) string {
	if v, ok := u.rows.Load(m); ok && v.(*row).chained {
		return v.(*row).orderKey
	}
	return ""
}

// dest returns the sender of a destination, making it on first use.
func (u *run) dest(name string) (*dest, error) {
	u.destMu.Lock()
	defer u.destMu.Unlock()
	if d := u.dests[name]; d != nil {
		return d, nil
	}
	dst, err := u.r.dests(name)
	if err != nil {
		return nil, err
	}
	so := *u.r.o.Sender
	so.Hooks = slices.Clone(so.Hooks)
	if u.r.o.SenderHooks != nil {
		so.Hooks = append(so.Hooks, u.r.o.SenderHooks(name)...)
	}
	so.Hooks = append(so.Hooks, resultHook{u})
	so.OrderKey = u.orderKey
	s, err := sender.New(dst, &so)
	if err != nil {
		if c, ok := any(dst).(interface{ Close(context.Context) error }); ok {
			_ = c.Close(u.life)
		}
		return nil, err
	}
	d := &dest{s: s, dst: dst}
	u.dests[name] = d
	return d, nil
}

// resultHook learns every outcome of the run's senders.
type resultHook struct{ u *run }

// OnSendResult classifies the outcome of a row's send and queues it for marking. A
// failure that will be retried cancels the later rows of the row's key, synchronously,
// before the ordered sender sends the key's next request.
func (h resultHook) OnSendResult(_ context.Context, e sender.SendResult) {
	v, ok := h.u.rows.LoadAndDelete(e.Message)
	if !ok {
		return
	}
	rw := v.(*row)
	oc := h.u.r.classify(rw, e.Err)
	if oc.kind != outcomeSent && oc.kind != outcomeDead && rw.cancelKey != nil {
		rw.cancelKey(errBlocked)
	}
	h.u.report(rw, oc)
}

// report records rw's outcome and queues it for the completer. The queue holds
// MaxInFlight outcomes, one per row in flight, so this never blocks.
func (u *run) report(rw *row, oc outcome) {
	oc.row = rw
	u.outcomes <- oc
}
