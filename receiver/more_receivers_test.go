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
// flight on each link once the receive round trip is long (50 ms, ten handler calls)
// and the handlers are kept busy, and the two share its places: the credits open on
// both links and the messages received and not yet settled never exceed
// MaxConcurrency + PrefetchCount, below saturation (every call leaves credits open,
// whose places stay with its link: were they given back, the other link would ask for
// them too) and at it. Both links deliver; each message is settled through the link it
// came from. (The receive window releases a few messages here, one receiver or two.)
func TestMoreReceiversShareThePlaces(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const c, prefetch, low = 4, 80, 100
		backlog := [2]int{1500, 200}
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
		// At saturation (each link here has a queue of its own).
		ls[0].enqueue(backlog[0])
		ls[1].enqueue(backlog[1])
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
			if l.received != low+backlog[i] || l.done != l.received {
				t.Errorf("link %d: received %d, completed through it %d; want %d, all",
					i, l.received, l.done, low+backlog[i])
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

// funcReceiver is a receiver of a type that is not comparable (a func type).
type funcReceiver func()

// boxedReceiver is a receiver of a comparable type whose values may still not compare:
// == panics when the receiver it holds is a funcReceiver.
type boxedReceiver struct{ sbkit.MessageReceiver }

func (funcReceiver) ReceiveMessages(context.Context, int, *azservicebus.ReceiveMessagesOptions) ([]*azservicebus.ReceivedMessage, error) {
	return nil, nil
}

func (funcReceiver) CompleteMessage(context.Context, *azservicebus.ReceivedMessage, *azservicebus.CompleteMessageOptions) error {
	return nil
}

func (funcReceiver) AbandonMessage(context.Context, *azservicebus.ReceivedMessage, *azservicebus.AbandonMessageOptions) error {
	return nil
}

func (funcReceiver) DeadLetterMessage(context.Context, *azservicebus.ReceivedMessage, *azservicebus.DeadLetterOptions) error {
	return nil
}

func (funcReceiver) DeferMessage(context.Context, *azservicebus.ReceivedMessage, *azservicebus.DeferMessageOptions) error {
	return nil
}

// TestMoreReceiversValidated: New refuses a nil entry, the processor's own receiver and
// the same receiver twice (two ReceiveMessages calls at once on one azservicebus
// Receiver fail with "receiver is already receiving", and both loops would retry
// forever), and accepts receivers whose type is not comparable.
func TestMoreReceiversValidated(t *testing.T) {
	own, other := newLinkSim(time.Millisecond, 0), newLinkSim(time.Millisecond, 0)
	h := func(context.Context, *azservicebus.ReceivedMessage) error { return nil }
	for name, more := range map[string][]sbkit.MessageReceiver{
		"nil":   {other, nil},
		"own":   {own},
		"twice": {other, other},
	} {
		if _, err := receiver.New(own, h, &receiver.Options{MoreReceivers: more}); !errors.Is(err, receiver.ErrInvalidOptions) {
			t.Errorf("%s: New = %v, want ErrInvalidOptions", name, err)
		}
	}
	f := funcReceiver(func() {})
	if _, err := receiver.New(own, h, &receiver.Options{MoreReceivers: []sbkit.MessageReceiver{other, f, funcReceiver(func() {})}, DisableAutoLockRenewal: true}); err != nil {
		t.Errorf("New with receivers of a type that is not comparable = %v, want nil", err)
	}
	if _, err := receiver.New(own, h, &receiver.Options{MoreReceivers: []sbkit.MessageReceiver{boxedReceiver{f}, boxedReceiver{f}}, DisableAutoLockRenewal: true}); err != nil {
		t.Errorf("New with receivers that cannot be compared = %v, want nil", err)
	}
}

// TestMoreReceiversCopied: the processor keeps its own copy of MoreReceivers: a caller
// that reuses its slice after New changes nothing.
func TestMoreReceiversCopied(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ls := newLinkSims(3, 50*time.Millisecond, 40*time.Microsecond)
		for _, l := range ls {
			l.enqueue(2000)
		}
		more := []sbkit.MessageReceiver{ls[1]}
		p := newProcessor(t, ls[0], func(context.Context, *azservicebus.ReceivedMessage) error {
			time.Sleep(5 * time.Millisecond)
			return nil
		}, &receiver.Options{MaxConcurrency: 4, MoreReceivers: more})
		more[0] = ls[2]
		wait := start(t, p, context.Background())
		time.Sleep(3 * time.Second)
		if err := p.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		if err := wait(); err != nil {
			t.Fatal(err)
		}
		if n := len(ls[2].windows); n != 0 || len(ls[1].windows) == 0 {
			t.Errorf("%d calls on the receiver put in the caller's slice after New, %d on the one given; want none, some", n, len(ls[1].windows))
		}
	})
}

