package scenario

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/sbkit/sbkit"
	"github.com/sbkit/sbkit/receiver"
)

// Timing of the scenarios. Waits are deadlines, never expectations: a scenario polls
// until what it waits for happens or the deadline passes, so a loaded machine slows it
// down without failing it.
const (
	// waitTimeout bounds every wait for something that must happen.
	waitTimeout = 30 * time.Second
	// quietWait is the default of Properties.QuietWait: sbtest delivers at once, over
	// loopback or not.
	quietWait = 200 * time.Millisecond
	// pollInterval is how often a condition is checked.
	pollInterval = 5 * time.Millisecond
)

// shortLockQueue returns a queue made with opts, which ask for a short LockDuration, and
// its properties. It skips t unless the backend knows the queue's lock duration and it
// is at most 10 s: a scenario that waits for a lock to run out, or to need renewing,
// would take too long otherwise.
func shortLockQueue(t *testing.T, b Backend, opts QueueOptions) (Queue, Properties) {
	t.Helper()
	q := b.Queue(t, opts)
	p := q.Properties()
	if !p.Known || p.LockDuration > 10*time.Second {
		t.Skipf("needs a queue with a known lock duration of at most 10s (known %v, %v)", p.Known, p.LockDuration)
	}
	return q, p
}

// outlasting returns a handler that takes d, or fails with its context's cause when the
// context ends first.
func outlasting(d time.Duration) sbkit.Handler {
	return func(ctx context.Context, _ *azservicebus.ReceivedMessage) error {
		select {
		case <-time.After(d):
			return nil
		case <-ctx.Done():
			return fmt.Errorf("handler cancelled after less than %v: %w", d, context.Cause(ctx))
		}
	}
}

// testContext returns a context that ends after waitTimeout or when t ends.
func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	t.Cleanup(cancel)
	return ctx
}

// receiveN receives until it has n messages, failing t when they do not all come within
// waitTimeout. In peek-lock mode the caller settles them.
func receiveN(t *testing.T, r sbkit.MessageReceiver, n int) []*azservicebus.ReceivedMessage {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	var got []*azservicebus.ReceivedMessage
	for len(got) < n {
		msgs, err := r.ReceiveMessages(ctx, n-len(got), nil)
		got = append(got, msgs...)
		if err != nil && len(got) < n {
			t.Fatalf("received %d of %d messages: %v", len(got), n, err)
		}
	}
	return got
}

// expectEmpty fails t when r receives anything within q's QuietWait. What it receives in
// peek-lock mode is abandoned.
func expectEmpty(t *testing.T, q Queue, r Receiver) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), q.Properties().QuietWait)
	defer cancel()
	msgs, err := r.ReceiveMessages(ctx, 10, nil)
	if err != nil && !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("receive while expecting none: %v", err)
	}
	if len(msgs) > 0 {
		t.Errorf("expected an empty queue, received %d more: %v", len(msgs), ids(msgs))
		for _, m := range msgs {
			_ = r.AbandonMessage(context.Background(), m, nil)
		}
	}
}

// ids returns the MessageIDs of msgs, sorted.
func ids(msgs []*azservicebus.ReceivedMessage) []string {
	out := make([]string, len(msgs))
	for i, m := range msgs {
		out[i] = m.MessageID
	}
	sort.Strings(out)
	return out
}

// completeAll completes every message, failing t on error.
func completeAll(t *testing.T, r Receiver, msgs []*azservicebus.ReceivedMessage) {
	t.Helper()
	for _, m := range msgs {
		if err := r.CompleteMessage(context.Background(), m, nil); err != nil {
			t.Fatalf("complete %s: %v", m.MessageID, err)
		}
	}
}

// sendAll sends messages directly (one SendMessage each), failing t on error.
func sendAll(t *testing.T, s sbkit.MessageSender, msgs ...*azservicebus.Message) {
	t.Helper()
	for _, m := range msgs {
		if err := s.SendMessage(context.Background(), m, nil); err != nil {
			t.Fatalf("send: %v", err)
		}
	}
}

// message returns a message with the given ID and body.
func message(id, body string) *azservicebus.Message {
	return &azservicebus.Message{MessageID: &id, Body: []byte(body)}
}

// waitFor polls cond until it is true, failing t after waitTimeout.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", waitTimeout, what)
		}
		time.Sleep(pollInterval)
	}
}

// processing is a [receiver.Processor] running in the background.
type processing struct {
	p    *receiver.Processor
	done chan error

	mu   sync.Mutex
	errs []*receiver.Error
}

// startProcessor runs a processor over src with h and opts (with an error hook added)
// until stop is called; t's cleanup stops it at once if the scenario did not.
func startProcessor(t *testing.T, src sbkit.MessageReceiver, h sbkit.Handler, opts receiver.Options) *processing {
	t.Helper()
	pr := &processing{done: make(chan error, 1)}
	opts.Hooks = append(opts.Hooks, receiver.ErrorHookFunc(func(_ context.Context, err *receiver.Error) {
		pr.mu.Lock()
		pr.errs = append(pr.errs, err)
		pr.mu.Unlock()
	}))
	p, err := receiver.New(src, h, &opts)
	if err != nil {
		t.Fatalf("receiver.New: %v", err)
	}
	pr.p = p
	go func() { pr.done <- p.Run(context.Background()) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		_ = p.Close(ctx)
	})
	return pr
}

// errors returns the errors reported so far from source src.
func (pr *processing) errorsFrom(src receiver.ErrorSource) []*receiver.Error {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	var out []*receiver.Error
	for _, e := range pr.errs {
		if e.Source == src {
			out = append(out, e)
		}
	}
	return out
}

// stop closes the processor, giving running handlers grace to finish, waits for Run to
// return, checks that every received message was settled exactly once (the processor's
// reconciliation) and that no receive or settle error was reported, and returns the final
// Stats. Renewal errors are the scenarios' to check.
func (pr *processing) stop(t *testing.T, grace time.Duration) receiver.Stats {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	closeErr := pr.p.Close(ctx)
	select {
	case err := <-pr.done:
		if err != nil {
			t.Errorf("Run: %v", err)
		}
	case <-time.After(waitTimeout):
		t.Fatalf("Run did not return within %v of Close", waitTimeout)
	}
	if closeErr != nil && !errors.Is(closeErr, context.DeadlineExceeded) {
		t.Errorf("Close: %v", closeErr)
	}
	st := pr.p.Stats()
	if settled := st.Completed + st.Abandoned + st.DeadLettered + st.Deferred + st.LocksLost + st.LeftLocked; settled != st.Received {
		t.Errorf("stats do not reconcile: received %d, settled %d (%+v)", st.Received, settled, st)
	}
	for _, src := range []receiver.ErrorSource{receiver.SourceReceive, receiver.SourceSettle} {
		for _, e := range pr.errorsFrom(src) {
			t.Errorf("processor reported a %v error: %v", src, e)
		}
	}
	return st
}
