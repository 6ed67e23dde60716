package deadletter

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/sbkit/sbkit"
	"github.com/sbkit/sbkit/internal/retry"
	"github.com/sbkit/sbkit/sender"
)

// Defaults of [RedriveOptions].
const (
	DefaultIdleTimeout     = 5 * time.Second
	DefaultMaxHeld         = 10000
	DefaultShutdownTimeout = 30 * time.Second
	DefaultSettleTimeout   = 30 * time.Second
	DefaultMaxInFlight     = 2048
	// DefaultRedrivePageSize is about the window of a [sender.Sender] with defaults
	// (sender.DefaultMaxInFlightMessages, 1,024): a re-drive receives one page per round
	// trip (ReceiveMessages cannot run concurrently), and the sender sends about its
	// window per round trip, so smaller pages would leave the sender waiting for them.
	DefaultRedrivePageSize = 1000
	// settleConcurrency bounds the abandons and completes of held messages at the end.
	settleConcurrency = 32
	// amqpConcurrency bounds the sends of messages whose body needs an [AMQPSender].
	amqpConcurrency = 16
	// releaseGrace is how long an operation waits after abandoning what it held. The
	// SDK's receiver keeps the link credit of its last ReceiveMessages, so an abandoned
	// message is delivered to it again at once and given back by the SDK's releaser
	// (azservicebus receiver.go, newReleaserFunc), until that credit is used up; a
	// receiver closed meanwhile would leave the message locked until its lock expires.
	// A wait is all there is: the SDK offers no way to take the credit back (no drain)
	// and no sign of what its releaser gave back (only its log), and a peek does not
	// show locks. A second means several round trips (an abandon, the delivery back, the
	// release) on any network; a shorter one scaled to measured round trips would still
	// guess at the broker's delay before it delivers again.
	releaseGrace = time.Second
)

// RedriveOptions configures [Redrive]. A nil *RedriveOptions means defaults. Negative
// counts and durations are errors wrapping [ErrInvalidOptions] unless a field says
// otherwise.
type RedriveOptions struct {
	// Filter selects the messages to re-drive; the others are skipped (held locked while
	// the re-drive runs, then abandoned). Default nil: every message.
	Filter *Filter

	// MaxMessages stops after this many messages were sent or failed. Messages received
	// past it are abandoned at once and not counted. Default (zero): no limit.
	MaxMessages int

	// Rate bounds the sends, in messages per second. Default (zero): no bound.
	Rate float64

	// DryRun re-drives nothing: the dead-letter queue is peeked (the source must be a
	// [Peeker]) and Stats.Moved counts what would move. Default false.
	DryRun bool

	// StopOnPermanentFailure stops taking new messages at the first send that fails
	// with an error that is not transient ([sbkit.IsTransient]; the sender has retried
	// transient ones), finishes what is in flight and returns an error wrapping
	// [ErrPermanentFailure]. Default false: a failed message is counted and left in the
	// dead-letter queue, and the re-drive goes on.
	StopOnPermanentFailure bool

	// Subscription, when set, is written to each copy's [RedriveSubscriptionProperty],
	// so that rules on the topic deliver the copy to that subscription only (see
	// [SubscriptionFilter]). Default "": no such property.
	Subscription string

	// Sender configures the [sender.Sender] the copies go through. Default nil:
	// sender's defaults with Ordered set, so that the messages of one session (or
	// partition key) arrive in the order of the dead-letter queue.
	Sender *sender.Options

	// PageSize is how many messages one ReceiveMessages call asks for. Default
	// DefaultRedrivePageSize (1,000), or with Rate set the messages of one second at that
	// rate when they are fewer (a page waits for its sends, and so do its messages'
	// locks). Two pages are in memory at a time (the next one is received while the last
	// one is sent): lower it for large messages.
	PageSize int

	// IdleTimeout ends the re-drive when a receive waited this long for nothing.
	// Default DefaultIdleTimeout (5s).
	IdleTimeout time.Duration

	// MaxInFlight bounds the messages whose copy was handed to the sender and whose
	// dead letter is not settled yet (sends and completes are separate round trips, so
	// the sender's own window does not bound them). With MaxHeld and two pages it bounds
	// the memory of a re-drive, whatever the queue's length. Default DefaultMaxInFlight
	// (2,048).
	MaxInFlight int

	// MaxHeld bounds how many messages the re-drive holds unsettled (skipped, failed,
	// or copied but not completed) while it runs: they are held locked so that the
	// receiver reaches the messages behind them, and abandoned (or completed) at the end.
	// The re-drive stops ([StopHoldLimit]) when it holds this many. Default
	// DefaultMaxHeld (10,000).
	MaxHeld int

	// ShutdownTimeout bounds the time the re-drive spends, after ctx ended, finishing the
	// sends and settlements it started. Default DefaultShutdownTimeout (30s).
	ShutdownTimeout time.Duration

	// SettleTimeout bounds each complete and abandon, retries included (the SDK retries
	// a settlement whose connection broke, for minutes by default). A settlement that
	// times out counts as failed: the message comes back when its lock expires.
	// Default DefaultSettleTimeout (30s).
	SettleTimeout time.Duration

	// Hooks observe progress ([ProgressHook]). Default none.
	Hooks []Hook

	// Logger receives failures, never payloads. Default: discards everything.
	Logger *slog.Logger
}