// TestMoreReceiversIdleAfterSwitchOver: the further links stop once the round trip is
// no longer long or the broker no longer backed up, even when they were used before.
// Three seconds of a backlog at 50 ms (both links busy), then a round trip of 5 ms and
// a message every 10 ms on each link: the second link finishes the credits it left
// open and makes no call in the last two seconds.
func TestMoreReceiversIdleAfterSwitchOver(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const c, backlog = 4, 1000
		ls := newLinkSims(2, 50*time.Millisecond, 40*time.Microsecond)
		ls[0].enqueue(backlog)
		ls[1].enqueue(backlog / 10) // the second link gets fewer places: both run out
		p := newProcessor(t, ls[0], func(context.Context, *azservicebus.ReceivedMessage) error {
			time.Sleep(5 * time.Millisecond)
			return nil
		}, &receiver.Options{MaxConcurrency: c, MoreReceivers: []sbkit.MessageReceiver{ls[1]}})
		wait := start(t, p, context.Background())
		time.Sleep(3 * time.Second)
		before := ls[1].calls()
		if before == 0 {
			t.Fatal("no call on the second link at 50 ms with a backlog")
		}
		for _, l := range ls {
			l.setRTT(5 * time.Millisecond)
		}
		var settled int
		for i := range 300 { // 3 s at low load
			for _, l := range ls {
				l.enqueue(1)
			}
			time.Sleep(10 * time.Millisecond)
			if i == 99 {
				settled = ls[1].calls()
			}
		}
		after := ls[1].calls()
		if err := p.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		if err := wait(); err != nil {
			t.Fatal(err)
		}
		if after != settled {
			t.Errorf("second link: %d calls in the 3 s at low load, %d in the last 2 s; want none in the last 2 s",
				after-before, after-settled)
		}
		if done, _ := ls[0].counts(); done < backlog+300 {
			t.Errorf("first link completed %d messages, want %d", done, backlog+300)
		}
		checkReconciled(t, p.Stats())
	})
}

// lockedLink is a linkSim whose messages are locked for lockedFor from their receipt,
// and which records the renewals it is asked for: of its own messages, and of others'.
type lockedLink struct {
	*linkSim
	origin       map[*azservicebus.ReceivedMessage]*lockedLink // shared by the links of a test, under linkSim.mu
	own, foreign int
	lockedFor    time.Duration
}

func (l *lockedLink) ReceiveMessages(ctx context.Context, n int, o *azservicebus.ReceiveMessagesOptions) ([]*azservicebus.ReceivedMessage, error) {
	msgs, err := l.linkSim.ReceiveMessages(ctx, n, o)
	until := time.Now().Add(l.lockedFor)
	l.mu.Lock()
	for _, m := range msgs {
		m.LockedUntil = &until
		l.origin[m] = l
	}
	l.mu.Unlock()
	return msgs, err
}

func (l *lockedLink) RenewMessageLock(_ context.Context, m *azservicebus.ReceivedMessage, _ *azservicebus.RenewMessageLockOptions) error {
	until := time.Now().Add(l.lockedFor)
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.origin[m] == l {
		l.own++
	} else {
		l.foreign++
	}
	m.LockedUntil = &until
	return nil
}

// from returns the link m came from.
func (l *lockedLink) from(m *azservicebus.ReceivedMessage) *lockedLink {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.origin[m]
}

// TestMoreReceiversRenewThroughTheirLink: a message received through one of
// MoreReceivers has its lock renewed through that receiver (azservicebus renews through
// $management with the message's own link name; receivers of different Clients are
// not even on one connection), never through the processor's.
func TestMoreReceiversRenewThroughTheirLink(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sims := newLinkSims(2, 50*time.Millisecond, 40*time.Microsecond)
		origin := make(map[*azservicebus.ReceivedMessage]*lockedLink)
		ls := make([]*lockedLink, len(sims))
		for i, s := range sims {
			ls[i] = &lockedLink{linkSim: s, origin: origin, lockedFor: 3 * time.Second}
			s.enqueue(2000)
		}
		p := newProcessor(t, ls[0], func(_ context.Context, m *azservicebus.ReceivedMessage) error {
			if ls[0].from(m) == ls[1] {
				time.Sleep(2500 * time.Millisecond) // renewed a second before its lock runs out
			} else {
				time.Sleep(5 * time.Millisecond)
			}
			return nil
		}, &receiver.Options{MaxConcurrency: 4, MoreReceivers: []sbkit.MessageReceiver{ls[1]}})
		wait := start(t, p, context.Background())
		time.Sleep(6 * time.Second)
		if err := p.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		if err := wait(); err != nil {
			t.Fatal(err)
		}
		if ls[1].received == 0 || ls[1].own == 0 || ls[0].foreign != 0 || ls[1].foreign != 0 {
			t.Errorf("second link: %d received, %d renewed through it; first link renewed %d of the second's; want some, some, none (and %d of the first's on the second)",
				ls[1].received, ls[1].own, ls[0].foreign, ls[1].foreign)
		}
		checkReconciled(t, p.Stats())
	})
}
