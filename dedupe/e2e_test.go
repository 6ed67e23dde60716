package dedupe_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/sbkit/sbkit"
	"github.com/sbkit/sbkit/dedupe"
	"github.com/sbkit/sbkit/sbtest"
)

// broker is an sbtest queue with a sender, for end-to-end tests inside a synctest bubble.
type broker struct {
	t     *testing.T
	ns    *sbtest.Namespace
	queue *sbtest.Entity
}

func newBroker(t *testing.T, opts *sbtest.EntityOptions) *broker {
	t.Helper()
	ns := sbtest.NewTestNamespace(t, &sbtest.NamespaceOptions{Queues: map[string]*sbtest.EntityOptions{"orders": opts}})
	q, _ := ns.Entity("orders")
	return &broker{t: t, ns: ns, queue: q}
}

func (b *broker) send(ids ...string) {
	b.t.Helper()
	s, err := b.ns.NewSender("orders", nil)
	if err != nil {
		b.t.Fatal(err)
	}
	defer s.Close(context.Background())
	for _, id := range ids {
		if err := s.SendMessage(context.Background(), &azservicebus.Message{MessageID: &id, Body: []byte(id)}, nil); err != nil {
			b.t.Fatal(err)
		}
	}
}

func (b *broker) receiver() *sbtest.Receiver {
	b.t.Helper()
	r, err := b.ns.NewReceiverForQueue("orders", nil)
	if err != nil {
		b.t.Fatal(err)
	}
	b.t.Cleanup(func() { _ = r.Close(context.Background()) })
	return r
}

// delivery is what one turn of the worker loop saw.
type delivery struct {
	msg       *azservicebus.ReceivedMessage
	result    error        // the wrapped handler's result
	action    sbkit.Action // the settlement it asked for
	settleErr error        // the settlement call's error
}

// deliverOne is the processor in miniature: receive one message, run h, settle the way
// the handler's result asks (sbkit.SettlementOf).
func deliverOne(t *testing.T, r *sbtest.Receiver, h sbkit.Handler) delivery {
	t.Helper()
	ctx := context.Background()
	msgs, err := r.ReceiveMessages(ctx, 1, nil)
	if err != nil || len(msgs) != 1 {
		t.Fatalf("ReceiveMessages = %d messages, %v", len(msgs), err)
	}
	d := delivery{msg: msgs[0]}
	d.result = h(ctx, d.msg)
	var se *sbkit.SettleError
	d.action, se = sbkit.SettlementOf(d.result)
	switch d.action {
	case sbkit.ActionComplete:
		d.settleErr = r.CompleteMessage(ctx, d.msg, nil)
	case sbkit.ActionAbandon:
		d.settleErr = r.AbandonMessage(ctx, d.msg, nil)
	case sbkit.ActionDeadLetter:
		d.settleErr = r.DeadLetterMessage(ctx, d.msg, &azservicebus.DeadLetterOptions{Reason: &se.Reason})
	case sbkit.ActionDefer:
		d.settleErr = r.DeferMessage(ctx, d.msg, nil)
	}
	return d
}

// TestCompleteFailsRedeliveryIsSkipped is the failed Complete of "Message transfers,
// locks, and settlement" (settling receive operations): the handler did its work,
// CompleteMessage failed, the lock expired and the broker delivered the message again;
// the second delivery is recognised by its MessageId, skipped and completed.
func TestCompleteFailsRedeliveryIsSkipped(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newBroker(t, &sbtest.EntityOptions{LockDuration: 30 * time.Second})
		b.send("job-42")
		f := mustNew(t, nil, &dedupe.Options{Entity: "orders"})
		var runs atomic.Int64
		h := wrap(t, f, func(context.Context, *azservicebus.ReceivedMessage) error {
			runs.Add(1)
			time.Sleep(20 * time.Second) // "minutes of processing work", in the docs' words
			return nil
		})
		r := b.receiver()
		b.queue.InjectFault(sbtest.Fault{Op: sbtest.OpComplete, Count: 1})

		first := deliverOne(t, r, h)
		if first.result != nil || first.settleErr == nil {
			t.Fatalf("first delivery: result %v, complete error %v; want nil, an injected failure", first.result, first.settleErr)
		}
		start := time.Now()
		second := deliverOne(t, r, h) // blocks until the lock expires
		if waited := time.Since(start); waited < 10*time.Second {
			t.Fatalf("redelivered after %v, want after the lock expired", waited)
		}
		if second.msg.MessageID != "job-42" || second.msg.DeliveryCount != 2 {
			t.Fatalf("redelivery: id %q count %d", second.msg.MessageID, second.msg.DeliveryCount)
		}
		_, se := sbkit.SettlementOf(second.result)
		if second.action != sbkit.ActionComplete || se == nil || se.Reason != dedupe.DuplicateReason || second.settleErr != nil {
			t.Fatalf("redelivery: result %v, complete error %v; want skipped and completed", second.result, second.settleErr)
		}
		if runs.Load() != 1 {
			t.Fatalf("handler ran %d times, want 1", runs.Load())
		}
		if n := b.queue.Counts().Active + b.queue.Counts().Locked; n != 0 {
			t.Fatalf("%d messages left in the queue, want 0", n)
		}
		if st := f.Stats(); st.DuplicatesSkipped != 1 || st.Processed != 1 || st.Succeeded != 1 {
			t.Fatalf("stats %+v", st)
		}
	})
}

