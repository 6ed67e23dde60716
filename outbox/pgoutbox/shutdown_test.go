package pgoutbox_test

import (
	"context"
	"errors"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/Azure/go-amqp"
	"github.com/jackc/pgx/v5"
	"github.com/sbkit/sbkit"
	"github.com/sbkit/sbkit/outbox/pgoutbox"
	"github.com/sbkit/sbkit/sbtest"
	"github.com/sbkit/sbkit/sender"
)

// closeWithin calls r.Close with a context that ends after d and fails t unless Close
// returns the context's error before watchdog: a Close must keep its deadline, however
// the shutdown began.
func closeWithin(t *testing.T, r *pgoutbox.Relay, d time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	got := make(chan error, 1)
	go func() { got <- r.Close(ctx) }()
	watchdog := time.NewTimer(5 * time.Second)
	defer watchdog.Stop()
	select {
	case err := <-got:
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Close = %v, want context.DeadlineExceeded", err)
		}
	case <-watchdog.C:
		t.Errorf("Close(%v) has not returned after 5 s", d)
		t.FailNow()
	}
}

// gateSender holds every send until its context ends or the gate opens; started is
// closed when the first send began.
type gateSender struct {
	*sbtest.Sender
	started chan struct{}
	once    sync.Once
	open    chan struct{}
}

func newGateSender(s *sbtest.Sender) *gateSender {
	return &gateSender{Sender: s, started: make(chan struct{}), open: make(chan struct{})}
}

func (g *gateSender) wait(ctx context.Context) error {
	g.once.Do(func() { close(g.started) })
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-g.open:
		return nil
	}
}

func (g *gateSender) SendMessage(ctx context.Context, m *azservicebus.Message, o *azservicebus.SendMessageOptions) error {
	if err := g.wait(ctx); err != nil {
		return err
	}
	return g.Sender.SendMessage(ctx, m, o)
}

func (g *gateSender) SendBatch(ctx context.Context, b sbkit.Batch, o *azservicebus.SendMessageBatchOptions) error {
	if err := g.wait(ctx); err != nil {
		return err
	}
	return g.Sender.SendBatch(ctx, b, o)
}

