package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/sbkit/sbkit"
	"github.com/sbkit/sbkit/receiver"
	"github.com/sbkit/sbkit/sbtest"
)

// The modes compared, in the order they are printed.
var modes = []string{"abandon", "abandon-delay", "redelivery", "redelivery+breaker"}

// config is one comparison: n messages, a downstream failing every call for outage,
// every duration multiplied by scale (the program's -scale; 1 under synctest).
type config struct {
	n           int
	outage      time.Duration
	callTime    time.Duration // how long one downstream call takes
	concurrency int
	scale       float64
	latency     sbtest.Latency
	limit       time.Duration // give up after this long (scenario time)
	wire        bool          // the real azservicebus client on sbtest.NewServer
}

// result is what one mode cost.
type result struct {
	mode              string
	deadLettered      int           // messages in the dead-letter queue at the end
	deliveries        int64         // deliveries the broker made (its Stats.Received)
	calls             int64         // handler calls
	callsDuringOutage int64         // handler calls while the downstream was down
	drain             time.Duration // from the downstream's recovery to an empty queue (scenario time)
	completed         int64         // messages whose work was done
	scheduled         int64         // copies scheduled
	breakerOpened     int64
}

var errDown = errors.New("downstream unavailable")

// downstream fails every call until its recovery time.
type downstream struct {
	recover  time.Time
	callTime time.Duration
	calls    atomic.Int64
	during   atomic.Int64
	mu       sync.Mutex
	done     map[string]bool
}

func (d *downstream) handle(ctx context.Context, m *azservicebus.ReceivedMessage) error {
	d.calls.Add(1)
	select {
	case <-time.After(d.callTime):
	case <-ctx.Done():
		return context.Cause(ctx)
	}
	if time.Now().Before(d.recover) {
		d.during.Add(1)
		return errDown
	}
	d.mu.Lock()
	d.done[sbkit.OriginalMessageID(m)] = true
	d.mu.Unlock()
	return nil
}

// scaled multiplies d by the configuration's scale.
func (c config) scaled(d time.Duration) time.Duration { return time.Duration(float64(d) * c.scale) }

// runMode fills a fresh in-memory queue (MaxDeliveryCount 10, lock 30 s) with c.n
// messages and processes it in mode until the queue is empty (everything completed or
// dead-lettered) or c.limit passes.
func runMode(ctx context.Context, mode string, c config) (result, error) {
	ns := sbtest.NewNamespace(&sbtest.NamespaceOptions{Latency: c.latency})
	q, err := ns.NewQueue("orders", &sbtest.EntityOptions{MaxDeliveryCount: 10, LockDuration: c.scaled(30 * time.Second),
		DuplicateDetectionWindow: c.scaled(10 * time.Minute)})
	if err != nil {
		return result{}, err
	}
	snd, err := ns.NewSender("orders", nil)
	if err != nil {
		return result{}, err
	}
	defer snd.Close(context.Background())
	for i := 0; i < c.n; {
		b, err := snd.NewBatch(ctx, nil)
		if err != nil {
			return result{}, err
		}
		for ; i < c.n; i++ {
			id := fmt.Sprintf("order-%d", i)
			if err := b.AddMessage(&azservicebus.Message{MessageID: &id, Body: []byte(id)}, nil); err != nil {
				break
			}
		}
		if err := snd.SendBatch(ctx, b, nil); err != nil {
			return result{}, err
		}
	}
	var rcv sbkit.LockingReceiver
	var sched sbkit.MessageScheduler = snd
	if c.wire {
		srv, err := sbtest.NewServer(&sbtest.ServerOptions{Namespace: ns})
		if err != nil {
			return result{}, err
		}
		defer srv.Close(context.Background())
		client, err := azservicebus.NewClientFromConnectionString(srv.ConnectionString(), nil)
		if err != nil {
			return result{}, err
		}
		defer client.Close(context.Background())
		sdkSender, err := client.NewSender("orders", nil)
		if err != nil {
			return result{}, err
		}
		sdkReceiver, err := client.NewReceiverForQueue("orders", nil)
		if err != nil {
			return result{}, err
		}
		rcv, sched = sdkReceiver, sdkSender
	} else {
		r, err := ns.NewReceiverForQueue("orders", nil)
		if err != nil {
			return result{}, err
		}
		defer r.Close(context.Background())
		rcv = r
	}

	start := time.Now()
	down := &downstream{recover: start.Add(c.scaled(c.outage)), callTime: c.scaled(c.callTime), done: map[string]bool{}}
	o := &receiver.Options{MaxConcurrency: c.concurrency}
	redelivery := &receiver.RedeliveryOptions{Scheduler: sched, MaxRedeliveries: 5,
		// 5 s, 10 s, 20 s, 40 s, 60 s: 135 s in all, well past a 30 s outage.
		Delay: func(attempt int) time.Duration {
			return c.scaled(min(5*time.Second<<(attempt-1), time.Minute))
		}}
	switch mode {
	case "abandon":
	case "abandon-delay":
		o.AbandonDelay = receiver.ExponentialAbandonDelay(c.scaled(time.Second), c.scaled(30*time.Second))
	case "redelivery":
		o.Redelivery = redelivery
	case "redelivery+breaker":
		o.Redelivery = redelivery
		o.Breaker = &receiver.BreakerOptions{IsDependencyDown: func(err error) bool { return errors.Is(err, errDown) },
			MinimumCalls: 10, Window: c.scaled(10 * time.Second), OpenDuration: c.scaled(5 * time.Second), MaxOpenDuration: c.scaled(20 * time.Second)}
	default:
		return result{}, fmt.Errorf("unknown mode %q", mode)
	}
	p, err := receiver.New(rcv, down.handle, o)
	if err != nil {
		return result{}, err
	}
	runDone := make(chan error, 1)
	go func() { runDone <- p.Run(context.Background()) }()

	limitCtx, cancel := context.WithTimeout(ctx, c.scaled(c.limit))
	defer cancel()
	_, waitErr := q.WaitUntil(limitCtx, func(cs sbtest.Counts) bool {
		return cs.Active == 0 && cs.Locked == 0 && cs.Scheduled == 0
	})
	end := time.Now()
	closeCtx, cancelClose := context.WithTimeout(context.Background(), c.scaled(10*time.Second))
	defer cancelClose()
	_ = p.Close(closeCtx)
	if err := <-runDone; err != nil {
		return result{}, err
	}
	if waitErr != nil {
		return result{}, fmt.Errorf("%s: queue not drained after %v: %+v", mode, c.limit, q.Counts())
	}
	s := p.Stats()
	down.mu.Lock()
	completed := int64(len(down.done))
	down.mu.Unlock()
	r := result{
		mode:              mode,
		deadLettered:      q.Counts().DeadLetter,
		deliveries:        q.Stats().Received,
		calls:             down.calls.Load(),
		callsDuringOutage: down.during.Load(),
		completed:         completed,
		scheduled:         s.Scheduled,
		breakerOpened:     s.BreakerOpened,
	}
	if recovered := down.recover; end.After(recovered) {
		r.drain = time.Duration(float64(end.Sub(recovered)) / c.scale)
	}
	return r, nil
}