// TestFailedHandlerLeavesNoMark: a failed handler is abandoned, and the redelivery runs
// the handler again (no silent loss).
func TestFailedHandlerLeavesNoMark(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newBroker(t, nil)
		b.send("job-7")
		f := mustNew(t, nil, &dedupe.Options{Entity: "orders"})
		var runs atomic.Int64
		h := wrap(t, f, func(context.Context, *azservicebus.ReceivedMessage) error {
			if runs.Add(1) == 1 {
				return errors.New("database down")
			}
			return nil
		})
		r := b.receiver()
		first := deliverOne(t, r, h)
		if first.action != sbkit.ActionAbandon || first.settleErr != nil {
			t.Fatalf("first delivery: %v %v, want abandoned", first.result, first.settleErr)
		}
		second := deliverOne(t, r, h)
		if second.result != nil || second.settleErr != nil || second.msg.DeliveryCount != 2 {
			t.Fatalf("second delivery: %v %v (count %d), want processed and completed", second.result, second.settleErr, second.msg.DeliveryCount)
		}
		if runs.Load() != 2 || f.Stats().DuplicatesSkipped != 0 || b.queue.Counts().Active != 0 {
			t.Fatalf("runs %d, stats %+v, active %d", runs.Load(), f.Stats(), b.queue.Counts().Active)
		}
	})
}

// TestTwoWorkersOneMessageId: two copies of one MessageId (a sender that sent twice) are
// received by two workers at once; the handler runs once and both copies end completed.
func TestTwoWorkersOneMessageId(t *testing.T) {
	cases := []struct {
		name   string
		policy dedupe.ContendedPolicy
	}{
		{"wait", dedupe.ContendedWait},
		{"abandon", dedupe.ContendedAbandon},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				b := newBroker(t, nil)
				b.send("pay-1", "pay-1")
				store, _ := dedupe.NewMemoryStore(nil) // shared by both workers
				var runs atomic.Int64
				handler := func(context.Context, *azservicebus.ReceivedMessage) error {
					runs.Add(1)
					time.Sleep(5 * time.Second)
					return nil
				}
				workers := make([]*dedupe.Filter, 2)
				var wg sync.WaitGroup
				results := make([]delivery, 2)
				for i := range workers {
					workers[i] = mustNew(t, store, &dedupe.Options{Entity: "orders", Contended: c.policy, LeasePoll: time.Second})
					r := b.receiver()
					msgs, err := r.ReceiveMessages(context.Background(), 1, nil)
					if err != nil {
						t.Fatal(err)
					}
					// Re-offer the received message through a one-message loop.
					wg.Go(func() {
						h := wrap(t, workers[i], handler)
						res := h(context.Background(), msgs[0])
						a, _ := sbkit.SettlementOf(res)
						d := delivery{msg: msgs[0], result: res, action: a}
						if a == sbkit.ActionComplete {
							d.settleErr = r.CompleteMessage(context.Background(), msgs[0], nil)
						} else {
							d.settleErr = r.AbandonMessage(context.Background(), msgs[0], nil)
						}
						results[i] = d
					})
				}
				wg.Wait()
				if c.policy == dedupe.ContendedAbandon {
					// The abandoned copy comes back and is skipped as a duplicate.
					var abandoned int
					for _, d := range results {
						if d.action == sbkit.ActionAbandon {
							abandoned++
							if !errors.Is(d.result, dedupe.ErrLeaseHeld) {
								t.Fatalf("abandoned with %v, want ErrLeaseHeld", d.result)
							}
						}
					}
					if abandoned != 1 {
						t.Fatalf("%d copies abandoned, want 1", abandoned)
					}
					again := deliverOne(t, b.receiver(), wrap(t, workers[0], handler))
					if _, se := sbkit.SettlementOf(again.result); se == nil || se.Reason != dedupe.DuplicateReason || again.settleErr != nil {
						t.Fatalf("redelivered copy: %v %v, want skipped and completed", again.result, again.settleErr)
					}
				}
				if runs.Load() != 1 {
					t.Fatalf("handler ran %d times, want 1", runs.Load())
				}
				if n := b.queue.Counts().Active + b.queue.Counts().Locked; n != 0 || b.queue.Stats().Completed != 2 {
					t.Fatalf("left %d, stats %+v; want both copies completed", n, b.queue.Stats())
				}
				contended := workers[0].Stats().Contended + workers[1].Stats().Contended
				if contended != 1 {
					t.Fatalf("contended %d, want 1", contended)
				}
			})
		})
	}
}

