package scenario

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/sbkit/sbkit"
	"github.com/sbkit/sbkit/receiver"
	"github.com/sbkit/sbkit/sbtest"
)

// ok is a handler that succeeds.
func ok(context.Context, *azservicebus.ReceivedMessage) error { return nil }

// processorComplete: handlers that succeed complete their messages, each handled once.
func processorComplete(t *testing.T, b Backend) {
	q := b.Queue(t, QueueOptions{})
	const n = 6
	s := q.NewSender(t)
	for i := range n {
		sendAll(t, s, message(fmt.Sprintf("m%d", i), "x"))
	}
	r := q.NewReceiver(t, azservicebus.ReceiveModePeekLock, false)
	rec := &recorder{}
	pr := startProcessor(t, r, rec.wrap(ok), receiver.Options{MaxConcurrency: 2})
	waitFor(t, "every message completed", func() bool { return pr.p.Stats().Completed == n })
	st := pr.stop(t, waitTimeout)
	if st.Received != n || st.Completed != n || st.HandlerErrors != 0 {
		t.Errorf("stats %+v, want %d received and completed", st, n)
	}
	for id, c := range rec.byID() {
		if c != 1 {
			t.Errorf("%s handled %d times", id, c)
		}
	}
	if got := len(rec.byID()); got != n {
		t.Errorf("%d distinct messages handled, want %d", got, n)
	}
	expectEmpty(t, q, r)
	expectEmpty(t, q, q.NewReceiver(t, azservicebus.ReceiveModePeekLock, true))
}

// processorAbandon: a handler error abandons; the broker delivers the message again with
// DeliveryCount+1, and the second call's success completes it.
func processorAbandon(t *testing.T, b Backend) {
	q := b.Queue(t, QueueOptions{})
	sendAll(t, q.NewSender(t), message("flaky", "x"))
	r := q.NewReceiver(t, azservicebus.ReceiveModePeekLock, false)
	rec := &recorder{}
	h := func(_ context.Context, m *azservicebus.ReceivedMessage) error {
		if m.DeliveryCount == 1 {
			return errors.New("scenario: first delivery fails")
		}
		return nil
	}
	pr := startProcessor(t, r, rec.wrap(h), receiver.Options{})
	waitFor(t, "the redelivery completed", func() bool { return pr.p.Stats().Completed == 1 })
	st := pr.stop(t, waitTimeout)
	var counts []uint32
	for _, c := range rec.snapshot() {
		counts = append(counts, c.DeliveryCount)
	}
	if !slices.Equal(counts, []uint32{1, 2}) {
		t.Errorf("delivery counts seen by the handler %v, want [1 2]", counts)
	}
	if st.Received != 2 || st.Abandoned != 1 || st.Completed != 1 || st.HandlerErrors != 1 {
		t.Errorf("stats %+v, want 2 received, 1 abandoned, 1 completed, 1 handler error", st)
	}
	expectEmpty(t, q, r)
}

// processorDeadLetter: a dead-letter marker moves the message to the dead-letter queue
// with its reason and description, on the first delivery.
func processorDeadLetter(t *testing.T, b Backend) {
	q := b.Queue(t, QueueOptions{})
	sendAll(t, q.NewSender(t), message("poison", "poison body"))
	r := q.NewReceiver(t, azservicebus.ReceiveModePeekLock, false)
	rec := &recorder{}
	h := func(context.Context, *azservicebus.ReceivedMessage) error {
		return sbkit.DeadLetter("ScenarioPoison", "order 7 cannot be priced", nil)
	}
	pr := startProcessor(t, r, rec.wrap(h), receiver.Options{})
	waitFor(t, "the message dead-lettered", func() bool { return pr.p.Stats().DeadLettered == 1 })
	st := pr.stop(t, waitTimeout)
	if st.Received != 1 || st.DeadLettered != 1 || rec.count() != 1 {
		t.Errorf("stats %+v after %d handler calls, want 1 received and dead-lettered", st, rec.count())
	}
	dlq := q.NewReceiver(t, azservicebus.ReceiveModePeekLock, true)
	got := receiveN(t, dlq, 1)[0]
	if got.MessageID != "poison" || string(got.Body) != "poison body" {
		t.Errorf("dead-lettered message %q %q, want poison", got.MessageID, got.Body)
	}
	if deref(got.DeadLetterReason) != "ScenarioPoison" || deref(got.DeadLetterErrorDescription) != "order 7 cannot be priced" {
		t.Errorf("dead-letter reason %v, description %v; want ScenarioPoison, order 7 cannot be priced",
			deref(got.DeadLetterReason), deref(got.DeadLetterErrorDescription))
	}
	completeAll(t, dlq, []*azservicebus.ReceivedMessage{got})
	expectEmpty(t, q, dlq)
	expectEmpty(t, q, r)
}

