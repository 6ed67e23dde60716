package receiver_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"runtime"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/sbkit/sbkit"
	"github.com/sbkit/sbkit/receiver"
	"github.com/sbkit/sbkit/sbtest"
)

var chaosSeeds = flag.Int("chaos.seeds", 30, "number of seeds TestProcessorChaos runs")

// TestProcessorChaos runs the processor against random faults (transient, permanent,
// lock-lost and hanging, on receive, settlements and renewal), random handler durations,
// results and panics, lock expiries and dropped connections, then closes it at a random
// moment with a short deadline. Whatever happened: Close returned by its deadline, every
// received message is accounted for exactly once in Stats and by the hooks, every lock
// the broker still holds for the processor was reported, and no goroutine is left. Each
// seed is deterministic in what it injects; a failure names its seed (rerun it with
// -run 'TestProcessorChaos/seed=N').
func TestProcessorChaos(t *testing.T) { runSeeds(t, *chaosSeeds, chaosRun) }

// runSeeds runs run for the seeds 0 to n-1, each a subtest in a synctest bubble.
func runSeeds(t *testing.T, n int, run func(t *testing.T, seed uint64)) {
	for seed := range uint64(n) {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) { run(t, seed) })
		})
	}
}

// outcomes is a hook that records how each delivery ended, by a key that tells
// deliveries apart (a message's lock token; a session's messages share their session's
// lock, so there the *ReceivedMessage a receive call returned).
type outcomes[K comparable] struct {
	key      func(*azservicebus.ReceivedMessage) K
	mu       sync.Mutex
	settled  map[K]sbkit.Action // settlements the broker accepted
	reported map[K]error        // lock-lost and left-locked reports
	twice    []string
}

func newOutcomes[K comparable](key func(*azservicebus.ReceivedMessage) K) *outcomes[K] {
	return &outcomes[K]{key: key, settled: map[K]sbkit.Action{}, reported: map[K]error{}}
}