func (o *RedriveOptions) withDefaults() (RedriveOptions, progress, error) {
	var v RedriveOptions
	if o != nil {
		v = *o
	}
	var bad string
	switch {
	case v.MaxMessages < 0:
		bad = fmt.Sprintf("MaxMessages %d", v.MaxMessages)
	case v.Rate < 0:
		bad = fmt.Sprintf("Rate %v", v.Rate)
	case v.PageSize < 0:
		bad = fmt.Sprintf("PageSize %d", v.PageSize)
	case v.IdleTimeout < 0:
		bad = fmt.Sprintf("IdleTimeout %v", v.IdleTimeout)
	case v.MaxHeld < 0:
		bad = fmt.Sprintf("MaxHeld %d", v.MaxHeld)
	case v.ShutdownTimeout < 0:
		bad = fmt.Sprintf("ShutdownTimeout %v", v.ShutdownTimeout)
	case v.SettleTimeout < 0:
		bad = fmt.Sprintf("SettleTimeout %v", v.SettleTimeout)
	case v.MaxInFlight < 0:
		bad = fmt.Sprintf("MaxInFlight %d", v.MaxInFlight)
	}
	if bad != "" {
		return v, progress{}, fmt.Errorf("%w: negative %s", ErrInvalidOptions, bad)
	}
	p, err := newProgress(v.Hooks, v.Logger)
	if err != nil {
		return v, p, fmt.Errorf("%w: %w", ErrInvalidOptions, err)
	}
	if v.Sender == nil {
		v.Sender = &sender.Options{Ordered: true}
	}
	if v.PageSize == 0 {
		v.PageSize = DefaultRedrivePageSize
		if v.Rate > 0 {
			v.PageSize = int(min(float64(v.PageSize), max(1, math.Ceil(v.Rate))))
		}
	}
	if v.IdleTimeout == 0 {
		v.IdleTimeout = DefaultIdleTimeout
	}
	if v.MaxHeld == 0 {
		v.MaxHeld = DefaultMaxHeld
	}
	if v.ShutdownTimeout == 0 {
		v.ShutdownTimeout = DefaultShutdownTimeout
	}
	if v.SettleTimeout == 0 {
		v.SettleTimeout = DefaultSettleTimeout
	}
	if v.MaxInFlight == 0 {
		v.MaxInFlight = DefaultMaxInFlight
	}
	v.Logger = p.logger
	return v, p, nil
}

