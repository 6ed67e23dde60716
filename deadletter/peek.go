package deadletter

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
)

// DefaultPageSize is how many messages one PeekMessages call of [Summarize] and [List],
// or one ReceiveDeferredMessages call of [Purge], asks for by default. The calls that
// take [RedriveOptions]' PageSize ([Redrive], [Export], [ExportAndComplete], [Purge])
// default to [DefaultRedrivePageSize].
const DefaultPageSize = 250

// PeekOptions configures [Summarize] and [List]. A nil *PeekOptions means defaults.
type PeekOptions struct {
	// Filter selects the messages; nil matches all.
	Filter *Filter
	// MaxMessages stops after this many matching messages. Default (zero) and negative:
	// the whole queue.
	MaxMessages int
	// PageSize is how many messages each PeekMessages call asks for. Default
	// DefaultPageSize (250); negative is an error.
	PageSize int
	// FromSequenceNumber is where peeking starts. Default 0: the first message.
	FromSequenceNumber int64
}

func (o *PeekOptions) withDefaults() (PeekOptions, error) {
	var v PeekOptions
	if o != nil {
		v = *o
	}
	if v.PageSize < 0 {
		return v, fmt.Errorf("%w: negative PageSize %d", ErrInvalidOptions, v.PageSize)
	}
	if v.PageSize == 0 {
		v.PageSize = DefaultPageSize
	}
	return v, nil
}

// List peeks at the queue from its start and calls fn with each message that matches
// the filter, in sequence-number order, until the queue ends, MaxMessages matched or fn
// returns an error (which List returns). Nothing is locked or changed: peeking does not
// raise DeliveryCount. fn may keep the message. The Stats count the peeked messages:
// Moved the matching ones, Skipped the others. A message dead-lettered while List runs
// is listed when its sequence number is past the ones already peeked.
func List(ctx context.Context, p Peeker, opts *PeekOptions, fn func(*azservicebus.ReceivedMessage) error) (Stats, error) {
	start := time.Now()
	var st Stats
	o, err := opts.withDefaults()
	if err != nil {
		return st, err
	}
	if p == nil {
		return st, fmt.Errorf("%w: nil Peeker", ErrInvalidOptions)
	}
	next := o.FromSequenceNumber
	defer func() { st.Elapsed = time.Since(start) }()
	for {
		if err := ctx.Err(); err != nil {
			st.Stopped = StopCancelled
			return st, err
		}
		from := next
		page, err := p.PeekMessages(ctx, o.PageSize, &azservicebus.PeekMessagesOptions{FromSequenceNumber: &from})
		if err != nil {
			st.Stopped = StopError
			if ctx.Err() != nil {
				st.Stopped = StopCancelled
			}
			return st, fmt.Errorf("deadletter: peek from sequence number %d: %w", from, err)
		}
		if len(page) == 0 {
			st.Stopped = StopDrained
			return st, nil
		}
		for _, m := range page {
			if m.SequenceNumber != nil && *m.SequenceNumber >= next {
				next = *m.SequenceNumber + 1
			}
			st.Seen++
			if !o.Filter.Matches(m) {
				st.Skipped++
				continue
			}
			st.Moved++
			if err := fn(m); err != nil {
				st.Stopped = StopError
				return st, err
			}
			if o.MaxMessages > 0 && st.Moved >= int64(o.MaxMessages) {
				st.Stopped = StopMaxMessages
				return st, nil
			}
		}
	}
}

// Summary describes the messages of a dead-letter queue that a [Filter] matched.
type Summary struct {
	// Count is how many messages matched.
	Count int64
	// ByReason counts them by DeadLetterReason ("" for none).
	ByReason map[string]int64
	// BySource counts them by DeadLetterSource, the entity that dead-lettered them when it
	// is not this queue's own ("" for none: dead-lettered where they are).
	BySource map[string]int64
	// ByAge counts them by age (now minus EnqueuedTime), in the buckets of [AgeBuckets].
	ByAge []AgeCount
	// Oldest and Newest are the earliest and latest EnqueuedTime; zero when Count is 0.
	Oldest, Newest time.Time
	// Bytes is the total body size.
	Bytes int64
}

// AgeCount is one age bucket of a [Summary]: the messages younger than Below and not
// younger than the previous bucket's Below; the last bucket's Below is 0 (no bound).
type AgeCount struct {
	Label string
	Below time.Duration
	Count int64
}

// AgeBuckets are the upper bounds of the age buckets of [Summary.ByAge]: under an hour,
// under a day, under a week, under 30 days, older.
var AgeBuckets = []AgeCount{
	{Label: "<1h", Below: time.Hour},
	{Label: "<1d", Below: 24 * time.Hour},
	{Label: "<7d", Below: 7 * 24 * time.Hour},
	{Label: "<30d", Below: 30 * 24 * time.Hour},
	{Label: ">=30d"},
}

// Summarize peeks at the whole queue (as [List] does: nothing is locked or changed) and
// counts the messages that match opts.Filter. The Stats are List's.
func Summarize(ctx context.Context, p Peeker, opts *PeekOptions) (*Summary, Stats, error) {
	now := time.Now()
	s := &Summary{ByReason: map[string]int64{}, BySource: map[string]int64{}}
	s.ByAge = append([]AgeCount(nil), AgeBuckets...)
	st, err := List(ctx, p, opts, func(m *azservicebus.ReceivedMessage) error {
		s.Count++
		s.Bytes += int64(len(m.Body))
		s.ByReason[deref(m.DeadLetterReason)]++
		s.BySource[deref(m.DeadLetterSource)]++
		if m.EnqueuedTime != nil {
			t := *m.EnqueuedTime
			if s.Oldest.IsZero() || t.Before(s.Oldest) {
				s.Oldest = t
			}
			if t.After(s.Newest) {
				s.Newest = t
			}
			age := now.Sub(t)
			i := sort.Search(len(s.ByAge)-1, func(i int) bool { return age < s.ByAge[i].Below })
			s.ByAge[i].Count++
		}
		return nil
	})
	return s, st, err
}

func deref(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}
