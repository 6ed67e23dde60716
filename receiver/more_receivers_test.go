package receiver_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/sbkit/sbkit"
	"github.com/sbkit/sbkit/receiver"
	"github.com/sbkit/sbkit/sbtest"
)

// newLinkSims returns k links modelled as newLinkSim's, each to a queue of its own,
// sharing one mutex so that a test reads them all at one instant.
func newLinkSims(k int, rtt, spacing time.Duration) []*linkSim {
	mu := new(sync.Mutex)
	ls := make([]*linkSim, k)
	for i := range ls {
		ls[i] = newLinkSim(rtt, spacing)
		ls[i].mu = mu
	}
	return ls
}

// TestMoreReceiversShareThePlaces: a processor with a second receiver keeps a call in
// flight on each link once the receive round trip is long (50 ms, ten handler calls),
// and the two share its places: the credits open on both links and
// the messages received and not yet settled never exceed MaxConcurrency +
// PrefetchCount, below saturation (every call leaves credits open, whose places stay
// with its link: were they given back, the other link would ask for them too) and at
// it. Both links deliver; each message is settled through the link it came from; none is
// released.
func TestMoreReceiversShareThePlaces(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const c, prefetch, low, backlog = 4, 8, 100, 50
		ls := newLinkSims(2, 50*time.Millisecond, 40*time.Microsecond)
		p := newProcessor(t, ls[0], func(context.Context, *azservicebus.ReceivedMessage) error {
			time.Sleep(5 * time.Millisecond)
			return nil
		}, &receiver.Options{MaxConcurrency: c, PrefetchCount: prefetch, MoreReceivers: []sbkit.MessageReceiver{ls[1]}})
		wait := start(t, p, context.Background())
		peak := 0
		sample := func(d time.Duration) {
			for end := time.Now().Add(d); time.Now().Before(end); {
				time.Sleep(100 * time.Microsecond)
				ls[0].mu.Lock()
				n := 0
				for _, l := range ls {
					n += l.credit + l.received - l.done
				}
				ls[0].mu.Unlock()
				peak = max(peak, n)
			}
		}
		for range low { // below saturation: a message every 10 ms on each link
			for _, l := range ls {
				l.enqueue(1)
			}
			sample(10 * time.Millisecond)
		}
		for _, l := range ls { // at saturation
			l.enqueue(backlog)
		}
		sample(5 * time.Second)
		if err := p.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		if err := wait(); err != nil {
			t.Fatal(err)
		}
		if peak > c+prefetch {
			t.Errorf("%d credits open and messages unsettled at once, places %d", peak, c+prefetch)
		}
		for i, l := range ls {
			if l.received != low+backlog || l.done != l.received || l.released != 0 {
				t.Errorf("link %d: received %d, completed through it %d, released %d; want %d, all, none",
					i, l.received, l.done, l.released, low+backlog)
			}
		}
		checkReconciled(t, p.Stats())
	})
}

// TestMoreReceiversIdleAtShortRoundTrips: at a round trip of four handler calls (20 ms,
// handlers of 5 ms) a second link brings nothing and lengthens the median on the wire:
// the processor never calls the second receiver.
func TestMoreReceiversIdleAtShortRoundTrips(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ls := newLinkSims(2, 20*time.Millisecond, 40*time.Microsecond)
		ls[0].enqueue(2000)
		p := newProcessor(t, ls[0], func(context.Context, *azservicebus.ReceivedMessage) error {
			time.Sleep(5 * time.Millisecond)
			return nil
		}, &receiver.Options{MaxConcurrency: 8, MoreReceivers: []sbkit.MessageReceiver{ls[1]}})
		wait := start(t, p, context.Background())
		time.Sleep(time.Second)
		if err := p.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		if err := wait(); err != nil {
			t.Fatal(err)
		}
		if done, _ := ls[0].counts(); done < 1000 {
			t.Errorf("%d messages completed in a second, want at least 1,000 (8 handlers of 5 ms)", done)
		}
		if calls := len(ls[1].windows); calls != 0 {
			t.Errorf("%d calls on the second receiver, want none", calls)
		}
	})
}

// failingReceiver fails every ReceiveMessages call with err.
type failingReceiver struct {
	sbkit.MessageReceiver
	err error
}

func (f failingReceiver) ReceiveMessages(context.Context, int, *azservicebus.ReceiveMessagesOptions) ([]*azservicebus.ReceivedMessage, error) {
	return nil, f.err
}

// TestMoreReceiversPermanentError: a permanent receive error on one of MoreReceivers
// ends Run with it, as on the processor's own receiver, once the round trip is long
// enough for the processor to call it.
func TestMoreReceiversPermanentError(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := newLinkSim(50*time.Millisecond, 40*time.Microsecond)
		l.enqueue(1000)
		p := newProcessor(t, l, func(context.Context, *azservicebus.ReceivedMessage) error {
			time.Sleep(5 * time.Millisecond)
			return nil
		}, &receiver.Options{MaxConcurrency: 4, MoreReceivers: []sbkit.MessageReceiver{failingReceiver{l, sbtest.PermanentError}}})
		res := make(chan error, 1)
		go func() { res <- p.Run(context.Background()) }()
		time.Sleep(10 * time.Second)
		select {
		case err := <-res:
			if !errors.Is(err, sbtest.PermanentError) {
				t.Fatalf("Run = %v, want %v", err, sbtest.PermanentError)
			}
		default:
			_ = p.Close(context.Background())
			t.Fatalf("Run still running 10 s after the start (Close: %v)", <-res)
		}
		checkReconciled(t, p.Stats())
	})
}

// TestMoreReceiversNotForSessions: a SessionProcessor refuses MoreReceivers (each
// session has one receiver).
func TestMoreReceiversNotForSessions(t *testing.T) {
	e := newEnv(t, nil)
	var o receiver.SessionOptions
	o.MoreReceivers = []sbkit.MessageReceiver{e.r}
	acc := e.ns.QueueSessionAcceptor("q", nil)
	if _, err := receiver.NewSessionProcessor(acc, func(context.Context, *azservicebus.ReceivedMessage) error { return nil }, &o); !errors.Is(err, receiver.ErrInvalidOptions) {
		t.Fatalf("NewSessionProcessor = %v, want ErrInvalidOptions", err)
	}
}
