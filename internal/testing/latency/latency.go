// Package latency times a processor's messages for the benchmarks and tests of the
// processor: a receiver wrapper that records, for every completed message, the time from
// its receipt (ReceiveMessages returned it) to its completion (CompleteMessage returned),
// in the order of completion.
package latency

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/sbkit/sbkit"
)

// Receiver wraps a receiver to time its messages from receipt to completion. It is safe
// for concurrent use, as the processor's settle goroutines need.
type Receiver struct {
	sbkit.LockingReceiver
	*record
}

// record is what a Receiver and those made by its Over share.
type record struct {
	done <-chan struct{}

	mu        sync.Mutex
	received  map[*azservicebus.ReceivedMessage]time.Time
	latencies []time.Duration
	waits     map[int]chan struct{} // closed at that many completions
}

// New returns a Receiver over r whose Done channel closes at the want-th completion.
func New(r sbkit.LockingReceiver, want int) *Receiver {
	s := &Receiver{LockingReceiver: r, record: &record{received: make(map[*azservicebus.ReceivedMessage]time.Time),
		waits: make(map[int]chan struct{})}}
	s.done = s.At(want)
	return s
}

// Over returns a Receiver over r (another receiver of the same entity) that records into
// s: s's completions, latencies and Done count r's messages too.
func (s *Receiver) Over(r sbkit.LockingReceiver) *Receiver {
	return &Receiver{LockingReceiver: r, record: s.record}
}

// Done is closed when want messages were completed.
func (s *record) Done() <-chan struct{} { return s.done }

// At returns a channel closed once k messages were completed.
func (s *record) At(k int) <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.latencies) >= k {
		ch := make(chan struct{})
		close(ch)
		return ch
	}
	ch, ok := s.waits[k]
	if !ok {
		ch = make(chan struct{})
		s.waits[k] = ch
	}
	return ch
}

// ReceiveMessages receives through the wrapped receiver and records the receipt time.
func (s *Receiver) ReceiveMessages(ctx context.Context, n int, o *azservicebus.ReceiveMessagesOptions) ([]*azservicebus.ReceivedMessage, error) {
	msgs, err := s.LockingReceiver.ReceiveMessages(ctx, n, o)
	now := time.Now()
	s.mu.Lock()
	for _, m := range msgs {
		s.received[m] = now
	}
	s.mu.Unlock()
	return msgs, err
}

// CompleteMessage completes through the wrapped receiver and records the latency of a
// successful completion.
func (s *Receiver) CompleteMessage(ctx context.Context, m *azservicebus.ReceivedMessage, o *azservicebus.CompleteMessageOptions) error {
	if err := s.LockingReceiver.CompleteMessage(ctx, m, o); err != nil {
		return err
	}
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.latencies = append(s.latencies, now.Sub(s.received[m]))
	delete(s.received, m)
	if ch, ok := s.waits[len(s.latencies)]; ok {
		close(ch)
		delete(s.waits, len(s.latencies))
	}
	return nil
}

// Percentiles returns the p-th percentiles (0 to 100, nearest rank below) of the
// latencies of the from-th to the to-th completion (from 0; to 0 or past the last: up to
// the last recorded); zeros when there is none.
func (s *record) Percentiles(from, to int, ps ...int) []time.Duration {
	s.mu.Lock()
	lat := s.latencies
	if to > 0 && to < len(lat) {
		lat = lat[:to]
	}
	lat = slices.Clone(lat[min(from, len(lat)):])
	s.mu.Unlock()
	slices.Sort(lat)
	out := make([]time.Duration, len(ps))
	if len(lat) == 0 {
		return out
	}
	for i, p := range ps {
		out[i] = lat[(len(lat)-1)*p/100]
	}
	return out
}
