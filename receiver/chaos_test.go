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
func TestProcessorChaos(t *testing.T) {
	for seed := range uint64(*chaosSeeds) {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) { chaosRun(t, seed) })
		})
	}
}

// outcomes is a hook that records, per delivery (lock token), how it ended.
type outcomes struct {
	mu       sync.Mutex
	settled  map[[16]byte]sbkit.Action // settlements the broker accepted
	reported map[[16]byte]error        // lock-lost and left-locked reports
	twice    []string
}

func (o *outcomes) OnSettle(_ context.Context, e receiver.Settlement) {
	if e.Err != nil {
		return // reported as an error too
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	o.end(e.Message, "settled "+e.Action.String())
	o.settled[e.Message.LockToken] = e.Action
}

func (o *outcomes) OnError(_ context.Context, err *receiver.Error) {
	final := errors.Is(err, receiver.ErrSettleFailed) || errors.Is(err, receiver.ErrLeftLocked) ||
		(err.Source == receiver.SourceRenew && sbkit.IsLockLost(err))
	if err.Message == nil || !final {
		return // not about a message, or not its end (a retried attempt, a handler error)
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	o.end(err.Message, err.Error())
	o.reported[err.Message.LockToken] = err
}

func (o *outcomes) end(m *azservicebus.ReceivedMessage, what string) {
	if _, ok := o.settled[m.LockToken]; ok {
		o.twice = append(o.twice, fmt.Sprintf("%s: %s after a settlement", m.MessageID, what))
	}
	if _, ok := o.reported[m.LockToken]; ok {
		o.twice = append(o.twice, fmt.Sprintf("%s: %s after a report", m.MessageID, what))
	}
}

func chaosRun(t *testing.T, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 13))
	lockDuration := time.Duration(5+rng.IntN(26)) * time.Second
	e := newEnv(t, &sbtest.EntityOptions{LockDuration: lockDuration, MaxDeliveryCount: 2 + rng.IntN(5)})
	e.send(t, 40+rng.IntN(80))

	lockLost := &azservicebus.Error{Code: azservicebus.CodeLockLost}
	ops := []sbtest.Op{sbtest.OpReceive, sbtest.OpComplete, sbtest.OpAbandon, sbtest.OpDeadLetter, sbtest.OpDefer, sbtest.OpRenew}
	for range rng.IntN(8) {
		f := sbtest.Fault{Op: ops[rng.IntN(len(ops))], Count: 1 + rng.IntN(4)}
		kind := rng.IntN(5)
		if f.Op == sbtest.OpReceive && kind != 2 && kind != 4 {
			// A permanent receive error ends Run at once (TestReceiveErrors covers it); one
			// after the broker locked the messages hides them from the processor.
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
		e.q.InjectFault(f)
	}

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
	out := &outcomes{settled: map[[16]byte]sbkit.Action{}, reported: map[[16]byte]error{}}
	opts.Hooks = []receiver.Hook{out}

	handler := func(ctx context.Context, m *azservicebus.ReceivedMessage) error {
		h := fnv.New64a()
		fmt.Fprintf(h, "%s/%d", m.MessageID, m.DeliveryCount)
		r := rand.New(rand.NewPCG(seed, h.Sum64()))
		d := time.Duration(r.IntN(int(lockDuration/time.Millisecond)/2)) * time.Millisecond
		if r.IntN(10) == 0 {
			d = 2 * lockDuration // outlives its lock: renewal (or its loss) is exercised
		}
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
	out.mu.Lock()
	defer out.mu.Unlock()
	for _, msg := range out.twice {
		t.Errorf("accounted twice: %s", msg)
	}
	if ended := int64(len(out.settled) + len(out.reported)); ended != s.Received {
		t.Errorf("hooks saw %d ends (%d settled, %d reported) for %d received; stats %+v",
			ended, len(out.settled), len(out.reported), s.Received, s)
	}
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

// processorGoroutines returns the stacks of goroutines running receiver or locks code.
func processorGoroutines() string {
	buf := make([]byte, 1<<20)
	var left []string
	for _, g := range strings.Split(string(buf[:runtime.Stack(buf, true)]), "\n\n") {
		if strings.Contains(g, "sbkit/receiver.") || strings.Contains(g, "sbkit/locks.") {
			left = append(left, g)
		}
	}
	return strings.Join(left, "\n\n")
}