// Redrive moves dead-lettered messages back: it receives from src, a peek-lock receiver
// of a dead-letter queue, and for each message that matches [RedriveOptions.Filter]
// sends a copy ([RedriveCountProperty] documents what the copy keeps and changes)
// through a [sender.Sender] over dst, the entity to re-drive to (the original one, or
// any other), and completes the dead letter only after the broker accepted its copy.
// Sends are pipelined and batched and completes pipelined, so that the queue drains at
// the sender's speed. A message whose body is not one data section is sent through dst's
// SendAMQPAnnotatedMessage ([AMQPSender]), one at a time.
//
// Nothing is lost: a message whose copy failed (after the sender's retries of transient
// errors) stays in the dead-letter queue, abandoned at the end, and counts in
// Stats.Failed. A complete that fails after the copy was accepted counts in
// [Stats.CompleteFailed]; when the same message comes back during the re-drive it is
// completed without a second copy. Skipped and failed messages are held locked while
// the re-drive runs, so that it reaches the messages behind them; a held message whose
// lock expires comes back and is held again, not counted twice.
//
// The re-drive ends when a receive waits [RedriveOptions.IdleTimeout] for nothing, when
// a receive returns only messages it already handled, at MaxMessages, at MaxHeld, at the
// first permanent failure when StopOnPermanentFailure is set, or when ctx ends. It then
// stops receiving, waits for the copies in flight and their completes (after ctx ended,
// for at most ShutdownTimeout), abandons what it held and returns the Stats, with ctx's
// error when ctx ended. Redrive does not close src or dst.
//
// Re-driving a topic subscription's dead letters to the topic delivers the copies to
// every subscription whose rules match them: set [RedriveOptions.Subscription] and the
// rules [SubscriptionFilter] describes to reach that subscription only.
func Redrive(ctx context.Context, src Receiver, dst sbkit.MessageSender, opts *RedriveOptions) (Stats, error) {
	o, prog, err := opts.withDefaults()
	if err != nil {
		return Stats{}, err
	}
	if src == nil || dst == nil {
		return Stats{}, fmt.Errorf("%w: nil receiver or sender", ErrInvalidOptions)
	}
	if o.DryRun {
		p, ok := src.(Peeker)
		if !ok {
			return Stats{}, fmt.Errorf("%w: a dry run peeks, and the receiver (%T) has no PeekMessages", ErrInvalidOptions, src)
		}
		st, err := List(ctx, p, &PeekOptions{Filter: o.Filter, MaxMessages: o.MaxMessages, PageSize: o.PageSize}, func(*azservicebus.ReceivedMessage) error { return nil })
		prog.report(ctx, st)
		return st, err
	}
	r := &redrive{
		o:       o,
		prog:    prog,
		src:     src,
		tracked: map[int64]*entry{},
		amqpSem: make(chan struct{}, amqpConcurrency),
		window:  make(chan struct{}, o.MaxInFlight),
		start:   time.Now(),
	}
	// The sender reports each copy's outcome to the hook, which hands the copy's dead
	// letter to the goroutines that complete them: no goroutine waits per message.
	so := *o.Sender
	so.Hooks = append(append([]sender.Hook(nil), so.Hooks...), sender.SendResultHookFunc(r.onSendResult))
	if r.snd, err = sender.New(dst, &so); err != nil {
		return Stats{}, fmt.Errorf("deadletter: %w", err)
	}
	r.amqp, _ = dst.(AMQPSender)
	return r.run(ctx)
}

// The states of a message a re-drive tracks.
const (
	statePending = iota // its copy is in flight
	stateSkipped        // the filter did not match it
	stateFailed         // its copy failed
	stateCopied         // its copy was accepted, its complete failed
)

// entry is a message the re-drive received and has not completed: m is the delivery
// it holds locked (nil while the copy of the first delivery is in flight).
type entry struct {
	state int
	m     *azservicebus.ReceivedMessage
	tries int // completes of a copied message's later deliveries that failed
}

// maxCompleteTries bounds the completes of the later deliveries of a copied message
// whose first complete failed; past it the message is left to a later re-drive.
const maxCompleteTries = 3