// processorMaxDeliveryCount: a handler that always fails sees the message MaxDeliveryCount
// times, with delivery counts 1, 2, ..., and then the broker dead-letters it with reason
// MaxDeliveryCountExceeded.
func processorMaxDeliveryCount(t *testing.T, b Backend) {
	q := b.Queue(t, QueueOptions{MaxDeliveryCount: 3})
	p := q.Properties()
	if !p.Known || p.MaxDeliveryCount > 20 {
		t.Skipf("needs a queue with a known MaxDeliveryCount of at most 20 (known %v, %d)", p.Known, p.MaxDeliveryCount)
	}
	mdc := p.MaxDeliveryCount
	sendAll(t, q.NewSender(t), message("doomed", "x"))
	r := q.NewReceiver(t, azservicebus.ReceiveModePeekLock, false)
	rec := &recorder{}
	h := func(context.Context, *azservicebus.ReceivedMessage) error {
		return errors.New("scenario: always fails")
	}
	pr := startProcessor(t, r, rec.wrap(h), receiver.Options{})
	waitFor(t, "every delivery abandoned", func() bool { return pr.p.Stats().Abandoned == int64(mdc) })
	dlq := q.NewReceiver(t, azservicebus.ReceiveModePeekLock, true)
	got := receiveN(t, dlq, 1)[0]
	st := pr.stop(t, waitTimeout)
	if got.MessageID != "doomed" || deref(got.DeadLetterReason) != sbtest.MaxDeliveryCountExceededReason {
		t.Errorf("dead-lettered %q with reason %v, want doomed, %s", got.MessageID, deref(got.DeadLetterReason), sbtest.MaxDeliveryCountExceededReason)
	}
	completeAll(t, dlq, []*azservicebus.ReceivedMessage{got})
	var counts, want []uint32
	for _, c := range rec.snapshot() {
		counts = append(counts, c.DeliveryCount)
	}
	for i := range mdc {
		want = append(want, uint32(i+1))
	}
	if !slices.Equal(counts, want) {
		t.Errorf("delivery counts seen by the handler %v, want %v", counts, want)
	}
	if st.Received != int64(mdc) || st.Abandoned != int64(mdc) {
		t.Errorf("stats %+v, want %d received and abandoned", st, mdc)
	}
	expectEmpty(t, q, r)
}

// processorCloseAbandons: Close abandons the messages that handlers are working on and
// those waiting in the prefetch buffer at once, so they come back with DeliveryCount 2
// long before their locks (60 s) would expire.
func processorCloseAbandons(t *testing.T, b Backend) {
	q := b.Queue(t, QueueOptions{LockDuration: time.Minute})
	const handlers, buffered = 2, 2
	s := q.NewSender(t)
	for i := range handlers + buffered {
		sendAll(t, s, message(fmt.Sprintf("m%d", i), "x"))
	}
	r := q.NewReceiver(t, azservicebus.ReceiveModePeekLock, false)
	var started atomic.Int64
	causes := make(chan error, handlers+buffered)
	h := func(ctx context.Context, m *azservicebus.ReceivedMessage) error {
		started.Add(1)
		<-ctx.Done()
		causes <- context.Cause(ctx)
		return context.Cause(ctx)
	}
	pr := startProcessor(t, r, h, receiver.Options{MaxConcurrency: handlers, PrefetchCount: buffered})
	waitFor(t, "handlers busy and the buffer full", func() bool {
		st := pr.p.Stats()
		return st.Received == handlers+buffered && started.Load() == handlers
	})
	st := pr.stop(t, 500*time.Millisecond) // handlers are cancelled 125 ms before the deadline, to abandon
	if st.Abandoned != handlers+buffered || st.Completed != 0 {
		t.Errorf("stats %+v, want %d abandoned", st, handlers+buffered)
	}
	if started.Load() != handlers {
		t.Errorf("%d handlers started, want %d (buffered messages must not be handled after Close)", started.Load(), handlers)
	}
	for range handlers {
		if c := <-causes; !errors.Is(c, receiver.ErrClosed) {
			t.Errorf("handler context cause %v, want receiver.ErrClosed", c)
		}
	}
	// A second receiver gets every message back at once, its abandon counted.
	r2 := q.NewReceiver(t, azservicebus.ReceiveModePeekLock, false)
	back := receiveN(t, r2, handlers+buffered)
	for _, m := range back {
		if m.DeliveryCount != 2 {
			t.Errorf("%s came back with DeliveryCount %d, want 2", m.MessageID, m.DeliveryCount)
		}
	}
	if got := ids(back); !slices.Equal(got, []string{"m0", "m1", "m2", "m3"}) {
		t.Errorf("came back %v, want m0..m3", got)
	}
	completeAll(t, r2, back)
	expectEmpty(t, q, r2)
}

