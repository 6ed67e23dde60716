package receiver_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/sbkit/sbkit"
	"github.com/sbkit/sbkit/receiver"
	"github.com/sbkit/sbkit/sbtest"
)

// TestRedeliveryChaos runs delayed redelivery and the circuit breaker against random
// transient and lock-lost faults on schedule, complete, receive and renew, with
// messages that fail a random number of times (a few always). Whatever happened: every
// message's work is done, or it is dead-lettered by the policy (and only the ones that
// always fail are); no message is lost, none dead-lettered by the broker, and the
// processor's counts reconcile. A failure names its seed.
func TestRedeliveryChaos(t *testing.T) { runSeeds(t, *chaosSeeds, redeliveryChaosRun) }

func redeliveryChaosRun(t *testing.T, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 37))
	opts := &sbtest.EntityOptions{LockDuration: time.Duration(10+rng.IntN(21)) * time.Second, MaxDeliveryCount: 10}
	if rng.IntN(2) == 0 {
		opts.DuplicateDetectionWindow = time.Hour
	}
	e := newEnv(t, opts)
	n := 20 + rng.IntN(30)
	failures := map[string]int{} // by original MessageID: failed calls before success; -1 always
	for i := range n {
		id := fmt.Sprintf("m%d", i)
		failures[id] = rng.IntN(4)
		if rng.IntN(10) == 0 {
			failures[id] = -1
		}
		if err := e.s.SendMessage(context.Background(), &azservicebus.Message{MessageID: &id, Body: []byte(id)}, nil); err != nil {
			t.Fatal(err)
		}
	}
	lockLost := &azservicebus.Error{Code: azservicebus.CodeLockLost}
	for range 1 + rng.IntN(6) {
		f := sbtest.Fault{Op: []sbtest.Op{sbtest.OpSend, sbtest.OpComplete, sbtest.OpReceive, sbtest.OpRenew}[rng.IntN(4)], Count: 1 + rng.IntN(3)}
		switch rng.IntN(3) {
		case 1:
			if f.Op == sbtest.OpComplete || f.Op == sbtest.OpRenew {
				f.Err = lockLost // the message comes back: a second copy, or a second success
			}
		case 2:
			if f.Op != sbtest.OpReceive {
				f.After = true // applied, but the client sees an error
			}
		}
		e.q.InjectFault(f)
	}

	var mu sync.Mutex
	calls, done := map[string]int{}, map[string]bool{}
	h := func(ctx context.Context, m *azservicebus.ReceivedMessage) error {
		id := sbkit.OriginalMessageID(m)
		mu.Lock()
		defer mu.Unlock()
		calls[id]++
		if f := failures[id]; f < 0 || calls[id] <= f {
			return errDown
		}
		done[id] = true
		return nil
	}
	factor := time.Duration(1 + rng.IntN(3))
	o := &receiver.Options{MaxConcurrency: 1 + rng.IntN(4), SettleTimeout: 10 * time.Second,
		Redelivery: &receiver.RedeliveryOptions{Scheduler: e.s, ImmediateAttempts: 1 + rng.IntN(2), MaxRedeliveries: 4,
			Delay: func(a int) time.Duration { return time.Duration(a) * time.Second * factor }}}
	if rng.IntN(2) == 0 {
		o.Breaker = &receiver.BreakerOptions{IsDependencyDown: isDown, MinimumCalls: 5, OpenDuration: 2 * time.Second, Probes: 1 + rng.IntN(2)}
	}
	p := newProcessor(t, e.r, h, o)
	wait := start(t, p, context.Background())
	deadline := time.Now().Add(2 * time.Hour)
	for {
		time.Sleep(time.Second)
		c := e.q.Counts()
		mu.Lock()
		settled := len(done)
		mu.Unlock()
		if drained(c) && settled+c.DeadLetter >= n {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not drained: counts %+v, %d done of %d, stats %+v", c, settled, n, p.Stats())
		}
	}
	if err := p.Close(context.Background()); err != nil {
		t.Errorf("Close = %v", err)
	}
	if err := wait(); err != nil {
		t.Errorf("Run = %v", err)
	}
	dead := map[string]bool{}
	for _, m := range e.q.DeadLetters() {
		id := sbkit.OriginalMessageID(m)
		if *m.DeadLetterReason != receiver.ExhaustedReason {
			t.Errorf("%s dead-lettered with %q, not by the policy", id, *m.DeadLetterReason)
		}
		if failures[id] >= 0 {
			t.Errorf("%s dead-lettered, though it succeeds after %d failures", id, failures[id])
		}
		dead[id] = true
	}
	for id, f := range failures {
		if f < 0 && !dead[id] {
			t.Errorf("%s always fails and is not dead-lettered", id)
		}
		if f >= 0 && !done[id] {
			t.Errorf("%s lost: its work was never done", id)
		}
	}
	checkReconciled(t, p.Stats())
}