// crashable is a store client that a crashing process loses: after crash every call
// fails, so the process can neither refresh nor release its leases.
type crashable struct {
	dedupe.Store
	dead atomic.Bool
}

var errProcessDead = errors.New("process crashed")

func (c *crashable) Acquire(ctx context.Context, key, owner string, lease time.Duration) (dedupe.State, error) {
	if c.dead.Load() {
		return 0, errProcessDead
	}
	return c.Store.Acquire(ctx, key, owner, lease)
}

func (c *crashable) MarkDone(ctx context.Context, key, owner string, window time.Duration) error {
	if c.dead.Load() {
		return errProcessDead
	}
	return c.Store.MarkDone(ctx, key, owner, window)
}

func (c *crashable) Release(ctx context.Context, key, owner string) error {
	if c.dead.Load() {
		return errProcessDead
	}
	return c.Store.Release(ctx, key, owner)
}

// TestCrashedWorkerRedelivery: worker A takes the lease and crashes mid-handler: its
// connections to the broker and to the store are gone, so its lease is no longer
// refreshed. The broker delivers the message to worker B, which waits for A's lease to
// expire and then processes it. Nothing A's remains can do afterwards changes that.
func TestCrashedWorkerRedelivery(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// A's message lock outlives its client until LockedUntil ("Message transfers,
		// locks, and settlement"): 30 s after the crash, before A's lease runs out.
		b := newBroker(t, &sbtest.EntityOptions{LockDuration: 3*time.Minute + 30*time.Second})
		b.send("job-9")
		store, _ := dedupe.NewMemoryStore(nil)
		opts := &dedupe.Options{Entity: "orders", LeaseTTL: time.Minute}
		var runs atomic.Int64
		hang := make(chan struct{})
		aStore := &crashable{Store: store}
		a := wrap(t, mustNew(t, aStore, opts), func(context.Context, *azservicebus.ReceivedMessage) error {
			runs.Add(1)
			<-hang
			return errors.New("worker A gave up")
		})
		ra := b.receiver()
		msgs, err := ra.ReceiveMessages(context.Background(), 1, nil)
		if err != nil {
			t.Fatal(err)
		}
		aDone := make(chan error, 1)
		go func() { aDone <- a(context.Background(), msgs[0]) }()
		synctest.Wait() // A holds the lease, runs for a while (its lease refreshed) ...
		time.Sleep(3 * time.Minute)
		ra.DropConnection() // ... and crashes
		aStore.dead.Store(true)

		fb := mustNew(t, store, opts)
		start := time.Now()
		d := deliverOne(t, b.receiver(), wrap(t, fb, counting(&runs, nil)))
		if d.result != nil || d.settleErr != nil {
			t.Fatalf("worker B: %v %v, want processed and completed", d.result, d.settleErr)
		}
		if waited := time.Since(start); waited < 30*time.Second || waited > time.Minute+time.Second {
			t.Fatalf("worker B waited %v, want about the lease's remaining minute", waited)
		}
		close(hang)
		if err := <-aDone; err == nil {
			t.Fatal("worker A's handler result lost")
		}
		if runs.Load() != 2 || fb.Stats().Contended != 1 {
			t.Fatalf("runs %d, B stats %+v", runs.Load(), fb.Stats())
		}
		// A's release did not erase B's done mark.
		if got, _ := store.Acquire(context.Background(), "orders:job-9", "late", time.Minute); got != dedupe.Done {
			t.Fatalf("key state %v, want done", got)
		}
		if n := b.queue.Counts().Active + b.queue.Counts().Locked; n != 0 {
			t.Fatalf("left %d messages", n)
		}
	})
}
