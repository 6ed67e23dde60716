package pgoutbox

import (
	"context"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/sbkit/sbkit/outbox/pgoutbox/internal/shutdown"
	"github.com/sbkit/sbkit/sender"
)

// run is one Run of a Relay: its goroutines (the claim loop, the dispatcher, the
// listener, and one per claim being marked), its connections, its senders, its orders
// and its rows in flight.
type run struct {
	r *Relay

	life  context.Context // ends when the run aborts: sends are cancelled
	abort context.CancelCauseFunc

	stopCtx   context.Context // ends when claiming must stop
	stopNow   context.CancelFunc
	deadlines *shutdown.Deadlines // the abort at the earliest grace's end, then the marks' end
	done      chan struct{}       // closed when Run has returned

	markCtx    context.Context // ends finalMarkTimeout after the run aborted: bounds the marks
	markCancel context.CancelFunc

	wake      chan struct{} // a claim may find rows
	dispatchq chan *claim   // claims whose rows go to the senders, in claim order

	// The claim loop's scan position: a claim starts after the rows the previous one
	// found when that one was full, and from the first row when it was not, when rescan
	// is set (rows behind the position may have become free), and every PollInterval.
	after      int64
	scannedAll time.Time
	rescan     atomic.Bool
	rows       sync.Map // *azservicebus.Message -> *row, for the rows given to a sender
	conns      *conns

	mu         sync.Mutex
	inFlight   int           // claimed rows not yet marked
	bytes      int64         // their bodies' and properties' bytes
	openClaims int           // claims not yet marked
	cut        bool          // the grace ended with rows in flight
	idle       chan struct{} // closed when inFlight drops to 0; nil when nobody waits

	sendMu sync.Mutex // held by the round of rows being given to the senders (sendRows)

	omu       sync.Mutex
	orders    map[string]*order    // by destination + "\x00" + order key
	contended map[string]time.Time // orders another relay holds, left alone until then

	lmu        sync.Mutex       // guards what lanes.go keeps: these, and the orders' and rows' fields it names
	given      map[string]int   // rows given to each destination's sender, outcome unknown
	givenBytes map[string]int64 // their weights (see fitLocked)
	ready      []*order         // orders whose waiting rows may go, for handOver
	handing    bool             // handOver runs
	roomWait   chan struct{}    // closed when a row leaves given; nil when nobody waits

	destMu       sync.Mutex
	dests        map[string]*dest
	destsClosing bool // the run's end closes the senders: dest makes no new one

	workers sync.WaitGroup // listener, marks

	retryMu    sync.Mutex
	retryTimer *time.Timer // wakes the claim loop when a retry is due
	retryAt    time.Time
}

// dest is a destination's sender.
type dest struct {
	name string
	s    *sender.Sender
	dst  any         // what Destinations returned, closed at the end of the run or when retired
	ok   atomic.Bool // the broker accepted a send of it
}

func newRun(r *Relay) *run {
	u := &run{r: r, done: make(chan struct{}), wake: make(chan struct{}, 1), dests: make(map[string]*dest),
		dispatchq: make(chan *claim, r.o.MaxOpenClaims),
		conns:     &conns{pool: r.ob.pool, owner: r.o.Owner}, orders: make(map[string]*order), contended: make(map[string]time.Time), given: make(map[string]int), givenBytes: make(map[string]int64)}
	u.stopCtx, u.stopNow = context.WithCancel(context.Background())
	u.life, u.abort = context.WithCancelCause(context.Background())
	u.markCtx, u.markCancel = context.WithCancel(context.Background())
	u.deadlines = shutdown.New(shutdown.Options{Cut: u.cutNow, Hard: u.markCancel, HardAfter: finalMarkTimeout})
	return u
}

// stop asks the run to stop claiming and to abort what is still in flight when grace
// ends. Every call counts: the earliest end of the graces given (Run's ShutdownGrace,
// each Close's context) aborts the run.
func (u *run) stop(grace context.Context) {
	u.deadlines.Arm(grace)
	u.stopNow()
}

// cutNow aborts the run: the sends in flight are cancelled (the marks get
// finalMarkTimeout, see deadlines). The deadlines call it once.
func (u *run) cutNow() {
	u.mu.Lock()
	u.cut = u.inFlight > 0
	u.mu.Unlock()
	u.abort(errClosing)
}

// cutShort reports whether the grace ended with rows in flight.
func (u *run) cutShort() bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.cut
}

// signal wakes the claim loop.
func (u *run) signal() {
	select {
	case u.wake <- struct{}{}:
	default:
	}
}

