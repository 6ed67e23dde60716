package sender

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/sbkit/sbkit"
	ihooks "github.com/sbkit/sbkit/internal/hooks"
	"github.com/sbkit/sbkit/internal/retry"
	"golang.org/x/sync/semaphore"
)

// Sender is a bounded, pipelined, auto-batching sender; see the package documentation.
// Create one with [New]; the zero value is not usable. A Sender is safe for concurrent use.
// It owns goroutines while messages are in flight: call Close when done.
type Sender struct {
	dst   sbkit.MessageSender
	batch sbkit.BatchSender // nil when batching is off
	opts  Options
	retry retry.Policy
	log   *slog.Logger

	msgSem, byteSem *semaphore.Weighted
	life            context.Context // ends when Close gives up waiting
	kill            context.CancelCauseFunc

	hooks hooks
	epoch time.Time // origin of Result.start
	stats counters

	closedFlag atomic.Bool
	closeDone  chan struct{}
	goroutines sync.WaitGroup // every goroutine and linger timer the Sender starts

	mu      sync.Mutex
	closed  bool
	pending int           // accepted messages without an outcome
	idle    chan struct{} // closed when pending drops to 0; nil when nobody waits
	lanes   map[string]*lane
	work    []*Result // unordered single messages waiting for a worker
	jobs    int       // len(work) + single messages being sent by workers
	workers int       // running workers; kept >= jobs
}

// New returns a Sender that sends to dst: an [*azservicebus.Sender], the sender of
// package sbtest, or any [sbkit.MessageSender]. Batching is on unless
// [Options.DisableBatching] is set, when dst is an [*azservicebus.Sender] (New adapts it
// with [sbkit.NewBatchSender]) or implements [sbkit.BatchSender]; any other dst gets one
// request per message. A nil opts means defaults. New returns [ErrNilDestination] for a
// nil dst and an error wrapping [ErrInvalidOptions] for invalid options.
func New(dst sbkit.MessageSender, opts *Options) (*Sender, error) {
	var batch sbkit.BatchSender
	switch d := dst.(type) {
	case nil:
		return nil, ErrNilDestination
	case *azservicebus.Sender:
		if d == nil {
			return nil, ErrNilDestination
		}
		batch = sbkit.NewBatchSender(d)
	case sbkit.BatchSender:
		batch = d
	}
	o, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	if o.DisableBatching {
		batch = nil
	}
	s := &Sender{
		dst:       dst,
		opts:      o,
		log:       o.Logger,
		msgSem:    semaphore.NewWeighted(int64(o.MaxInFlightMessages)),
		byteSem:   semaphore.NewWeighted(o.MaxInFlightBytes),
		closeDone: make(chan struct{}),
		lanes:     make(map[string]*lane),
		batch:     batch,
		retry:     retry.Resolve(o.Retry, retryDefaults),
	}
	s.life, s.kill = context.WithCancelCause(context.Background())
	s.hooks = newHooks(o.Hooks)
	s.epoch = time.Now()
	return s, nil
}

// Batching reports whether the Sender batches messages.
func (s *Sender) Batching() bool { return s.batch != nil }

// Stats returns a snapshot of the Sender's counters and gauges.
func (s *Sender) Stats() Stats { return s.stats.snapshot() }

// Send sends message and returns its outcome: nil once the broker accepted it, a
// *[SendError] otherwise (see [Sender.SendAsync] for the causes). It blocks while the windows are
// full, then until the outcome is known.
func (s *Sender) Send(ctx context.Context, message *azservicebus.Message) error {
	r, err := s.SendAsync(ctx, message)
	if err != nil {
		return err
	}
	<-r.done
	return r.err
}

// SendAsync accepts message for sending and returns its [Result], which completes once the
// outcome is known. It blocks while the windows are full, until room frees or ctx ends.
// When the message is not accepted it returns a nil Result and a *[SendError] whose cause
// is [sbkit.ErrNilMessage], [ErrClosed] or ctx's error; nothing is in flight then.
// Exactly one of the two results is non-nil. ctx also bounds the message's time in a
// linger batch and its retries (see the package documentation).
func (s *Sender) SendAsync(ctx context.Context, message *azservicebus.Message) (*Result, error) {
	return s.admit(ctx, message, true)
}