type redrive struct {
	o       RedriveOptions
	prog    progress
	src     Receiver
	snd     *sender.Sender
	amqp    AMQPSender
	amqpSem chan struct{}
	window  chan struct{} // a token per message between its send and its settlement
	start   time.Time
	work    context.Context // the context of sends and settlements: ctx, plus ShutdownTimeout
	settles *workers[outcome]
	copies  sync.Map // a copy in the sender (*azservicebus.Message) -> its dead letter
	wg      sync.WaitGroup
	stop    atomic.Bool

	mu        sync.Mutex
	st        Stats
	tracked   map[int64]*entry // by sequence number
	held      int              // entries that are not pending
	permanent error
}

func (r *redrive) stats() Stats {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.st
	s.Errors = append([]error(nil), r.st.Errors...)
	s.Elapsed = time.Since(r.start)
	return s
}

func (r *redrive) run(ctx context.Context) (Stats, error) {
	work, cancelWork := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelWork()
	r.work = work
	r.settles = newWorkers(work, r.o.SettleTimeout, r.o.MaxInFlight, r.o.MaxInFlight, r.settleOutcome)
	done := make(chan struct{})
	defer close(done)
	go func() {
		select {
		case <-ctx.Done():
		case <-done:
			return
		}
		t := time.NewTimer(r.o.ShutdownTimeout)
		defer t.Stop()
		select {
		case <-t.C:
			cancelWork()
		case <-done:
		}
	}()

	reason, rerr := r.receiveLoop(ctx)

	// Finish what is in flight, then release what is held.
	_ = r.snd.Flush(work)
	r.wg.Wait()
	_ = r.snd.Close(work)
	r.settles.close()
	r.release()

	r.mu.Lock()
	perm := r.permanent
	if perm != nil && rerr == nil && reason != StopCancelled {
		// The failure may have come after the last receive: the run stopped for it all
		// the same, since StopOnPermanentFailure was set.
		reason = StopPermanentFailure
	}
	r.st.Stopped = reason
	r.mu.Unlock()
	st := r.stats()
	r.prog.report(ctx, st)
	switch {
	case rerr != nil:
		return st, rerr
	case reason == StopPermanentFailure:
		return st, fmt.Errorf("%w: %w", ErrPermanentFailure, perm)
	case reason == StopCancelled:
		return st, ctx.Err()
	}
	return st, nil
}

// page is what one ReceiveMessages call returned: n is how many it asked for, idle
// whether it waited IdleTimeout for them.
type page struct {
	msgs []*azservicebus.ReceivedMessage
	err  error
	idle bool
	n    int
}

// fetch is the only caller of src.ReceiveMessages, on a goroutine of its own, so that
// the next page is received while the last one is handled. It asks for PageSize
// messages, or what MaxMessages leaves (remaining), and stops when ctx ends; then it
// gives back what it received and closes pages.
func (r *redrive) fetch(ctx context.Context, pages chan<- page, remaining func() int64) {
	defer close(pages)
	for ctx.Err() == nil {
		n := int64(r.o.PageSize)
		if left := remaining(); left < n {
			n = max(left, 1)
		}
		rctx, cancel := context.WithTimeout(ctx, r.o.IdleTimeout)
		msgs, err := r.src.ReceiveMessages(rctx, int(n), nil)
		idle := rctx.Err() != nil && ctx.Err() == nil
		cancel()
		select {
		case pages <- page{msgs: msgs, err: err, idle: idle, n: int(n)}:
		case <-ctx.Done():
			for _, m := range msgs {
				r.giveBack(m)
			}
			return
		}
		if err != nil && !idle && len(msgs) == 0 {
			return // the receive failed: the loop stops on this page
		}
	}
}