// serve runs the claim loop until ctx ends or stop, then shuts the run down.
func (u *run) serve(ctx context.Context) {
	listenCtx, stopListening := context.WithCancel(context.Background())
	if !u.r.o.DisableListen {
		u.workers.Go(func() { u.listen(listenCtx) })
	}
	// The claim loop claims the next rows while the dispatcher waits for room in the
	// senders' windows, so that rows are ready when room frees.
	dispatched := make(chan struct{})
	go func() {
		defer close(dispatched)
		for c := range u.dispatchq {
			u.dispatch(c)
		}
	}()
	claimCtx, stopClaims := context.WithCancel(ctx)
	defer stopClaims()
	stopWatch := context.AfterFunc(u.stopCtx, stopClaims)
	defer stopWatch()
	u.claimLoop(claimCtx)
	close(u.dispatchq)

	if ctx.Err() != nil {
		grace, cancel := shutdown.Grace(u.r.o.ShutdownGrace) // negative: no limit
		defer cancel()
		u.stop(grace)
	}
	<-dispatched // every claimed row is in a sender, waits for its order, or is reported (the abort ends a wait for room)
	u.waitIdle(u.life.Done())
	u.destMu.Lock()
	u.destsClosing = true // the rows still waiting for their orders are released (handOver)
	u.destMu.Unlock()
	for _, d := range u.destList() {
		_ = d.s.Close(u.life) // nothing in flight, or aborted: cancels the requests in flight
	}
	u.waitIdle(nil) // the marks of the sends the closes cut short
	stopListening()
	u.workers.Wait()
	u.deadlines.Disarm()
	u.markCancel()
	u.retryMu.Lock()
	if u.retryTimer != nil {
		u.retryTimer.Stop()
	}
	u.retryMu.Unlock()
	u.conns.closeIdle()
	u.abort(errClosing) // releases the run's contexts
	closeCtx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	for _, d := range u.destList() {
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

// take reserves up to n rows of the in-flight window and a claim, and returns how many
// rows it got (0: no room, no bytes left, or MaxOpenClaims claims open) and the bytes
// the claim may read; the claim gives back what it did not use.
func (u *run) take(n int) (int, int64) {
	u.mu.Lock()
	defer u.mu.Unlock()
	budget := u.r.o.MaxInFlightBytes - u.bytes
	if u.openClaims >= u.r.o.MaxOpenClaims || budget <= 0 {
		return 0, 0
	}
	got := max(0, min(n, u.r.o.MaxInFlight-u.inFlight))
	if got > 0 {
		u.inFlight += got
		u.openClaims++
	}
	return got, budget
}

// addBytes adds n (negative: removes) bytes to the window's bytes.
func (u *run) addBytes(n int64) {
	u.mu.Lock()
	u.bytes += n
	u.mu.Unlock()
	u.r.stats.inFlightBytes.Add(n)
}

// giveBack returns what a claim reserved with take and did not use: rows, and the claim
// itself when it took none.
func (u *run) giveBack(rows int, claim bool) {
	u.mu.Lock()
	if claim {
		u.openClaims--
	}
	u.mu.Unlock()
	u.addInFlight(-rows)
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

// claimLoop claims rows and hands them to the dispatcher until ctx ends (Run's context
// ended, or stop). Claims are made one at a time; up to MaxOpenClaims are open while
// their rows are sent.
func (u *run) claimLoop(ctx context.Context) {
	poll := time.NewTimer(0)
	defer poll.Stop()
	errRetries := dbRetry.Retries()
	for {
		select {
		case <-ctx.Done():
			return
		default:
		}
		if n, budget := u.take(u.r.o.ClaimBatch); n > 0 {
			// The statement runs to its end when claiming stops (a cancelled query costs
			// its connection); only an abort cancels it.
			c, more, err := u.claim(n, budget)
			got := 0
			if c != nil {
				got = len(c.rows)
			}
			u.giveBack(n-got, c == nil)
			if err != nil {
				if ctx.Err() != nil {
					return
				}
				if !u.r.retryDB(ctx, &errRetries, "claim", 0, err) {
					return
				}
				continue
			}
			errRetries.Reset()
			if c != nil {
				u.dispatchq <- c // never blocks: it holds MaxOpenClaims claims
			}
			if more {
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

// dispatch hands a claim's rows to the senders once load has read their messages (all
// released unsent when it failed), in id order, with the contexts join chose: the rows
// of an order that may have later rows in flight (a session, a partition key, a
// transaction's rows sent together) share a context per claim that a failure of any row
// of the order cancels, synchronously in the sender's result hook, so that the ordered
// sender drops the later rows instead of letting them overtake the failed one. A row
// whose order has earlier rows in a sender still waits for them (see lanes.go).
// Several rows of one transaction get the transaction as their sender OrderKey (batched
// together, one request at a time, in order); a transaction's single row gets none and
// batches with any other.
func (u *run) dispatch(c *claim) {
	<-c.loaded
	rows := make([]*row, 0, len(c.rows))
	for _, rw := range c.rows {
		switch {
		case c.loadErr != nil:
			u.report(rw, outcome{kind: outcomeReleased, err: c.loadErr})
		case rw.decodeErr != nil:
			u.report(rw, u.r.classify(rw, rw.decodeErr))
		case rw.ctx == nil:
			u.report(rw, outcome{kind: outcomeReleased, err: errBlocked})
		default:
			rows = append(rows, rw)
		}
	}
	u.give(u.hold(rows)) // the others wait for their orders (see lanes.go)
}

// ended is a context that has ended.
var ended = func() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}()

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
	if u.destsClosing {
		return nil, errClosing
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
	d := &dest{name: name, s: s, dst: dst}
	u.dests[name] = d
	return d, nil
}

// destList returns the destinations' senders. The closes at the end of a run range
// over a copy: a result those closes report may retire a sender meanwhile.
func (u *run) destList() []*dest {
	u.destMu.Lock()
	defer u.destMu.Unlock()
	return slices.Collect(maps.Values(u.dests))
}

// retire forgets d after its sender failed for good (see linkFailed): the
// destination's next rows get a new sender from Destinations. d's sender is closed
// once the requests it still holds end (they fail on the same link), and then what
// Destinations returned. Only the first call for d counts.
func (u *run) retire(d *dest, err error) {
	u.destMu.Lock()
	if u.dests[d.name] != d {
		u.destMu.Unlock()
		return
	}
	delete(u.dests, d.name)
	u.destMu.Unlock()
	u.r.o.Logger.Warn("pgoutbox: destination's sender failed for good, asking Destinations for a new one",
		"destination", d.name, "err", err)
	u.workers.Go(func() {
		_ = d.s.Close(u.life)
		closeDest(d.dst)
	})
}

// closeDest closes what Destinations returned, if it has a Close method, within a
// second.
func closeDest(dst any) {
	if c, ok := dst.(interface{ Close(context.Context) error }); ok {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = c.Close(ctx)
	}
}

// resultHook learns every outcome of the run's senders.
type resultHook struct{ u *run }

// OnSendResult classifies the outcome of a row's send and records it. A sender whose
// link failed for good is retired first; a row that failed so on a sender the broker
// had accepted sends from (the entity was deleted and may be back) is retried through
// the new one instead of being dead-lettered.
func (h resultHook) OnSendResult(_ context.Context, e sender.SendResult) {
	v, ok := h.u.rows.LoadAndDelete(e.Message)
	if !ok {
		return
	}
	rw := v.(*row)
	d := rw.dest
	if e.Err == nil {
		d.ok.Store(true)
	}
	oc := h.u.r.classify(rw, e.Err)
	if e.Attempts == 0 && rw.ctx.Err() != nil && oc.kind == outcomeRetry {
		// Its context ended before any request carried it (the sender rejected it, or it
		// waited in an ordered lane or an open batch): never sent, no attempt. The sender
		// counts an attempt before each request, so 0 means it never reached the broker.
		oc = outcome{kind: outcomeReleased, err: e.Err}
	}
	if e.Err != nil && linkFailed(e.Err) {
		h.u.retire(d, e.Err)
		if oc.kind == outcomeDead && d.ok.Load() && rw.attempts == 0 {
			oc = outcome{kind: outcomeRetry, err: e.Err, delay: h.u.r.retryDelay(rw.attempts + 1)}
		}
	}
	h.u.report(rw, oc)
	h.u.left(rw)
}

// report records rw's outcome. A row that will be sent again stops the later rows of
// its order first, synchronously, before the ordered sender sends the order's next
// request. The claim's last outcome starts its mark.
func (u *run) report(rw *row, oc outcome) {
	if oc.kind == outcomeRetry || oc.kind == outcomeReleased {
		u.fail(rw)
	}
	oc.row = rw
	if rw.claim.add(oc) {
		u.workers.Go(func() { u.mark(rw.claim) })
	}
}
