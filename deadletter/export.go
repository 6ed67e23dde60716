package deadletter

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
)

// ExportOptions configures [Export] and [ExportAndComplete]. A nil *ExportOptions means
// defaults. Negative counts and durations are errors wrapping [ErrInvalidOptions].
type ExportOptions struct {
	// Filter selects the messages to export. Default nil: every message.
	Filter *Filter
	// MaxMessages stops after this many messages were exported (or failed). Default
	// (zero): no limit.
	MaxMessages int
	// PageSize, IdleTimeout, MaxHeld and ShutdownTimeout are as in [RedriveOptions];
	// only PageSize matters to Export.
	PageSize        int
	IdleTimeout     time.Duration
	MaxHeld         int
	ShutdownTimeout time.Duration
	// Hooks observe progress ([ProgressHook]). Default none.
	Hooks []Hook
	// Logger receives failures, never payloads. Default: discards everything.
	Logger *slog.Logger
}

func (o *ExportOptions) withDefaults() (RedriveOptions, progress, *Filter, error) {
	var v ExportOptions
	if o != nil {
		v = *o
	}
	ro, p, err := (&RedriveOptions{MaxMessages: v.MaxMessages, PageSize: v.PageSize, IdleTimeout: v.IdleTimeout, MaxHeld: v.MaxHeld,
		ShutdownTimeout: v.ShutdownTimeout, Hooks: v.Hooks, Logger: v.Logger}).withDefaults()
	return ro, p, v.Filter, err
}

// Export writes each message of p that matches the filter to w as one [Record] in JSON,
// one per line (JSON Lines), in sequence-number order. It peeks: the queue does not
// change. A message with an application property of a type [EncodeValue] does not know
// fails the export (Stats and error say which) rather than be written without it.
func Export(ctx context.Context, p Peeker, w io.Writer, opts *ExportOptions) (Stats, error) {
	ro, prog, filter, err := opts.withDefaults()
	if err != nil {
		return Stats{}, err
	}
	bw := bufio.NewWriter(w)
	enc := json.NewEncoder(bw)
	enc.SetEscapeHTML(false)
	n := 0
	st, err := List(ctx, p, &PeekOptions{Filter: filter, MaxMessages: ro.MaxMessages, PageSize: ro.PageSize}, func(m *azservicebus.ReceivedMessage) error {
		rec, err := NewRecord(m)
		if err != nil {
			return err
		}
		if err := enc.Encode(rec); err != nil {
			return fmt.Errorf("deadletter: write: %w", err)
		}
		if n++; n%ro.PageSize == 0 {
			prog.report(ctx, Stats{Seen: int64(n), Moved: int64(n)})
		}
		return nil
	})
	if ferr := bw.Flush(); ferr != nil && err == nil {
		err = fmt.Errorf("deadletter: write: %w", ferr)
	}
	if err != nil && st.Stopped == StopError {
		// The message that failed was counted as matched; it was not written.
		st.Moved--
		st.Failed++
		st.addError(err)
	}
	prog.report(ctx, st)
	return st, err
}

// flusher and syncer are what ExportAndComplete calls on w, when w has them, before it
// completes the messages it wrote (a *bufio.Writer flushes, an *os.File syncs).
type (
	flusher interface{ Flush() error }
	syncer  interface{ Sync() error }
)

// ExportAndComplete moves messages out of a dead-letter queue into w: it receives them
// from r (peek-lock), writes each one that matches the filter as a [Record] line, and
// completes the page's messages only after the page was written and w flushed (Flush)
// and synced (Sync) when w has those methods, so that a crash loses no message: at worst
// a message is both in the file and still in the queue. The others are held and
// abandoned at the end. It ends as [Redrive] does.
func ExportAndComplete(ctx context.Context, r Receiver, w io.Writer, opts *ExportOptions) (Stats, error) {
	ro, prog, filter, err := opts.withDefaults()
	if err != nil {
		return Stats{}, err
	}
	if r == nil || w == nil {
		return Stats{}, fmt.Errorf("%w: nil receiver or writer", ErrInvalidOptions)
	}
	return drain(ctx, r, drainOptions{filter: filter, max: ro.MaxMessages, pageSize: ro.PageSize, idle: ro.IdleTimeout,
		maxHeld: ro.MaxHeld, shutdown: ro.ShutdownTimeout, settle: ro.SettleTimeout, prog: prog, concurrency: settleConcurrency},
		func(_ context.Context, page []*azservicebus.ReceivedMessage) ([]error, error) {
			errs := make([]error, len(page))
			var buf []byte
			for i, m := range page {
				rec, err := NewRecord(m)
				if err == nil {
					var line []byte
					if line, err = json.Marshal(rec); err == nil {
						buf = append(append(buf, line...), '\n')
					}
				}
				errs[i] = err
			}
			if _, err := w.Write(buf); err != nil {
				return nil, fmt.Errorf("deadletter: write: %w", err)
			}
			if f, ok := w.(flusher); ok {
				if err := f.Flush(); err != nil {
					return nil, fmt.Errorf("deadletter: flush: %w", err)
				}
			}
			if s, ok := w.(syncer); ok {
				if err := s.Sync(); err != nil {
					return nil, fmt.Errorf("deadletter: sync: %w", err)
				}
			}
			return errs, nil
		})
}