func (r *redrive) receiveLoop(ctx context.Context) (StopReason, error) {
	lim := limiter{rate: r.o.Rate, start: time.Now()}
	var started atomic.Int64 // sends started, against MaxMessages
	remaining := func() int64 {
		if r.o.MaxMessages <= 0 {
			return math.MaxInt64
		}
		return int64(r.o.MaxMessages) - started.Load()
	}
	fctx, stopFetch := context.WithCancel(ctx)
	pages := make(chan page, 1)
	go r.fetch(fctx, pages, remaining)
	defer func() {
		// Stop receiving, and give back what was received meanwhile.
		stopFetch()
		for p := range pages {
			for _, m := range p.msgs {
				r.giveBack(m)
			}
		}
	}()
	extra := 0 // receive rounds for copied messages that lost their lock
	// more reports, when the queue seems done, whether copied messages whose complete
	// lost the lock are back in it: then one more round receives and completes them.
	more := func() bool {
		if extra >= maxCompleteTries {
			return false
		}
		_ = r.snd.Flush(r.work)
		r.wg.Wait()
		r.mu.Lock()
		defer r.mu.Unlock()
		for _, e := range r.tracked {
			if e.state == stateCopied && e.m == nil && e.tries < maxCompleteTries {
				extra++
				return true
			}
		}
		return false
	}
	for {
		switch {
		case ctx.Err() != nil:
			return StopCancelled, nil
		case r.stop.Load():
			return StopPermanentFailure, nil
		case remaining() <= 0:
			return StopMaxMessages, nil
		}
		r.mu.Lock()
		held := r.held
		r.mu.Unlock()
		if held >= r.o.MaxHeld {
			return StopHoldLimit, nil
		}
		var p page
		select {
		case p = <-pages:
		case <-ctx.Done():
			return StopCancelled, nil
		}
		msgs, err, idle := p.msgs, p.err, p.idle
		fresh := 0
		for i, m := range msgs {
			if ctx.Err() != nil || r.stop.Load() || remaining() <= 0 {
				// Stop taking new messages: give back the rest of the page at once.
				for _, rest := range msgs[i:] {
					r.giveBack(rest)
				}
				break
			}
			isNew, send, complete := r.admit(m)
			if isNew {
				fresh++
			}
			if complete {
				// A message whose copy was accepted came back: complete it, no second copy.
				fresh++
				r.wg.Add(1)
				r.completeCopied(*m.SequenceNumber, m)
			}
			if !send {
				continue
			}
			started.Add(1)
			if err := lim.wait(ctx); err != nil {
				// ctx ended while waiting for the rate: the message was not sent.
				r.fail(m, err, false)
				continue
			}
			select {
			case r.window <- struct{}{}:
			case <-ctx.Done():
				r.fail(m, ctx.Err(), false)
				continue
			}
			r.send(m)
		}
		r.prog.report(ctx, r.stats())
		switch {
		case len(msgs) > 0 && fresh == 0 && len(msgs) < p.n:
			// Not a full page, and nothing new in it: what the queue has left is what
			// this re-drive already handled.
			if more() {
				continue
			}
			return StopAllSeen, nil
		case len(msgs) > 0:
			if err != nil && !idle {
				return StopError, fmt.Errorf("deadletter: receive: %w", err)
			}
			continue
		case ctx.Err() != nil:
			return StopCancelled, nil
		case err != nil && !idle:
			return StopError, fmt.Errorf("deadletter: receive: %w", err)
		case more():
			continue
		default:
			return StopDrained, nil
		}
	}
}

// admit records a received message: isNew when the re-drive has not seen it before,
// send when its copy is to be sent now, complete when its copy was accepted before and
// it is to be completed now.
func (r *redrive) admit(m *azservicebus.ReceivedMessage) (isNew, send, complete bool) {
	if m.SequenceNumber == nil {
		// Every message the broker delivers has a sequence number; without one this
		// message cannot be recognised when it comes back, so it is left alone.
		r.giveBack(m)
		return false, false, false
	}
	seq := *m.SequenceNumber
	r.mu.Lock()
	defer r.mu.Unlock()
	if e, ok := r.tracked[seq]; ok {
		// It came back (its lock expired or was lost): hold the new delivery instead of
		// the old one.
		e.m = m
		return false, false, e.state == stateCopied && e.tries < maxCompleteTries
	}
	r.st.Seen++
	if !r.o.Filter.Matches(m) {
		r.st.Skipped++
		r.tracked[seq] = &entry{state: stateSkipped, m: m}
		r.held++
		return true, false, false
	}
	r.tracked[seq] = &entry{state: statePending}
	return true, true, false
}

