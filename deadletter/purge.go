package deadletter

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
)

// PurgeOptions configures [Purge]. A nil *PurgeOptions means defaults. Negative counts
// and durations are errors wrapping [ErrInvalidOptions].
type PurgeOptions struct {
	// Filter selects the messages to delete; the others are held locked while the purge
	// runs and then abandoned. With a Filter the receiver must be in peek-lock mode: a
	// receive-and-delete receiver deletes every message it receives, matching or not.
	// Default nil: every message.
	Filter *Filter

	// ReceiveAndDelete says that the receiver is in
	// [azservicebus.ReceiveModeReceiveAndDelete]: the receive itself deletes each
	// message, so Purge settles nothing. A Filter with it is an error wrapping
	// [ErrInvalidOptions] (it would delete the messages the Filter skips). Default false:
	// a peek-lock receiver, whose matching messages Purge completes.
	ReceiveAndDelete bool

	// SequenceNumbers, when not empty, purges these deferred messages only: they are
	// received by sequence number (the receiver must be a [DeferredReceiver]) and
	// completed when they match the Filter. Deferred messages can be received no other
	// way ("Message deferral", learn.microsoft.com/azure/service-bus-messaging/message-deferral).
	SequenceNumbers []int64

	// MaxMessages stops after this many messages were deleted or failed. Default (zero):
	// no limit.
	MaxMessages int

	// DryRun deletes nothing: the queue is peeked (the receiver must be a [Peeker]) and
	// Stats.Moved counts what would be deleted. Default false.
	DryRun bool

	// PageSize, IdleTimeout, MaxHeld and ShutdownTimeout are as in [RedriveOptions].
	PageSize        int
	IdleTimeout     time.Duration
	MaxHeld         int
	ShutdownTimeout time.Duration

	// Hooks observe progress ([ProgressHook]). Default none.
	Hooks []Hook

	// Logger receives failures, never payloads. Default: discards everything.
	Logger *slog.Logger
}

// Purge deletes messages from src, a receiver of a dead-letter queue (or of any queue).
// Without a Filter, give it a receiver in [azservicebus.ReceiveModeReceiveAndDelete]
// and set [PurgeOptions.ReceiveAndDelete]: each page is deleted by the receive itself,
// the fastest way. With a Filter, give it a
// peek-lock receiver: each matching message is completed, the others are held and
// abandoned at the end; a peek-lock receiver without a Filter completes every message.
// Stats.Moved counts the deleted messages. Purge ends as [Redrive] does (idle, all seen,
// MaxMessages, MaxHeld, ctx).
func Purge(ctx context.Context, src Receiver, opts *PurgeOptions) (Stats, error) {
	var o PurgeOptions
	if opts != nil {
		o = *opts
	}
	ro, prog, err := (&RedriveOptions{MaxMessages: o.MaxMessages, PageSize: o.PageSize, IdleTimeout: o.IdleTimeout, MaxHeld: o.MaxHeld,
		ShutdownTimeout: o.ShutdownTimeout, Hooks: o.Hooks, Logger: o.Logger}).withDefaults()
	if err != nil {
		return Stats{}, err
	}
	if src == nil {
		return Stats{}, fmt.Errorf("%w: nil receiver", ErrInvalidOptions)
	}
	if o.ReceiveAndDelete && (o.Filter != nil || len(o.SequenceNumbers) > 0) {
		return Stats{}, fmt.Errorf("%w: a receive-and-delete receiver deletes every message it receives: a Filter or SequenceNumbers need a peek-lock one", ErrInvalidOptions)
	}
	if o.DryRun {
		p, ok := src.(Peeker)
		if !ok {
			return Stats{}, fmt.Errorf("%w: a dry run peeks, and the receiver (%T) has no PeekMessages", ErrInvalidOptions, src)
		}
		st, err := List(ctx, p, &PeekOptions{Filter: o.Filter, MaxMessages: o.MaxMessages, PageSize: ro.PageSize}, func(*azservicebus.ReceivedMessage) error { return nil })
		prog.report(ctx, st)
		return st, err
	}
	if len(o.SequenceNumbers) > 0 {
		return purgeDeferred(ctx, src, o, prog)
	}
	return drain(ctx, src, drainOptions{filter: o.Filter, max: ro.MaxMessages, pageSize: ro.PageSize, idle: ro.IdleTimeout,
		maxHeld: ro.MaxHeld, shutdown: ro.ShutdownTimeout, settle: ro.SettleTimeout, prog: prog, concurrency: settleConcurrency,
		noSettle: o.ReceiveAndDelete},
		func(_ context.Context, page []*azservicebus.ReceivedMessage) ([]error, error) {
			return make([]error, len(page)), nil
		})
}

// purgeDeferred receives the deferred messages o.SequenceNumbers names, in pages, and
// completes those that match; the others are abandoned (they stay deferred).
func purgeDeferred(ctx context.Context, src Receiver, o PurgeOptions, prog progress) (Stats, error) {
	start := time.Now()
	var st Stats
	dr, ok := src.(DeferredReceiver)
	if !ok {
		return st, fmt.Errorf("%w: purging deferred messages needs ReceiveDeferredMessages, which %T has not", ErrInvalidOptions, src)
	}
	pageSize := o.PageSize
	if pageSize <= 0 {
		pageSize = DefaultPageSize
	}
	seqs := o.SequenceNumbers
	for len(seqs) > 0 {
		if err := ctx.Err(); err != nil {
			st.Stopped, st.Elapsed = StopCancelled, time.Since(start)
			return st, err
		}
		page := seqs[:min(pageSize, len(seqs))]
		seqs = seqs[len(page):]
		msgs, err := dr.ReceiveDeferredMessages(ctx, page, nil)
		if err != nil {
			st.Stopped, st.Elapsed = StopError, time.Since(start)
			return st, fmt.Errorf("deadletter: receive deferred messages: %w", err)
		}
		for _, m := range msgs {
			st.Seen++
			if !o.Filter.Matches(m) || (o.MaxMessages > 0 && st.Moved+st.Failed >= int64(o.MaxMessages)) {
				st.Skipped++
				_ = src.AbandonMessage(context.WithoutCancel(ctx), m, nil)
				continue
			}
			if err := src.CompleteMessage(context.WithoutCancel(ctx), m, nil); err != nil {
				st.Failed++
				st.addError(fmt.Errorf("message %q (sequence number %d): complete: %w", m.MessageID, *m.SequenceNumber, err))
				continue
			}
			st.Moved++
		}
		st.Elapsed = time.Since(start)
		prog.report(ctx, st)
	}
	st.Stopped = StopDrained
	return st, nil
}