// processorLockRenewal: a handler that runs 1.5 lock durations keeps its lock (renewed
// automatically), completes its message, and the message is not delivered again.
func processorLockRenewal(t *testing.T, b Backend) {
	q, p := shortLockQueue(t, b, QueueOptions{LockDuration: 2 * time.Second})
	sendAll(t, q.NewSender(t), message("slow", "x"))
	r := q.NewReceiver(t, azservicebus.ReceiveModePeekLock, false)
	rec := &recorder{}
	pr := startProcessor(t, r, rec.wrap(outlasting(p.LockDuration+p.LockDuration/2)), receiver.Options{})
	waitFor(t, "the slow message settled", func() bool {
		st := pr.p.Stats()
		return st.Completed+st.Abandoned+st.LocksLost > 0
	})
	st := pr.stop(t, waitTimeout)
	calls := rec.snapshot()
	if len(calls) != 1 || calls[0].Result != nil {
		t.Fatalf("handler calls %+v, want one that succeeded", calls)
	}
	if st.Completed != 1 || st.LocksLost != 0 || st.Renewed < 1 {
		t.Errorf("stats %+v, want 1 completed after at least 1 renewal, no lock lost", st)
	}
	for _, e := range pr.errorsFrom(receiver.SourceRenew) {
		t.Errorf("renewal error: %v", e)
	}
	expectEmpty(t, q, r)
}

// processorLockExpiry: without renewal a handler that outlives its lock has its context
// cancelled with a lock-lost cause; the processor does not settle the message (it counts
// it in LocksLost, reported once) and the broker delivers it again with its delivery counted,
// and that second delivery completes.
func processorLockExpiry(t *testing.T, b Backend) {
	q, _ := shortLockQueue(t, b, QueueOptions{LockDuration: time.Second})
	sendAll(t, q.NewSender(t), message("stuck", "x"))
	r := q.NewReceiver(t, azservicebus.ReceiveModePeekLock, false)
	cause := make(chan error, 1)
	rec := &recorder{}
	h := func(ctx context.Context, m *azservicebus.ReceivedMessage) error {
		if m.DeliveryCount > 1 {
			return nil
		}
		select {
		case <-ctx.Done():
			cause <- context.Cause(ctx)
		case <-time.After(waitTimeout):
			cause <- errors.New("handler context not cancelled at the lock's expiry")
		}
		return context.Cause(ctx)
	}
	pr := startProcessor(t, r, rec.wrap(h), receiver.Options{DisableAutoLockRenewal: true})
	if c := <-cause; !sbkit.IsLockLost(c) {
		t.Errorf("handler context cause %v, want a lock-lost error", c)
	}
	waitFor(t, "the redelivery completed", func() bool { return pr.p.Stats().Completed == 1 })
	st := pr.stop(t, waitTimeout)
	if st.Received != 2 || st.LocksLost != 1 || st.Completed != 1 || st.Abandoned != 0 {
		t.Errorf("stats %+v, want 2 received, 1 lock-lost, 1 completed", st)
	}
	if n := len(pr.errorsFrom(receiver.SourceRenew)); n != 1 {
		t.Errorf("lock loss reported %d times, want once", n)
	}
	var counts []uint32
	for _, c := range rec.snapshot() {
		counts = append(counts, c.DeliveryCount)
	}
	if !slices.Equal(counts, []uint32{1, 2}) {
		t.Errorf("delivery counts seen by the handler %v, want [1 2]", counts)
	}
	expectEmpty(t, q, r)
}

// processorDefer: a defer marker sets the message aside; ReceiveMessages no longer
// delivers it, and it is received by its sequence number and completed.
func processorDefer(t *testing.T, b Backend) {
	q := b.Queue(t, QueueOptions{})
	sendAll(t, q.NewSender(t), message("later", "deferred body"))
	r := q.NewReceiver(t, azservicebus.ReceiveModePeekLock, false)
	seq := make(chan int64, 1)
	h := func(_ context.Context, m *azservicebus.ReceivedMessage) error {
		if m.SequenceNumber == nil {
			return sbkit.DeadLetter("NoSequenceNumber", "", nil)
		}
		seq <- *m.SequenceNumber
		return sbkit.Defer(nil)
	}
	pr := startProcessor(t, r, h, receiver.Options{})
	waitFor(t, "the message deferred", func() bool { return pr.p.Stats().Deferred == 1 })
	st := pr.stop(t, waitTimeout)
	if st.Received != 1 || st.Deferred != 1 {
		t.Errorf("stats %+v, want 1 received and deferred", st)
	}
	expectEmpty(t, q, r)
	n := <-seq
	got, err := r.ReceiveDeferredMessages(testContext(t), []int64{n}, nil)
	if err != nil {
		t.Fatalf("ReceiveDeferredMessages(%d): %v", n, err)
	}
	if len(got) != 1 || got[0].MessageID != "later" || string(got[0].Body) != "deferred body" || deref(got[0].SequenceNumber) != n {
		t.Fatalf("received deferred %v, want the message with sequence number %d", ids(got), n)
	}
	completeAll(t, r, got)
	expectEmpty(t, q, r)
}