// outcome is the outcome of the copy of m: err is nil when the broker accepted it.
type outcome struct {
	m   *azservicebus.ReceivedMessage
	err error
}

// send sends m's copy; its outcome settles m. It returns the window's token once m is
// settled (or failed).
func (r *redrive) send(m *azservicebus.ReceivedMessage) {
	release := func() { <-r.window }
	if !simpleBody(m.RawAMQPMessage) {
		if r.amqp == nil {
			r.fail(m, fmt.Errorf("message %q: %w", m.MessageID, ErrUnsupportedBody), true)
			release()
			return
		}
		select {
		case r.amqpSem <- struct{}{}:
		case <-r.work.Done():
			r.fail(m, r.work.Err(), false)
			release()
			return
		}
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			defer release()
			defer func() { <-r.amqpSem }()
			err := r.amqp.SendAMQPAnnotatedMessage(r.work, redriveAMQPCopy(m, r.o.Subscription), nil)
			r.settle(m, err, func(m *azservicebus.ReceivedMessage) error { return r.complete(m) })
		}()
		return
	}
	// Done by settleOutcome, once the sender reported the outcome (onSendResult), which
	// may happen before SendAsync returns.
	r.wg.Add(1)
	c := redriveCopy(m, r.o.Subscription)
	r.copies.Store(c, m)
	if _, err := r.snd.SendAsync(r.work, c); err != nil {
		r.copies.Delete(c)
		r.fail(m, err, true)
		release()
		r.wg.Done()
	}
}

// onSendResult is the sender's [sender.SendResultHook]: it hands the outcome of an
// accepted copy to the goroutines that settle. It does not block: the queue has room
// for every message that holds a token of the window. A copy that was not accepted
// (Rejected) is handled by send, which got the error from SendAsync.
func (r *redrive) onSendResult(ctx context.Context, e sender.SendResult) {
	if e.Rejected {
		return
	}
	if m, ok := r.copies.LoadAndDelete(e.Message); ok {
		r.settles.put(outcome{m: m.(*azservicebus.ReceivedMessage), err: e.Err})
	}
}

// settleOutcome settles the dead letter of a copy whose outcome is known, on one of
// r.settles' goroutines, and returns its token of the window.
func (r *redrive) settleOutcome(dl *deadline, o outcome) {
	defer r.wg.Done()
	defer func() { <-r.window }()
	r.settle(o.m, o.err, func(m *azservicebus.ReceivedMessage) error {
		return dl.end(r.src.CompleteMessage(dl.begin(), m, nil))
	})
}

// settle completes m after its copy was accepted, or records the failure.
// complete completes m within SettleTimeout.
func (r *redrive) settle(m *azservicebus.ReceivedMessage, sendErr error, complete func(*azservicebus.ReceivedMessage) error) {
	if sendErr != nil {
		r.fail(m, sendErr, true)
		return
	}
	seq := *m.SequenceNumber
	cerr := complete(m)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.st.Moved++
	e := r.tracked[seq]
	if cerr == nil {
		if e.m != nil {
			// A second delivery arrived while the copy was in flight: the first lock
			// had expired, yet the complete succeeded; release the second one too.
			r.wg.Add(1)
			go r.completeCopied(seq, e.m)
			e.state = stateCopied
			r.held++
			return
		}
		delete(r.tracked, seq)
		return
	}
	r.st.CompleteFailed++
	r.st.addError(fmt.Errorf("message %q (sequence number %d): copy sent, complete failed: %w", m.MessageID, seq, cerr))
	r.o.Logger.Warn("deadletter: copy sent, complete failed", "messageID", m.MessageID, "sequenceNumber", seq, "error", cerr)
	e.state = stateCopied
	r.held++
	switch {
	case e.m != nil:
		r.wg.Add(1)
		go r.completeCopied(seq, e.m)
	case !sbkit.IsLockLost(cerr):
		e.m = m // the lock may still hold: the end of the re-drive completes it again
	}
}

