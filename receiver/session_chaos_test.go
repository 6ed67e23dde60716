package receiver_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/sbkit/sbkit"
	"github.com/sbkit/sbkit/receiver"
	"github.com/sbkit/sbkit/sbtest"
)

var sessionChaosSeeds = flag.Int("chaos.sessionseeds", 20, "number of seeds TestSessionProcessorChaos runs")

// TestSessionProcessorChaos runs the session processor against random faults
// (transient, permanent, lock-lost, hanging and applied-but-failed, on accept, receive,
// settlements and session lock renewal), random handler durations and results, session
// lock expiries, then closes it at a random moment with a short deadline. Whatever
// happened: each session's messages were handled in order (a message may be handled
// again, never one before it after a later one), Close returned by its deadline, every
// received message is accounted for exactly once in Stats and by the hooks, no session
// or message is left locked at the broker, and no goroutine is left. Each seed is
// deterministic in what it injects; a failure names its seed (rerun it with
// -run 'TestSessionProcessorChaos/seed=N').
func TestSessionProcessorChaos(t *testing.T) { runSeeds(t, *sessionChaosSeeds, sessionChaosRun) }

func sessionChaosRun(t *testing.T, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 17))
	lockDuration := time.Duration(5+rng.IntN(26)) * time.Second
	sq := newSessionQueue(t, &sbtest.EntityOptions{LockDuration: lockDuration, MaxDeliveryCount: 2 + rng.IntN(5)})
	sessions := 2 + rng.IntN(6)
	sent := 0
	for s := range sessions {
		id := fmt.Sprintf("s%d", s)
		for i := range 3 + rng.IntN(12) {
			sq.send(t, id, fmt.Sprintf("%s/%02d", id, i))
			sent++
		}
	}

	ops := []sbtest.Op{sbtest.OpAcceptSession, sbtest.OpReceive, sbtest.OpComplete, sbtest.OpAbandon,
		sbtest.OpDeadLetter, sbtest.OpDefer, sbtest.OpRenewSessionLock}
	// A receive whose reply is lost after the broker locked messages hides them from the
	// processor (the SDK releases such messages itself); a permanent accept error ends
	// Run (TestSessionProcessorAcceptErrors covers it), and an accept whose reply is lost
	// leaves a session locked by nobody.
	injectChaos(rng, sq.q, ops, func(op sbtest.Op) bool { return op == sbtest.OpReceive || op == sbtest.OpAcceptSession })

	opts := &receiver.SessionOptions{
		MaxConcurrentSessions: 1 + rng.IntN(4),
		SessionIdleTimeout:    time.Duration(100+rng.IntN(2000)) * time.Millisecond,
		Options: receiver.Options{
			SettleTimeout: time.Duration(2+rng.IntN(20)) * time.Second,
		},
	}
	if rng.IntN(3) == 0 {
		opts.MaxMessagesPerSession = 1 + rng.IntN(5)
	}
	if brng := rand.New(rand.NewPCG(seed, 37)); brng.IntN(2) == 0 {
		// A circuit breaker that the chaos handler's errors open: accepting and handling
		// pause and resume amid the faults (its own source, so that the seeds' other
		// draws stay as they were).
		opts.Breaker = &receiver.BreakerOptions{IsDependencyDown: func(err error) bool { return err.Error() == "chaos" },
			FailureRatio: 0.1, MinimumCalls: 2 + brng.IntN(4), OpenDuration: time.Duration(1+brng.IntN(5)) * time.Second, Probes: 1 + brng.IntN(2)}
	}
	ends := newOutcomes(func(m *azservicebus.ReceivedMessage) *azservicebus.ReceivedMessage { return m })
	opts.Hooks = []receiver.Hook{ends}

	var mu sync.Mutex
	handled := map[string][]string{} // session -> message ids, in the order their handlers started
	var outOfOrder []string
	handler := func(ctx context.Context, m *azservicebus.ReceivedMessage) error {
		session := sessionID(ctx)
		mu.Lock()
		seen := handled[session]
		if last := len(seen) - 1; last >= 0 && m.MessageID < seen[last] {
			outOfOrder = append(outOfOrder, fmt.Sprintf("session %s: %s#%d after %v", session, m.MessageID, m.DeliveryCount, seen))
		}
		handled[session] = append(seen, m.MessageID)
		mu.Unlock()

		d, r := chaosHandling(seed, m, lockDuration/4, lockDuration)
		if r.IntN(40) == 0 {
			sq.q.ExpireSessionLock(session) // the broker lets the session go meanwhile
		}
		select {
		case <-time.After(d):
		case <-ctx.Done():
			return context.Cause(ctx)
		}
		return chaosResult(r)
	}
	p, err := receiver.NewSessionProcessor(sq.ns.QueueSessionAcceptor("q", nil), handler, opts)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- p.Run(context.Background()) }()
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
	runErr := <-done
	if runErr != nil && !sbkit.IsPermanent(runErr) {
		t.Errorf("Run = %v", runErr)
	}

	s := p.Stats()
	t.Logf("%d sessions, %d messages; grace %v, Close %v, Run %v; stats %+v", sessions, sent, grace, closeErr, runErr, s)
	checkReconciled(t, s.Stats)
	if s.Sessions != 0 || s.SessionsAccepted != s.SessionsReleased {
		t.Errorf("sessions held %d, accepted %d, released %d", s.Sessions, s.SessionsAccepted, s.SessionsReleased)
	}
	mu.Lock()
	for _, msg := range outOfOrder {
		t.Errorf("out of order: %s", msg)
	}
	mu.Unlock()
	ends.check(t, s.Received)
	if n := sq.q.Counts().Locked; n != 0 {
		t.Errorf("%d messages still locked at the broker", n)
	}
	for _, info := range sq.q.Sessions() {
		if info.Locked {
			t.Errorf("session %s still locked at the broker", info.ID)
		}
	}
	synctest.Wait()
	if left := processorGoroutines(); left != "" {
		t.Errorf("goroutines left after Close:\n%s", left)
	}
}