// hangingRelay runs a relay whose one row's send hangs (for an hour, as far as the
// sender and the Lease are concerned), with the given ShutdownGrace; it returns once
// the send started, with Run's cancel and its result. The send is let go when the
// test ends, so that a failed test does not hang.
func hangingRelay(t *testing.T, grace time.Duration) (r *pgoutbox.Relay, cancel context.CancelFunc, done chan error) {
	e := newEnv(t)
	e.queue("q", nil)
	s, err := e.ns.NewSender("q", nil)
	if err != nil {
		t.Fatal(err)
	}
	g := newGateSender(s)
	t.Cleanup(func() { close(g.open) })
	r, err = pgoutbox.NewRelay(e.ob, func(string) (sbkit.MessageSender, error) { return g, nil },
		&pgoutbox.RelayOptions{ShutdownGrace: grace, Lease: 2 * time.Hour, Sender: &sender.Options{AttemptTimeout: time.Hour}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done = make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	e.add("q", msg("h", "x"))
	<-g.started
	return r, cancel, done
}

// TestCloseKeepsLaterDeadline: once Run's context ended (the shutdown began with
// ShutdownGrace, here 1 h or unlimited), a Close with a shorter deadline still returns
// by it, cutting the send short; so does a Close made while another Close (without a
// deadline) waits. Run then returns, and no goroutine remains.
func TestCloseKeepsLaterDeadline(t *testing.T) {
	for _, tt := range []struct {
		name  string
		grace time.Duration
	}{{"grace 1h", time.Hour}, {"grace unlimited", -1}} {
		t.Run(tt.name+"/after Run's context", func(t *testing.T) {
			leakCheck(t)
			r, cancel, done := hangingRelay(t, tt.grace)
			cancel()
			// Run's own shutdown began: it waits for the send.
			eventually(t, "Run to wait for the rows in flight", func() bool {
				buf := make([]byte, 1<<20)
				return strings.Contains(string(buf[:runtime.Stack(buf, true)]), "(*run).waitIdle")
			})
			closeWithin(t, r, 200*time.Millisecond)
			if err := <-done; err != nil {
				t.Fatalf("Run = %v, want nil (closed)", err)
			}
		})
		t.Run(tt.name+"/during another Close", func(t *testing.T) {
			leakCheck(t)
			r, cancel, done := hangingRelay(t, tt.grace)
			defer cancel()
			first := make(chan error, 1)
			go func() { first <- r.Close(context.Background()) }()
			closeWithin(t, r, 200*time.Millisecond)
			if err := <-done; err != nil {
				t.Fatalf("Run = %v", err)
			}
			if err := <-first; !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("first Close = %v, want context.DeadlineExceeded (cut short by the second)", err)
			}
		})
	}
}

// linkLoss is a destination whose batches fail as the SDK fails a send on a link the
// broker detached because the entity was deleted (a link failure: the relay retires the
// sender). The first destination's batch holds until its sender's context ends (the
// relay closing that sender), then lets the others' batches fail, while the relay goes
// on closing senders; each of the others fails when that happens, or when its own
// sender's context ends, whichever comes first.
type linkLoss struct {
	*sbtest.Sender
	first   bool
	started chan<- struct{} // receives once per batch
	fail    chan struct{}   // closed by the first destination's batch when its context ends
	once    *sync.Once
}

func (s *linkLoss) SendBatch(ctx context.Context, _ sbkit.Batch, _ *azservicebus.SendMessageBatchOptions) error {
	s.started <- struct{}{}
	if s.first {
		<-ctx.Done()
		s.once.Do(func() { close(s.fail) })
		return ctx.Err()
	}
	select {
	case <-s.fail:
	case <-ctx.Done():
	}
	return &amqp.Error{Condition: amqp.ErrCondNotFound, Description: "entity deleted"}
}

// TestRetireDuringRunEnd: when Close's deadline cuts a run short, the end of Run closes
// the destinations' senders one after the other while sends of other destinations fail
// as link failures, whose results retire their senders (a delete from the run's
// destinations): under -race, the closes must not range over the destinations while
// a retire deletes from them (they raced in about half the rounds). Run returns, Close
// keeps its deadline, and no goroutine remains.
func TestRetireDuringRunEnd(t *testing.T) {
	leakCheck(t)
	const n = 16 // the first destination's batch and 15 others, added in one transaction
	for round := range 6 {
		e := newEnv(t) // the rows a round releases stay in its outbox
		started := make(chan struct{}, n)
		fail, once := make(chan struct{}), &sync.Once{}
		prefix := "q"
		dests := func(name string) (sbkit.MessageSender, error) {
			s, err := e.ns.NewSender(name, nil)
			if err != nil {
				return nil, err
			}
			return &linkLoss{Sender: s, first: name == prefix+"0", started: started, fail: fail, once: once}, nil
		}
		for i := range n {
			e.queue(prefix+strconv.Itoa(i), nil)
		}
		r, err := pgoutbox.NewRelay(e.ob, dests, &pgoutbox.RelayOptions{Lease: time.Hour,
			Sender: &sender.Options{Retry: noRetry, AttemptTimeout: time.Hour}})
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- r.Run(context.Background()) }()
		ctx := context.Background()
		err = pgx.BeginFunc(ctx, e.pool, func(tx pgx.Tx) error {
			for i := range n {
				if err := e.ob.Add(ctx, tx, prefix+strconv.Itoa(i), msg(prefix+strconv.Itoa(i), "x")); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		for range n {
			<-started
		}
		closeWithin(t, r, 100*time.Millisecond)
		if err := <-done; err != nil {
			t.Fatalf("round %d: Run = %v", round, err)
		}
	}
}
