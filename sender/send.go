package sender

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/sbkit/sbkit"
	ihooks "github.com/sbkit/sbkit/internal/hooks"
	"github.com/sbkit/sbkit/internal/retry"
)

// sendGroup sends a sealed group: as batches when batching is on, else one by one.
func (s *Sender) sendGroup(group []*Result) {
	if s.batch == nil {
		for _, r := range group {
			s.sendSingle(r)
		}
		return
	}
	for len(group) > 0 {
		group = s.sendBatch(group)
	}
}

// sendSingle sends r with SendMessage, retrying transient failures, and completes it.
func (s *Sender) sendSingle(r *Result) { s.finish(r, s.trySingle(r)) }

// trySingle sends r with SendMessage, retrying transient failures, and returns its
// outcome.
func (s *Sender) trySingle(r *Result) error {
	ctx, stop := s.messageContext(r.ctx)
	defer stop()
	rs := s.retry.Retries()
	for {
		if err := ctx.Err(); err != nil {
			return s.stopCause(ctx, err, nil)
		}
		r.attempts++
		actx, cancel := s.attemptContext(ctx)
		err := s.dst.SendMessage(actx, r.msg, nil)
		err = s.attemptError(ctx, actx, err)
		cancel()
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return s.endedCause(ctx, err)
		}
		if err := s.backoff(ctx, &rs, []*Result{r}, err); err != nil {
			return err
		}
	}
}

// sendBatch sends a prefix of group as one batch, retrying transient failures, completes
// the messages of that prefix and returns the rest of group.
func (s *Sender) sendBatch(group []*Result) (rest []*Result) {
	rs := s.retry.Retries()
	var lastErr error
	for {
		group = s.dropEnded(group, lastErr)
		if len(group) == 0 {
			return rest
		}
		if err := s.life.Err(); err != nil {
			for _, r := range group {
				s.finish(r, s.stopCause(s.life, err, lastErr))
			}
			return rest
		}
		batch, n, buildErr := s.build(group)
		chunk := group
		switch {
		case buildErr != nil && batch == nil:
			// NewBatch failed: the attempt failed for every message of the group.
		case n == 0:
			// group[0] cannot travel even alone.
			s.finish(group[0], buildErr)
			return append(group[1:len(group):len(group)], rest...)
		case n < len(group):
			rest = append(append([]*Result(nil), group[n:]...), rest...)
			chunk = group[:n:n]
		}
		for _, r := range chunk {
			r.attempts++
		}
		err := buildErr
		if batch != nil {
			err = s.sendBatchOnce(batch, len(chunk))
		}
		if err == nil {
			s.stats.batches.Add(1)
			for _, r := range chunk {
				s.finish(r, nil)
			}
			return rest
		}
		if s.life.Err() != nil {
			err = s.endedCause(s.life, err)
		}
		wctx, stop := s.groupContext(chunk)
		berr := s.backoff(wctx, &rs, chunk, err)
		stop()
		if berr != nil {
			for _, r := range chunk {
				s.finish(r, berr)
			}
			return rest
		}
		group, lastErr = chunk, err
	}
}

// build makes an SDK batch holding the longest prefix of group that fits. It returns the
// batch (nil when NewBatch failed), the prefix length and the error that ended it.
func (s *Sender) build(group []*Result) (sbkit.Batch, int, error) {
	var opts *azservicebus.MessageBatchOptions
	if s.opts.MaxBatchBytes > 0 {
		opts = &azservicebus.MessageBatchOptions{MaxBytes: uint64(s.opts.MaxBatchBytes)}
	}
	ctx, cancel := s.attemptContext(s.life)
	defer cancel()
	batch, err := s.batch.NewBatch(ctx, opts)
	if err != nil {
		return nil, 0, s.attemptError(s.life, ctx, err)
	}
	for i, r := range group {
		if err := batch.AddMessage(r.msg, nil); err != nil {
			return batch, i, err
		}
	}
	return batch, len(group), nil
}

func (s *Sender) sendBatchOnce(batch sbkit.Batch, n int) error {
	ctx, cancel := s.attemptContext(s.life)
	defer cancel()
	start := time.Now()
	err := s.batch.SendBatch(ctx, batch, nil)
	err = s.attemptError(s.life, ctx, err)
	if len(s.hooks.batch) > 0 {
		e := SendBatch{Messages: n, Bytes: int64(batch.NumBytes()), Duration: time.Since(start), Err: err}
		ihooks.Call(s.life, s.log, "sender", "SendBatchHook", s.hooks.batch, func(h SendBatchHook) { h.OnSendBatch(s.life, e) })
	}
	return err
}

