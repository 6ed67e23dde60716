package sbtest

import (
	"context"
	"sync/atomic"
	"time"
)

// Latency is the simulated cost of talking to the broker. The zero value means no latency.
type Latency struct {
	// RoundTrip is slept once by every operation: send, batch, schedule, cancel, receive,
	// settle, renew, peek and receive-deferred. On the wire (NewServer) a receiving link
	// spends it on the way of each frame instead, as a network does: credit a flow grants
	// is served half a round trip after it arrived, and the messages it takes reach the
	// client half a round trip later, many flows and transfers on their way at once.
	RoundTrip time.Duration
	// StoreTime is slept additionally by every send, batch or schedule request (a batch is
	// one unit), while holding one of StoreConcurrency slots.
	StoreTime time.Duration
	// StoreConcurrency bounds how many stores run at once; 0 means unlimited.
	StoreConcurrency int
}

// latencyState is an immutable snapshot of the latency model; SetLatency swaps it.
type latencyState struct {
	Latency
	sem chan struct{} // nil when StoreConcurrency <= 0
}

func newLatencyState(l Latency) *latencyState {
	s := &latencyState{Latency: l}
	if l.StoreConcurrency > 0 {
		s.sem = make(chan struct{}, l.StoreConcurrency)
	}
	return s
}

type latencyModel struct{ p atomic.Pointer[latencyState] }

func (m *latencyModel) get() *latencyState { return m.p.Load() }

// sleep waits d, or until ctx ends (then it returns ctx.Err()).
func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// roundTrip sleeps the round trip of the current model.
func (m *latencyModel) roundTrip(ctx context.Context) error {
	return sleep(ctx, m.get().RoundTrip)
}

// store sleeps RoundTrip, then StoreTime under the store semaphore.
func (m *latencyModel) store(ctx context.Context) error {
	l := m.get()
	if l.sem == nil { // one timer for both: less timer overshoot under load
		return sleep(ctx, max(l.RoundTrip, 0)+max(l.StoreTime, 0))
	}
	if err := sleep(ctx, l.RoundTrip); err != nil {
		return err
	}
	if l.StoreTime <= 0 {
		return nil
	}
	if l.sem != nil {
		select {
		case l.sem <- struct{}{}:
			defer func() { <-l.sem }()
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return sleep(ctx, l.StoreTime)
}