// TrySend is SendAsync without blocking: when a window is full it returns a *[SendError]
// whose cause is [ErrFull]. ctx is not waited on; it bounds the message once accepted,
// as in SendAsync, and is what the hooks see.
func (s *Sender) TrySend(ctx context.Context, message *azservicebus.Message) (*Result, error) {
	return s.admit(ctx, message, false)
}

// Schedule sets message's ScheduledEnqueueTime to at ([sbkit.SetSchedule]) and sends it
// like Send: the broker makes it available at that time. No sequence number is returned;
// use [azservicebus.Sender.ScheduleMessages] when you need one to cancel the message.
func (s *Sender) Schedule(ctx context.Context, message *azservicebus.Message, at time.Time) error {
	if err := sbkit.SetSchedule(message, at); err != nil {
		return &SendError{Err: err}
	}
	return s.Send(ctx, message)
}

// SendAll sends messages, pipelined and batched, and waits for all their outcomes. It
// returns nil when every message was sent, otherwise a *[SendAllError] with one entry per
// message (nil for those sent). When ctx ends while SendAll waits for room, the messages
// not yet accepted fail with ctx's error; the accepted ones still get their own outcome.
func (s *Sender) SendAll(ctx context.Context, messages []*azservicebus.Message) error {
	results := make([]*Result, len(messages))
	errs := make([]error, len(messages))
	failed := false
	for i, m := range messages {
		results[i], errs[i] = s.admit(ctx, m, true)
		failed = failed || errs[i] != nil
	}
	for i, r := range results {
		if r != nil {
			<-r.done
			errs[i] = r.err
			failed = failed || r.err != nil
		}
	}
	if !failed {
		return nil
	}
	return &SendAllError{Errs: errs}
}