// dropEnded completes the messages of group whose context has ended and returns the others.
func (s *Sender) dropEnded(group []*Result, lastErr error) []*Result {
	var keep []*Result
	for i, r := range group {
		if err := r.ctx.Err(); err != nil {
			if keep == nil {
				keep = append(make([]*Result, 0, len(group)), group[:i]...)
			}
			s.finish(r, s.stopCause(r.ctx, err, lastErr))
		} else if keep != nil {
			keep = append(keep, r)
		}
	}
	if keep == nil {
		return group
	}
	return keep
}

// backoff decides whether a failed attempt of the messages rs (one request) is retried
// and waits before the retry. It returns nil to retry, or the error to report.
func (s *Sender) backoff(ctx context.Context, retries *retry.Retries, rs []*Result, err error) error {
	attempt := rs[0].attempts
	if !sbkit.IsTransient(err) || int64(attempt) > int64(s.retry.MaxRetries) {
		return err
	}
	wait, ok := retries.Next()
	if !ok {
		return err
	}
	s.stats.retried.Add(int64(len(rs)))
	s.log.Debug("sender: retrying", "messages", len(rs), "attempt", attempt, "wait", wait, "error", err)
	if len(s.hooks.retry) > 0 {
		for _, r := range rs {
			e := SendRetry{Message: r.msg, MessageID: r.id, Attempt: attempt, Messages: len(rs), Delay: wait, Err: err}
			ihooks.Call(r.ctx, s.log, "sender", "SendRetryHook", s.hooks.retry, func(h SendRetryHook) { h.OnSendRetry(r.ctx, e) })
		}
	}
	if !retry.Wait(ctx, wait) {
		return s.stopCause(ctx, ctx.Err(), err)
	}
	return nil
}

// groupContext returns a context that ends when Close gives up or when the context of
// every message of group has ended: a batch waiting to be retried is abandoned only
// when nobody waits for it. Its cause is then the last message context's cause.
func (s *Sender) groupContext(group []*Result) (context.Context, func()) {
	for _, r := range group {
		if r.ctx.Done() == nil {
			return s.life, func() {}
		}
	}
	ctx, cancel := context.WithCancelCause(s.life)
	var left atomic.Int64
	left.Store(int64(len(group)))
	stops := make([]func() bool, len(group))
	for i, r := range group {
		stops[i] = context.AfterFunc(r.ctx, func() {
			if left.Add(-1) == 0 {
				cancel(context.Cause(r.ctx))
			}
		})
	}
	return ctx, func() {
		for _, stop := range stops {
			stop()
		}
		cancel(nil)
	}
}

// messageContext returns a context that ends when ctx ends or when Close gives up.
func (s *Sender) messageContext(ctx context.Context) (context.Context, func()) {
	if ctx.Done() == nil {
		return s.life, func() {}
	}
	mctx, cancel := context.WithCancelCause(ctx)
	stop := context.AfterFunc(s.life, func() { cancel(ErrClosed) })
	return mctx, func() { stop(); cancel(nil) }
}

// attemptContext bounds one request by [Options.AttemptTimeout].
func (s *Sender) attemptContext(ctx context.Context) (context.Context, context.CancelFunc) {
	if s.opts.AttemptTimeout <= 0 {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, s.opts.AttemptTimeout)
}

// attemptError turns the timeout of one attempt (its context ended, the outer one did
// not) into a transient error.
func (s *Sender) attemptError(outer, attempt context.Context, err error) error {
	if err != nil && outer.Err() == nil && attempt.Err() != nil {
		return &attemptTimeoutError{err: err}
	}
	return err
}

// stopCause is the error of a message abandoned because ctx ended: ctx's cause, with the
// last attempt's error when there was one.
func (s *Sender) stopCause(ctx context.Context, err, last error) error {
	if cause := context.Cause(ctx); cause != nil && !errors.Is(cause, err) {
		err = fmt.Errorf("%w: %w", cause, err)
	}
	if last != nil {
		return fmt.Errorf("%w (last attempt: %w)", err, last)
	}
	return err
}

// endedCause is the error of an attempt that failed after ctx ended: ctx's cause, with
// the attempt's own error when it says more than ctx's.
func (s *Sender) endedCause(ctx context.Context, err error) error {
	if errors.Is(err, ctx.Err()) {
		return s.stopCause(ctx, ctx.Err(), nil)
	}
	return s.stopCause(ctx, ctx.Err(), err)
}

// attemptTimeoutError is the transient error of an attempt that ran out of
// [Options.AttemptTimeout]. It does not unwrap to [context.DeadlineExceeded], which
// [sbkit.IsTransient] would call permanent.
type attemptTimeoutError struct{ err error }

func (e *attemptTimeoutError) Error() string { return "sender: attempt timed out: " + e.err.Error() }
func (e *attemptTimeoutError) Timeout() bool { return true }
