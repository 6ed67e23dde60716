package sbotel_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/sbkit/sbkit"
	"github.com/sbkit/sbkit/dedupe"
	"github.com/sbkit/sbkit/receiver"
	"github.com/sbkit/sbkit/sbtest"
	"github.com/sbkit/sbkit/sender"
)

// flakyStore is a MemoryStore whose every 11th Acquire and every 7th MarkDone fail.
type flakyStore struct {
	*dedupe.MemoryStore
	acquires, marks atomic.Int64
}

var errStoreDown = errors.New("store down")

func (s *flakyStore) Acquire(ctx context.Context, key, owner string, lease time.Duration) (dedupe.State, error) {
	if s.acquires.Add(1)%11 == 0 {
		return 0, errStoreDown
	}
	return s.MemoryStore.Acquire(ctx, key, owner, lease)
}

func (s *flakyStore) MarkDone(ctx context.Context, key, owner string, window time.Duration) error {
	if s.marks.Add(1)%7 == 0 {
		return errStoreDown
	}
	return s.MemoryStore.MarkDone(ctx, key, owner, window)
}

// After a run with faults everywhere (sends failing transiently and permanently, a full
// window, receive, settle and renewal faults, lost locks, a dropped connection, panics,
// duplicates and a flaky dedupe store), every count in the metrics equals the matching
// Stats counter of the sender, the processor and the duplicate filter. synctest also
// checks that nothing is left running after Close.
func TestMetricsMatchStats(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const n, dups = 150, 15
		r := newRig(t, nil)
		ns := sbtest.NewTestNamespace(t, &sbtest.NamespaceOptions{Queues: map[string]*sbtest.EntityOptions{"orders": {LockDuration: 10 * time.Second, MaxDeliveryCount: 3}}})
		q, _ := ns.Entity("orders")
		snd, _ := ns.NewSender("orders", nil)

		// The sender: the first batch fails twice (retried), a later one for good; a full
		// window refuses a TrySend.
		sh := r.tel.Sender("orders")
		s, err := sender.New(snd, &sender.Options{MaxInFlightMessages: 40, Hooks: []sender.Hook{sh}})
		if err != nil {
			t.Fatal(err)
		}
		sreg, err := sh.Observe(s)
		if err != nil {
			t.Fatal(err)
		}
		q.InjectFault(sbtest.Fault{Op: sbtest.OpSend, Count: 2})
		ctx := context.Background()
		var results []*sender.Result
		sendOne := func(id string) {
			res, err := s.SendAsync(ctx, &azservicebus.Message{MessageID: new(id), Body: []byte(id)})
			if err != nil {
				t.Fatal(err)
			}
			results = append(results, res)
		}
		for i := range 40 {
			sendOne(fmt.Sprintf("m%d", i))
		}
		if _, err := s.TrySend(ctx, &azservicebus.Message{}); !errors.Is(err, sender.ErrFull) {
			t.Fatalf("TrySend with a full window: %v", err)
		}
		if m := r.metrics(t); m.sum("sbkit.sender.inflight.messages") != 40 || m.sum("sbkit.sender.inflight.bytes") <= 0 {
			t.Errorf("in flight: %d messages, %d bytes; want 40 and some", m.sum("sbkit.sender.inflight.messages"), m.sum("sbkit.sender.inflight.bytes"))
		}
		for _, res := range results {
			_ = res.Wait(ctx)
		}
		q.InjectFault(sbtest.Fault{Op: sbtest.OpSend, Count: 1, Err: sbtest.PermanentError})
		for i := 40; i < n+10; i++ { // the first batch of these fails for good
			sendOne(fmt.Sprintf("m%d", i))
		}
		for i := range dups {
			sendOne(fmt.Sprintf("m%d", 50+i))
		}
		if err := s.Close(ctx); err != nil {
			t.Fatal(err)
		}
		ss := s.Stats()
		if ss.Failed == 0 || ss.SendRetries == 0 || ss.Rejected != 1 {
			t.Fatalf("the sender's faults did not happen: %+v", ss)
		}

		// The processor, with a duplicate filter on a flaky store.
		ph := r.tel.Processor("orders", "")
		store, _ := dedupe.NewMemoryStore(nil)
		filter, err := dedupe.New(&flakyStore{MemoryStore: store}, &dedupe.Options{Entity: "orders", Hooks: []dedupe.Hook{ph}})
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range []sbtest.Fault{
			{Op: sbtest.OpReceive, Count: 2},
			{Op: sbtest.OpComplete, Count: 5},
			{Op: sbtest.OpAbandon, Count: 3},
			{Op: sbtest.OpRenew, Count: 4},
			{Op: sbtest.OpDeadLetter, Count: 2, Err: &azservicebus.Error{Code: azservicebus.CodeLockLost}},
			{Op: sbtest.OpDefer, Count: 1, Err: sbtest.PermanentError},
		} {
			q.InjectFault(f)
		}
		src, _ := ns.NewReceiverForQueue("orders", nil)
		handler, err := filter.Wrap(func(ctx context.Context, m *azservicebus.ReceivedMessage) error {
			i, _ := strconv.Atoi(strings.TrimPrefix(m.MessageID, "m"))
			if i%13 == 0 && m.DeliveryCount == 1 {
				panic("bad luck")
			}
			switch i % 6 {
			case 1:
				return errors.New("failed")
			case 2:
				return sbkit.DeadLetter("Invalid", "", nil)
			case 3:
				return sbkit.Defer(nil)
			case 5:
				select {
				case <-time.After(25 * time.Second): // longer than the lock: renewed
				case <-ctx.Done():
					return ctx.Err()
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		p, err := receiver.New(src, handler, &receiver.Options{MaxConcurrency: 8, PrefetchCount: 8,
			Hooks: []receiver.Hook{ph},
			AbandonDelay: func(m *azservicebus.ReceivedMessage, _ error) time.Duration {
				if m.SequenceNumber != nil && *m.SequenceNumber%2 == 0 {
					return 3 * time.Second
				}
				return 0
			}})
		if err != nil {
			t.Fatal(err)
		}
		preg, err := ph.Observe(p)
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- p.Run(ctx) }()
		for i := range 40 { // chaos: a lock expires every 3 s; the connection drops once
			time.Sleep(3 * time.Second)
			if locked := q.Locked(); len(locked) > 0 {
				q.ExpireLock(locked[i%len(locked)].LockToken)
			}
			if i == 10 {
				src.DropConnection()
			}
		}
		time.Sleep(10 * time.Minute)
		synctest.Wait()
		if m := r.metrics(t); m.sum("sbkit.processor.messages.buffered")+m.sum("sbkit.processor.handlers.running") != p.Stats().Buffered+p.Stats().InFlight {
			t.Errorf("gauges: buffered %d, running %d; stats %+v", m.sum("sbkit.processor.messages.buffered"), m.sum("sbkit.processor.handlers.running"), p.Stats())
		}
		closeCtx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		_ = p.Close(closeCtx)
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		_ = sreg.Unregister()
		_ = preg.Unregister()

		m := r.metrics(t)
		ps, ds := p.Stats(), filter.Stats()
		t.Logf("sender %+v\nprocessor %+v\ndedupe %+v", ss, ps, ds)
		if ps.LocksLost == 0 || ps.Abandoned == 0 || ps.DeadLettered == 0 || ps.Deferred == 0 || ps.Panics == 0 ||
			ps.SettleErrors == 0 || ps.RenewErrors == 0 || ps.Renewed == 0 || ps.ReceiveErrors == 0 {
			t.Errorf("some fault never happened: %+v", ps)
		}
		if ds.DuplicatesSkipped == 0 || ds.StoreErrors == 0 {
			t.Errorf("no duplicate or no store error: %+v", ds)
		}
		for _, c := range []struct {
			name      string
			got, want int64
		}{
			{"sent.messages", m.sum("messaging.client.sent.messages", "error.type"), ss.Sent},
			{"sent.messages failed", m.sum("messaging.client.sent.messages", "error.type=unauthorized"), ss.Failed},
			{"send durations", m.count("messaging.client.operation.duration", "messaging.operation.name=send"), ss.Sent + ss.Failed},
			{"rejected", m.sum("sbkit.sender.rejected", "error.type=full"), ss.Rejected},
			{"retries", m.sum("sbkit.sender.retries"), ss.SendRetries},
			{"batches sent", m.count("sbkit.sender.batch.duration", "error.type"), ss.BatchesSent},
			{"in flight after Close", m.sum("sbkit.sender.inflight.messages"), 0},

			{"consumed.messages", m.sum("messaging.client.consumed.messages"), ps.Received},
			{"process.duration count", m.count("messaging.process.duration"), ps.Handled},
			{"handler errors", m.count("messaging.process.duration", "error.type=*"), ps.HandlerErrors},
			{"panics", m.count("messaging.process.duration", "error.type=panic"), ps.Panics},
			{"completed", m.sum("sbkit.processor.outcomes", "sbkit.outcome=complete"), ps.Completed},
			{"abandoned", m.sum("sbkit.processor.outcomes", "sbkit.outcome=abandon"), ps.Abandoned},
			{"dead-lettered", m.sum("sbkit.processor.outcomes", "sbkit.outcome=dead_letter"), ps.DeadLettered},
			{"deferred", m.sum("sbkit.processor.outcomes", "sbkit.outcome=defer"), ps.Deferred},
			{"locks lost", m.sum("sbkit.processor.outcomes", "sbkit.outcome=lock_lost"), ps.LocksLost},
			{"left locked", m.sum("sbkit.processor.outcomes", "sbkit.outcome=left_locked"), ps.LeftLocked},
			{"all outcomes", m.sum("sbkit.processor.outcomes"), ps.Received},
			{"receive errors", m.sum("sbkit.processor.errors", "sbkit.error.source=receive"), ps.ReceiveErrors},
			{"settle failures", m.sum("sbkit.processor.settle.failures"), ps.SettleErrors},
			{"renewals", m.sum("sbkit.lock.renewals", "sbkit.lock.kind=message"), ps.Renewed},
			{"renew failures", m.sum("sbkit.lock.renew.failures"), ps.RenewErrors},
			{"running after Close", m.sum("sbkit.processor.handlers.running"), 0},

			{"dedupe fresh", m.sum("sbkit.dedupe.outcomes", "sbkit.dedupe.outcome=fresh"), ds.Processed},
			{"dedupe duplicate", m.sum("sbkit.dedupe.outcomes", "sbkit.dedupe.outcome=duplicate"), ds.DuplicatesSkipped},
			{"dedupe contended", m.sum("sbkit.dedupe.outcomes", "sbkit.dedupe.outcome=contended"), ds.Contended},
			{"dedupe lease lost", m.sum("sbkit.dedupe.outcomes", "sbkit.dedupe.outcome=lease_lost"), ds.LeasesLost},
			{"dedupe store errors", m.sum("sbkit.dedupe.outcomes", "sbkit.dedupe.outcome=store_error"), ds.StoreErrors},
		} {
			if c.got != c.want {
				t.Errorf("%s: metric %d, stats %d", c.name, c.got, c.want)
			}
		}
		if lost := m.sum("sbkit.lock.lost", "sbkit.lock.kind=message"); lost == 0 || lost > ps.LocksLost {
			t.Errorf("sbkit.lock.lost %d, LocksLost %d", lost, ps.LocksLost)
		}
		// No metric has a per-message attribute.
		for name, x := range m {
			if strings.Contains(fmt.Sprint(x.Data), "messaging.message.id") {
				t.Errorf("metric %s has a message id attribute", name)
			}
		}
	})
}