// completeCopied completes a delivery of a message whose copy was accepted.
func (r *redrive) completeCopied(seq int64, m *azservicebus.ReceivedMessage) {
	defer r.wg.Done()
	err := r.complete(m)
	r.mu.Lock()
	defer r.mu.Unlock()
	e, ok := r.tracked[seq]
	if !ok || e.m != m {
		return
	}
	if err != nil {
		// Still held as copied: it comes back and is completed then (up to
		// maxCompleteTries), or at the end while its lock holds.
		e.tries++
		if sbkit.IsLockLost(err) {
			e.m = nil
		}
		return
	}
	delete(r.tracked, seq)
	r.held--
}

// fail records that m's copy was not sent: m stays held, to be abandoned.
func (r *redrive) fail(m *azservicebus.ReceivedMessage, err error, canStop bool) {
	seq := *m.SequenceNumber
	r.mu.Lock()
	defer r.mu.Unlock()
	r.st.Failed++
	r.st.addError(fmt.Errorf("message %q (sequence number %d): %w", m.MessageID, seq, err))
	r.o.Logger.Warn("deadletter: copy failed", "messageID", m.MessageID, "sequenceNumber", seq, "error", err)
	e := r.tracked[seq]
	e.state = stateFailed
	r.held++
	if e.m == nil {
		e.m = m
	}
	if canStop && r.o.StopOnPermanentFailure && !sbkit.IsTransient(err) && !errors.Is(err, context.Canceled) && r.permanent == nil {
		r.permanent = err
		r.stop.Store(true)
	}
}

// complete and abandon settle m within SettleTimeout.
func (r *redrive) complete(m *azservicebus.ReceivedMessage) error {
	ctx, cancel := context.WithTimeout(r.work, r.o.SettleTimeout)
	defer cancel()
	return r.src.CompleteMessage(ctx, m, nil)
}

func (r *redrive) abandon(m *azservicebus.ReceivedMessage) error {
	ctx, cancel := context.WithTimeout(r.work, r.o.SettleTimeout)
	defer cancel()
	return r.src.AbandonMessage(ctx, m, nil)
}

// giveBack abandons m at once, untracked.
func (r *redrive) giveBack(m *azservicebus.ReceivedMessage) {
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		_ = r.abandon(m)
	}()
}

// release settles what the re-drive holds: completes the messages whose copy was
// accepted, abandons the others. A settlement that fails leaves the message to come
// back when its lock expires.
func (r *redrive) release() {
	r.mu.Lock()
	type item struct {
		m      *azservicebus.ReceivedMessage
		copied bool
	}
	items := make([]item, 0, len(r.tracked))
	for _, e := range r.tracked {
		if e.m != nil {
			items = append(items, item{e.m, e.state == stateCopied})
		}
	}
	r.mu.Unlock()
	sem := make(chan struct{}, settleConcurrency)
	var wg sync.WaitGroup
	for _, it := range items {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			if it.copied {
				_ = r.complete(it.m)
			} else {
				_ = r.abandon(it.m)
			}
		}()
	}
	wg.Wait()
	if len(items) > 0 {
		graceWait(r.work)
	}
}

// graceWait waits releaseGrace, or until ctx ends.
func graceWait(ctx context.Context) {
	t := time.NewTimer(releaseGrace)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// limiter spaces sends rate per second apart, from start.
type limiter struct {
	rate  float64
	start time.Time
	n     int64
}

func (l *limiter) wait(ctx context.Context) error {
	if l.rate <= 0 {
		return nil
	}
	due := l.start.Add(time.Duration(float64(l.n) / l.rate * float64(time.Second)))
	l.n++
	d := time.Until(due)
	if d <= 0 {
		return nil
	}
	if !retry.Wait(ctx, d) {
		return ctx.Err()
	}
	return nil
}