func (o *outcomes[K]) OnSettle(_ context.Context, e receiver.Settlement) {
	if e.Err != nil {
		return // reported as an error too
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	o.end(e.Message, "settled "+e.Action.String())
	o.settled[o.key(e.Message)] = e.Action
}

func (o *outcomes[K]) OnError(_ context.Context, err *receiver.Error) {
	final := errors.Is(err, receiver.ErrSettleFailed) || errors.Is(err, receiver.ErrLeftLocked) ||
		(err.Source == receiver.SourceRenew && sbkit.IsLockLost(err))
	if err.Message == nil || !final {
		return // not about a message, or not its end (a retried attempt, a handler error)
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	o.end(err.Message, err.Error())
	o.reported[o.key(err.Message)] = err
}

func (o *outcomes[K]) end(m *azservicebus.ReceivedMessage, what string) {
	if _, ok := o.settled[o.key(m)]; ok {
		o.twice = append(o.twice, fmt.Sprintf("%s: %s after a settlement", m.MessageID, what))
	}
	if _, ok := o.reported[o.key(m)]; ok {
		o.twice = append(o.twice, fmt.Sprintf("%s: %s after a report", m.MessageID, what))
	}
}

// check asserts that every received message ended once, as the hooks saw it.
func (o *outcomes[K]) check(t *testing.T, received int64) {
	t.Helper()
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, msg := range o.twice {
		t.Errorf("accounted twice: %s", msg)
	}
	if ended := int64(len(o.settled) + len(o.reported)); ended != received {
		t.Errorf("hooks saw %d ends (%d settled, %d reported) for %d received", ended, len(o.settled), len(o.reported), received)
	}
}

// injectChaos injects up to 7 random faults on ops into q: transient, permanent,
// lock-lost, hanging, or applied but failed. An op for which mild is true gets only
// hanging or transient faults.
func injectChaos(rng *rand.Rand, q *sbtest.Entity, ops []sbtest.Op, mild func(sbtest.Op) bool) {
	lockLost := &azservicebus.Error{Code: azservicebus.CodeLockLost}
	for range rng.IntN(8) {
		f := sbtest.Fault{Op: ops[rng.IntN(len(ops))], Count: 1 + rng.IntN(4)}
		kind := rng.IntN(5)
		if mild(f.Op) && kind != 2 && kind != 4 {
			kind = 2
		}
		switch kind {
		case 0:
			f.Err = sbtest.PermanentError
		case 1:
			f.Err = lockLost
		case 2:
			f.Hang = true
		case 3:
			f.After = true // applied, but the client sees an error
		}
		q.InjectFault(f)
	}
}

// chaosHandling returns what a chaos handler does with delivery m: how long it works
// (up to limit, one in ten twice lockDuration, to outlive its lock) and a random
// source for the rest, the same for every run of the seed.
func chaosHandling(seed uint64, m *azservicebus.ReceivedMessage, limit, lockDuration time.Duration) (time.Duration, *rand.Rand) {
	h := fnv.New64a()
	fmt.Fprintf(h, "%s/%d", m.MessageID, m.DeliveryCount)
	r := rand.New(rand.NewPCG(seed, h.Sum64()))
	d := time.Duration(r.IntN(int(limit/time.Millisecond))) * time.Millisecond
	if r.IntN(10) == 0 {
		d = 2 * lockDuration // outlives its lock: renewal (or its loss) is exercised
	}
	return d, r
}

// chaosResult is a random handler result: a panic, an error, a dead-letter, a defer, a
// skip, or success.
func chaosResult(r *rand.Rand) error {
	switch r.IntN(8) {
	case 0:
		panic("chaos")
	case 1:
		return errors.New("chaos")
	case 2:
		return sbkit.DeadLetter("Chaos", "", nil)
	case 3:
		return sbkit.Defer(nil)
	case 4:
		return sbkit.Skip("chaos")
	}
	return nil
}

func chaosRun(t *testing.T, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 13))
	lockDuration := time.Duration(5+rng.IntN(26)) * time.Second
	e := newEnv(t, &sbtest.EntityOptions{LockDuration: lockDuration, MaxDeliveryCount: 2 + rng.IntN(5)})
	e.send(t, 40+rng.IntN(80))

	ops := []sbtest.Op{sbtest.OpReceive, sbtest.OpComplete, sbtest.OpAbandon, sbtest.OpDeadLetter, sbtest.OpDefer, sbtest.OpRenew}
	// A permanent receive error ends Run at once (TestReceiveErrors covers it); one after
	// the broker locked the messages hides them from the processor.
	injectChaos(rng, e.q, ops, func(op sbtest.Op) bool { return op == sbtest.OpReceive })

	opts := &receiver.Options{
		MaxConcurrency:    1 + rng.IntN(8),
		SettleConcurrency: 1 + rng.IntN(4),
		SettleTimeout:     time.Duration(2+rng.IntN(20)) * time.Second,
	}
	switch rng.IntN(3) {
	case 0:
		opts.DisablePrefetch = true
	case 1:
		opts.PrefetchCount = 1 + rng.IntN(9)
	} // else the adaptive prefetch
	if rng.IntN(3) == 0 {
		opts.AbandonDelay = receiver.ExponentialAbandonDelay(time.Second, 20*time.Second)
	}
	if rng.IntN(5) == 0 {
		opts.DisableAutoLockRenewal = true
	}
	if brng := rand.New(rand.NewPCG(seed, 37)); brng.IntN(2) == 0 {
		// A circuit breaker that the chaos handler's errors open: receiving and handling
		// pause and resume amid the faults (its own source, so that the seeds' other
		// draws stay as they were).
		opts.Breaker = &receiver.BreakerOptions{IsDependencyDown: func(err error) bool { return err.Error() == "chaos" },
			FailureRatio: 0.1, MinimumCalls: 2 + brng.IntN(4), OpenDuration: time.Duration(1+brng.IntN(5)) * time.Second,
			Probes: 1 + brng.IntN(2), AbandonHeld: brng.IntN(3) == 0}
	}
	out := newOutcomes(func(m *azservicebus.ReceivedMessage) [16]byte { return m.LockToken })
	opts.Hooks = []receiver.Hook{out}

	handler := func(ctx context.Context, m *azservicebus.ReceivedMessage) error {
		d, r := chaosHandling(seed, m, lockDuration/2, lockDuration)
		switch r.IntN(50) {
		case 0:
			e.q.ExpireLock(m.LockToken) // the lock expires at the broker meanwhile
		case 1:
			e.r.DropConnection() // every lock of the receiver is lost
		}
		select {
		case <-time.After(d):
		case <-ctx.Done():
			return context.Cause(ctx)
		}
		return chaosResult(r)
	}
	p := newProcessor(t, e.r, handler, opts)
	wait := start(t, p, context.Background())
	time.Sleep(time.Duration(rng.IntN(90_000)) * time.Millisecond)

	grace := time.Duration(100+rng.IntN(3000)) * time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	begin := time.Now()
	closeErr := p.Close(ctx)
	if took := time.Since(begin); took > grace {
		t.Errorf("Close took %v with a %v deadline", took, grace)
	}
	if closeErr != nil && !errors.Is(closeErr, context.DeadlineExceeded) {
		t.Errorf("Close = %v", closeErr)
	}
	runErr := wait()
	if runErr != nil && !sbkit.IsPermanent(runErr) {
		t.Errorf("Run = %v", runErr)
	}

	s := p.Stats()
	t.Logf("grace %v, Close %v, Run %v; stats %+v", grace, closeErr, runErr, s)
	checkReconciled(t, s)
	out.check(t, s.Received)
	out.mu.Lock()
	defer out.mu.Unlock()
	for _, m := range e.q.Locked() {
		if _, ok := out.reported[m.LockToken]; !ok {
			t.Errorf("%s is still locked at the broker and was not reported", m.MessageID)
		}
	}
	synctest.Wait()
	if left := processorGoroutines(); left != "" {
		t.Errorf("goroutines left after Close:\n%s", left)
	}
}

// processorGoroutines returns the stacks of goroutines running receiver or locks code,
// or waiting for it (an idle settle or renewal goroutine).
func processorGoroutines() string {
	buf := make([]byte, 1<<20)
	var left []string
	for _, g := range strings.Split(string(buf[:runtime.Stack(buf, true)]), "\n\n") {
		if strings.Contains(g, "sbkit/receiver.") || strings.Contains(g, "sbkit/locks.") || strings.Contains(g, "sbkit/internal/workpool.") {
			left = append(left, g)
		}
	}
	return strings.Join(left, "\n\n")
}