// Flush sends the messages waiting in linger batches at once, whatever [Options.Linger],
// and waits until no message is in flight, or until ctx ends (then it returns ctx's
// error). Messages accepted while Flush waits are waited for too; they wait in their own
// linger batch as usual.
func (s *Sender) Flush(ctx context.Context) error {
	s.mu.Lock()
	s.sealAllLocked()
	if s.pending == 0 {
		s.mu.Unlock()
		return nil
	}
	if s.idle == nil {
		s.idle = make(chan struct{})
	}
	idle := s.idle
	s.mu.Unlock()
	select {
	case <-idle:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Close stops accepting messages (later sends fail with [ErrClosed]), sends what waits in
// linger batches at once, whatever [Options.Linger], and waits for every outcome. If ctx ends first, the requests in flight
// and the backoffs are cancelled, their messages fail (cause ErrClosed or a context
// error), Close waits for those outcomes and returns ctx's error. No goroutine of the
// Sender remains when Close returns. Closing twice is safe: the second call waits for the
// first (or for its own ctx) and returns nil. Close does not close dst.
func (s *Sender) Close(ctx context.Context) error {
	s.mu.Lock()
	first := !s.closed
	s.closed = true
	s.closedFlag.Store(true)
	s.mu.Unlock()
	if !first {
		select {
		case <-s.closeDone:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	defer close(s.closeDone)
	err := s.Flush(ctx)
	if err != nil {
		s.kill(ErrClosed)
		_ = s.Flush(context.Background()) // every request now ends promptly
		err = fmt.Errorf("sender: close: %w", err)
	}
	s.kill(ErrClosed)
	s.goroutines.Wait() // they are all returning: nothing is in flight
	return err
}

// admit shows message to the SendStartHooks, then accepts it or reports why not.
func (s *Sender) admit(ctx context.Context, m *azservicebus.Message, block bool) (*Result, error) {
	if m == nil {
		return nil, &SendError{Err: sbkit.ErrNilMessage}
	}
	id, _ := sbkit.EnsureMessageID(m)
	if s.opts.DefaultTTL > 0 && m.TimeToLive == nil {
		_ = sbkit.SetTTL(m, s.opts.DefaultTTL)
	}
	ihooks.Call(ctx, s.log, "sender", "SendStartHook", s.hooks.start, func(h SendStartHook) {
		if next := h.OnSendStart(ctx, SendStart{Message: m}); next != nil {
			ctx = next
		}
	})
	r, err := s.accept(ctx, m, id, block)
	if err != nil {
		err = &SendError{MessageID: id, Err: err}
		s.stats.rejected.Add(1)
		s.reportResult(ctx, SendResult{Message: m, MessageID: id, Err: err, Rejected: true})
		return nil, err
	}
	return r, nil
}

// accept takes room in the windows and hands the message to the pipeline. Its error is
// the cause of the refusal.
func (s *Sender) accept(ctx context.Context, m *azservicebus.Message, id string, block bool) (*Result, error) {
	if s.closedFlag.Load() {
		return nil, ErrClosed
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	size := sbkit.MessageSize(m)
	weight := min(size, s.opts.MaxInFlightBytes)
	if block {
		if err := s.msgSem.Acquire(ctx, 1); err != nil {
			return nil, err
		}
		if err := s.byteSem.Acquire(ctx, weight); err != nil {
			s.msgSem.Release(1)
			return nil, err
		}
	} else {
		if !s.msgSem.TryAcquire(1) {
			return nil, ErrFull
		}
		if !s.byteSem.TryAcquire(weight) {
			s.msgSem.Release(1)
			return nil, ErrFull
		}
	}
	r := &Result{msg: m, ctx: ctx, id: id, key: s.keyOf(m), size: size, weight: weight, done: make(chan struct{})}
	if len(s.hooks.result) > 0 {
		r.start = time.Since(s.epoch)
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		s.byteSem.Release(weight)
		s.msgSem.Release(1)
		return nil, ErrClosed
	}
	s.pending++
	s.stats.addInFlight(size)
	switch {
	case s.batch != nil:
		s.addToBatchLocked(r)
	case s.opts.Ordered && r.key != "":
		s.enqueueLocked(s.laneLocked(r.key), []*Result{r})
	default:
		s.dispatchLocked(r)
	}
	s.mu.Unlock()
	return r, nil
}

// finish completes r with err, exactly once.
func (s *Sender) finish(r *Result, err error) {
	if !r.state.CompareAndSwap(statePending, stateFinishing) {
		s.log.Error("sender: internal error: message completed twice", "messageID", r.id)
		return
	}
	if err != nil {
		err = &SendError{MessageID: r.id, Attempts: r.attempts, Err: err}
		s.stats.failed.Add(1)
		s.log.Warn("sender: message not sent", "messageID", r.id, "attempts", r.attempts, "error", err)
	} else {
		s.stats.sent.Add(1)
		s.stats.bytes.Add(r.size)
	}
	r.err = err
	r.state.Store(stateKnown)
	if len(s.hooks.result) > 0 {
		s.reportResult(r.ctx, SendResult{Message: r.msg, MessageID: r.id, Attempts: r.attempts,
			Duration: time.Since(s.epoch) - r.start, Err: err})
	}
	s.stats.inFlightMsgs.Add(-1)
	s.stats.inFlightBytes.Add(-r.size)
	s.byteSem.Release(r.weight)
	s.msgSem.Release(1)
	close(r.done)
	s.mu.Lock()
	s.pending--
	if s.pending == 0 && s.idle != nil {
		close(s.idle)
		s.idle = nil
	}
	s.mu.Unlock()
}

// reportResult calls the SendResultHooks.
func (s *Sender) reportResult(ctx context.Context, e SendResult) {
	ihooks.Call(ctx, s.log, "sender", "SendResultHook", s.hooks.result, func(h SendResultHook) { h.OnSendResult(ctx, e) })
}
