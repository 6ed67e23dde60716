// Package latency times a processor's messages for the benchmarks and tests of issue 20:
// a receiver wrapper that records, for every completed message, the time from its
// receipt (ReceiveMessages returned it) to its completion (CompleteMessage returned).
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

	want int
	all  chan struct{}

	mu        sync.Mutex
	received  map[*azservicebus.ReceivedMessage]time.Time
	latencies []time.Duration
}

// New returns a Receiver over r whose Done channel closes at the want-th completion.
func New(r sbkit.LockingReceiver, want int) *Receiver {
	return &Receiver{LockingReceiver: r, want: want, all: make(chan struct{}),
		received: make(map[*azservicebus.ReceivedMessage]time.Time)}
}

// Done is closed when want messages were completed.
func (s *Receiver) Done() <-chan struct{} { return s.all }

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
	if len(s.latencies) == s.want {
		close(s.all)
	}
	return nil
}

// Percentiles returns the p-th percentiles (0 to 100, nearest rank below) of the first n
// latencies recorded (all of them when n is 0 or more than were recorded); zeros when
// none was.
func (s *Receiver) Percentiles(n int, ps ...int) []time.Duration {
	s.mu.Lock()
	lat := s.latencies
	if n > 0 && n < len(lat) {
		lat = lat[:n]
	}
	lat = slices.Clone(lat)
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
