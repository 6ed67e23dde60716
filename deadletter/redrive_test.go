package deadletter_test

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"testing"
	"testing/synctest"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/sbkit/sbkit"
	"github.com/sbkit/sbkit/deadletter"
	"github.com/sbkit/sbkit/sbtest"
)

func reconciles(t *testing.T, st deadletter.Stats) {
	t.Helper()
	if st.Moved+st.Skipped+st.Failed != st.Seen {
		t.Fatalf("counts do not reconcile: moved %d + skipped %d + failed %d != seen %d", st.Moved, st.Skipped, st.Failed, st.Seen)
	}
}

// drain receives everything from the main queue of e (peek-lock, completing), keyed by MessageID.
func drainQueue(t *testing.T, ns *sbtest.Namespace, e *sbtest.Entity) map[string][]*azservicebus.ReceivedMessage {
	t.Helper()
	ctx := context.Background()
	out := map[string][]*azservicebus.ReceivedMessage{}
	take := func(r interface {
		ReceiveMessages(context.Context, int, *azservicebus.ReceiveMessagesOptions) ([]*azservicebus.ReceivedMessage, error)
		CompleteMessage(context.Context, *azservicebus.ReceivedMessage, *azservicebus.CompleteMessageOptions) error
	}) {
		for {
			rctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
			got, _ := r.ReceiveMessages(rctx, 100, nil)
			cancel()
			if len(got) == 0 {
				return
			}
			for _, m := range got {
				out[m.MessageID] = append(out[m.MessageID], m)
				if err := r.CompleteMessage(ctx, m, nil); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	var topic string
	if tp := e.Topic(); tp != nil {
		topic = tp.Name()
	}
	if e.Options().RequiresSession {
		for _, s := range e.Sessions() {
			var sr *sbtest.SessionReceiver
			var err error
			if topic != "" {
				sr, err = ns.AcceptSessionForSubscription(ctx, topic, subName(e), s.ID, nil)
			} else {
				sr, err = ns.AcceptSessionForQueue(ctx, e.Name(), s.ID, nil)
			}
			if err != nil {
				t.Fatal(err)
			}
			take(sr)
			_ = sr.Close(ctx)
		}
		return out
	}
	var r *sbtest.Receiver
	var err error
	if topic != "" {
		r, err = ns.NewReceiverForSubscription(topic, subName(e), nil)
	} else {
		r, err = ns.NewReceiverForQueue(e.Name(), nil)
	}
	if err != nil {
		t.Fatal(err)
	}
	take(r)
	_ = r.Close(ctx)
	return out
}

func TestRedriveQueueKeepsFields(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ns := sbtest.NewTestNamespace(t, &sbtest.NamespaceOptions{Queues: map[string]*sbtest.EntityOptions{"q": nil}})
		q, _ := ns.Entity("q")
		msgs := messages(300, nil)
		msgs[7].TimeToLive = new(time.Hour)
		msgs[8].PartitionKey = new("pk")
		deadLetterAll(t, ns, "q", q, msgs, func(i int) string { return "Bad" })
		src := dlqReceiver(t, ns, q, azservicebus.ReceiveModePeekLock)
		dst, _ := ns.NewSender("q", nil)
		var progress int
		st, err := deadletter.Redrive(t.Context(), src, dst, &deadletter.RedriveOptions{
			IdleTimeout: time.Second,
			Hooks:       []deadletter.Hook{deadletter.ProgressHookFunc(func(context.Context, deadletter.Stats) { progress++ })},
		})
		if err != nil {
			t.Fatal(err)
		}
		reconciles(t, st)
		if st.Moved != 300 || st.Seen != 300 || st.Stopped != deadletter.StopDrained || progress < 2 {
			t.Fatalf("stats %+v, progress calls %d", st, progress)
		}
		if c := q.Counts(); c.DeadLetter != 0 || c.Active != 300 {
			t.Fatalf("counts after re-drive: %+v", c)
		}
		got := drainQueue(t, ns, q)
		for i, want := range msgs {
			ms := got[*want.MessageID]
			if len(ms) != 1 {
				t.Fatalf("message %d arrived %d times", i, len(ms))
			}
			m := ms[0]
			if string(m.Body) != string(want.Body) || *m.ContentType != "text/plain" || *m.CorrelationID != *want.CorrelationID ||
				*m.Subject != "subject" || *m.To != "to" || *m.ReplyTo != "reply" {
				t.Fatalf("message %d lost a field: %+v", i, m)
			}
			if m.DeadLetterReason != nil || m.DeadLetterErrorDescription != nil {
				t.Fatalf("message %d keeps its dead-letter reason", i)
			}
			if _, ok := m.ApplicationProperties["DeadLetterReason"]; ok {
				t.Fatalf("message %d keeps DeadLetterReason in its properties", i)
			}
			if m.ApplicationProperties["i"] != int64(i) || m.ApplicationProperties[deadletter.RedriveCountProperty] != int64(1) {
				t.Fatalf("message %d properties %v", i, m.ApplicationProperties)
			}
		}
		if m := got["m0007"][0]; m.TimeToLive == nil || *m.TimeToLive != time.Hour {
			t.Fatalf("TTL not kept: %v", m.TimeToLive)
		}
		if m := got["m0008"][0]; m.PartitionKey == nil || *m.PartitionKey != "pk" {
			t.Fatalf("PartitionKey not kept")
		}
	})
}

func TestRedriveCountRises(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ns := sbtest.NewTestNamespace(t, &sbtest.NamespaceOptions{Queues: map[string]*sbtest.EntityOptions{"q": nil}})
		q, _ := ns.Entity("q")
		msgs := messages(1, nil)
		msgs[0].ApplicationProperties[deadletter.RedriveCountProperty] = int64(2)
		deadLetterAll(t, ns, "q", q, msgs, func(int) string { return "x" })
		dst, _ := ns.NewSender("q", nil)
		if _, err := deadletter.Redrive(t.Context(), dlqReceiver(t, ns, q, azservicebus.ReceiveModePeekLock), dst, &deadletter.RedriveOptions{IdleTimeout: time.Second}); err != nil {
			t.Fatal(err)
		}
		if got := drainQueue(t, ns, q)["m0000"][0].ApplicationProperties[deadletter.RedriveCountProperty]; got != int64(3) {
			t.Fatalf("re-drive count %v, want 3", got)
		}
	})
}

func TestRedriveFilterLeavesTheRest(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ns := sbtest.NewTestNamespace(t, &sbtest.NamespaceOptions{Queues: map[string]*sbtest.EntityOptions{"q": nil}})
		q, _ := ns.Entity("q")
		// 600 messages, a third of them with reason A, interleaved: more skipped messages
		// than one page, so the re-drive must hold them to reach the ones behind.
		deadLetterAll(t, ns, "q", q, messages(600, nil), func(i int) string { return map[bool]string{true: "A", false: "B"}[i%3 == 0] })
		src := dlqReceiver(t, ns, q, azservicebus.ReceiveModePeekLock)
		dst, _ := ns.NewSender("q", nil)
		st, err := deadletter.Redrive(t.Context(), src, dst, &deadletter.RedriveOptions{IdleTimeout: time.Second, PageSize: 50, Filter: &deadletter.Filter{Reasons: []string{"A"}}})
		if err != nil {
			t.Fatal(err)
		}
		reconciles(t, st)
		if st.Moved != 200 || st.Skipped != 400 || st.Seen != 600 {
			t.Fatalf("stats %+v", st)
		}
		c := q.Counts()
		if c.DeadLetter != 400 || c.Active != 200 {
			t.Fatalf("counts %+v", c)
		}
		// The skipped messages are abandoned at the end, not left locked until they expire.
		r := dlqReceiver(t, ns, q, azservicebus.ReceiveModePeekLock)
		rctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
		defer cancel()
		if got, _ := r.ReceiveMessages(rctx, 500, nil); len(got) != 400 {
			t.Fatalf("%d of the 400 skipped dead letters are available at once", len(got))
		}
	})
}

func TestRedriveMaxMessagesAndRate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ns := sbtest.NewTestNamespace(t, &sbtest.NamespaceOptions{Queues: map[string]*sbtest.EntityOptions{"q": nil}})
		q, _ := ns.Entity("q")
		deadLetterAll(t, ns, "q", q, messages(100, nil), func(int) string { return "x" })
		dst, _ := ns.NewSender("q", nil)
		start := time.Now()
		st, err := deadletter.Redrive(t.Context(), dlqReceiver(t, ns, q, azservicebus.ReceiveModePeekLock), dst, &deadletter.RedriveOptions{IdleTimeout: time.Second, MaxMessages: 40, Rate: 10})
		if err != nil {
			t.Fatal(err)
		}
		reconciles(t, st)
		if st.Moved != 40 || st.Stopped != deadletter.StopMaxMessages {
			t.Fatalf("stats %+v", st)
		}
		// 40 sends at 10 per second: the last one goes 3.9s after the first.
		if d := time.Since(start); d < 3900*time.Millisecond || d > 5*time.Second {
			t.Fatalf("40 messages at 10/s took %v", d)
		}
		if c := q.Counts(); c.DeadLetter != 60 || c.Active != 40 {
			t.Fatalf("counts %+v", c)
		}
	})
}

func TestRedriveDryRunChangesNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ns := sbtest.NewTestNamespace(t, &sbtest.NamespaceOptions{Queues: map[string]*sbtest.EntityOptions{"q": nil}})
		q, _ := ns.Entity("q")
		deadLetterAll(t, ns, "q", q, messages(30, nil), func(i int) string { return fmt.Sprint(i % 2) })
		dst, _ := ns.NewSender("q", nil)
		st, err := deadletter.Redrive(t.Context(), dlqReceiver(t, ns, q, azservicebus.ReceiveModePeekLock), dst, &deadletter.RedriveOptions{DryRun: true, Filter: &deadletter.Filter{Reasons: []string{"1"}}})
		if err != nil {
			t.Fatal(err)
		}
		reconciles(t, st)
		if st.Moved != 15 || st.Skipped != 15 {
			t.Fatalf("stats %+v", st)
		}
		if c := q.Counts(); c.DeadLetter != 30 || c.Active != 0 {
			t.Fatalf("a dry run changed the queue: %+v", c)
		}
		for _, m := range q.DeadLetters() {
			if m.DeliveryCount != 1 {
				t.Fatalf("a dry run raised DeliveryCount to %d", m.DeliveryCount)
			}
		}
	})
}

func TestRedrivePermanentFailureStopsAndLosesNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ns := sbtest.NewTestNamespace(t, &sbtest.NamespaceOptions{Queues: map[string]*sbtest.EntityOptions{"q": nil, "dst": nil}})
		q, _ := ns.Entity("q")
		dq, _ := ns.Entity("dst")
		deadLetterAll(t, ns, "q", q, messages(500, nil), func(int) string { return "x" })
		dst, _ := ns.NewSender("dst", nil)
		src := dlqReceiver(t, ns, q, azservicebus.ReceiveModePeekLock)
		ns.SetLatency(sbtest.Latency{RoundTrip: 7 * time.Millisecond})
		// Sends to dst fail for good once 150 messages were received.
		boom := &azservicebus.Error{Code: azservicebus.CodeUnauthorizedAccess}
		var st deadletter.Stats
		var err error
		done := make(chan struct{})
		go func() {
			defer close(done)
			st, err = deadletter.Redrive(t.Context(), src, dst, &deadletter.RedriveOptions{IdleTimeout: time.Second, PageSize: 50, StopOnPermanentFailure: true,
				Hooks: []deadletter.Hook{deadletter.ProgressHookFunc(func(_ context.Context, s deadletter.Stats) {
					if s.Seen >= 150 {
						dq.InjectFault(sbtest.Fault{Err: boom})
					}
				})}})
		}()
		<-done
		if !errors.Is(err, deadletter.ErrPermanentFailure) || !errors.As(err, new(*azservicebus.Error)) {
			t.Fatalf("err %v, want ErrPermanentFailure wrapping the cause; %+v", err, st)
		}
		reconciles(t, st)
		if st.Failed == 0 || st.Moved == 0 || st.Stopped != deadletter.StopPermanentFailure || st.Seen >= 500 {
			t.Fatalf("stats %+v", st)
		}
		c, dc := q.Counts(), dq.Counts()
		if int64(dc.Active) != st.Moved || dc.Active+c.DeadLetter != 500 {
			t.Fatalf("moved %d, destination %+v, dead letters %+v: messages lost or doubled", st.Moved, dc, c)
		}
		// The failed messages are abandoned at the end.
		rctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
		defer cancel()
		if got, _ := dlqReceiver(t, ns, q, azservicebus.ReceiveModePeekLock).ReceiveMessages(rctx, 1000, nil); len(got) != c.DeadLetter {
			t.Fatalf("%d of %d dead letters available at once", len(got), c.DeadLetter)
		}
	})
}

func TestRedriveTransientFailuresAreRetried(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ns := sbtest.NewTestNamespace(t, &sbtest.NamespaceOptions{Queues: map[string]*sbtest.EntityOptions{"q": nil, "dst": nil}})
		q, _ := ns.Entity("q")
		dq, _ := ns.Entity("dst")
		deadLetterAll(t, ns, "q", q, messages(200, nil), func(int) string { return "x" })
		dq.InjectFault(sbtest.Fault{Count: 3}) // three sends fail with a transient error
		dst, _ := ns.NewSender("dst", nil)
		st, err := deadletter.Redrive(t.Context(), dlqReceiver(t, ns, q, azservicebus.ReceiveModePeekLock), dst, &deadletter.RedriveOptions{IdleTimeout: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		reconciles(t, st)
		if st.Moved != 200 || st.Failed != 0 {
			t.Fatalf("stats %+v", st)
		}
		if dq.Counts().Active != 200 || q.Counts().DeadLetter != 0 {
			t.Fatalf("destination %+v, source %+v", dq.Counts(), q.Counts())
		}
	})
}

func TestRedriveFailuresWithoutStopLeaveMessages(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ns := sbtest.NewTestNamespace(t, &sbtest.NamespaceOptions{Queues: map[string]*sbtest.EntityOptions{"q": nil, "dst": nil}})
		q, _ := ns.Entity("q")
		dq, _ := ns.Entity("dst")
		deadLetterAll(t, ns, "q", q, messages(100, nil), func(int) string { return "x" })
		dq.InjectFault(sbtest.Fault{Count: 2, Err: &azservicebus.Error{Code: azservicebus.CodeUnauthorizedAccess}})
		dst, _ := ns.NewSender("dst", nil)
		st, err := deadletter.Redrive(t.Context(), dlqReceiver(t, ns, q, azservicebus.ReceiveModePeekLock), dst,
			&deadletter.RedriveOptions{IdleTimeout: time.Second, Sender: nil})
		if err != nil {
			t.Fatal(err)
		}
		reconciles(t, st)
		if st.Failed == 0 || st.Moved+st.Failed != 100 || len(st.Errors) == 0 {
			t.Fatalf("stats %+v", st)
		}
		if int64(dq.Counts().Active) != st.Moved || int64(q.Counts().DeadLetter) != st.Failed {
			t.Fatalf("destination %+v, source %+v, stats %+v", dq.Counts(), q.Counts(), st)
		}
	})
}

// A complete that fails and loses the lock (the broker makes the message available at
// once) brings the dead letter back during the re-drive, which completes it without a
// second copy: no duplicate even without duplicate detection.
func TestRedriveCompleteLockLostIsCompletedWithoutSecondCopy(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ns := sbtest.NewTestNamespace(t, &sbtest.NamespaceOptions{Queues: map[string]*sbtest.EntityOptions{"q": nil, "dst": nil}})
		q, _ := ns.Entity("q")
		dq, _ := ns.Entity("dst")
		deadLetterAll(t, ns, "q", q, messages(100, nil), func(int) string { return "x" })
		q.InjectFault(sbtest.Fault{Op: sbtest.OpComplete, Count: 5, Err: &azservicebus.Error{Code: azservicebus.CodeLockLost}})
		dst, _ := ns.NewSender("dst", nil)
		st, err := deadletter.Redrive(t.Context(), dlqReceiver(t, ns, q, azservicebus.ReceiveModePeekLock), dst, &deadletter.RedriveOptions{IdleTimeout: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		reconciles(t, st)
		if st.Moved != 100 || st.CompleteFailed == 0 {
			t.Fatalf("stats %+v", st)
		}
		if c, dc := q.Counts(), dq.Counts(); c.DeadLetter != 0 || dc.Active != 100 {
			t.Fatalf("source %+v, destination %+v", c, dc)
		}
	})
}

// Completes that keep failing until the re-drive ended leave the dead letters beside
// their copies (CompleteFailed). A second re-drive after their locks expired sends them
// again: the destination's duplicate detection drops the second copies (the copy keeps
// the MessageID); without it they arrive twice.
func TestRedriveCompleteFailsAfterSend(t *testing.T) {
	for _, dedupe := range []bool{false, true} {
		t.Run(fmt.Sprintf("dedupe=%v", dedupe), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				o := &sbtest.EntityOptions{}
				if dedupe {
					o.DuplicateDetectionWindow = time.Hour
				}
				ns := sbtest.NewTestNamespace(t, &sbtest.NamespaceOptions{Queues: map[string]*sbtest.EntityOptions{"q": nil, "dst": o}})
				q, _ := ns.Entity("q")
				dq, _ := ns.Entity("dst")
				deadLetterAll(t, ns, "q", q, messages(100, nil), func(int) string { return "x" })
				dst, _ := ns.NewSender("dst", nil)
				// Every complete fails without reaching the broker once 95 went.
				var once bool
				st, err := deadletter.Redrive(t.Context(), dlqReceiver(t, ns, q, azservicebus.ReceiveModePeekLock), dst, &deadletter.RedriveOptions{IdleTimeout: time.Second, PageSize: 95,
					Hooks: []deadletter.Hook{deadletter.ProgressHookFunc(func(_ context.Context, s deadletter.Stats) {
						if !once {
							once = true
							// The first page's copies are in flight; let them settle first.
							for q.Counts().DeadLetter > 5 {
								time.Sleep(time.Millisecond)
							}
							q.InjectFault(sbtest.Fault{Op: sbtest.OpComplete, Err: sbtest.TransientError})
						}
					})}})
				if err != nil {
					t.Fatal(err)
				}
				reconciles(t, st)
				if st.Moved != 100 || st.CompleteFailed != 5 {
					t.Fatalf("stats %+v", st)
				}
				if dq.Counts().Active != 100 || q.Counts().DeadLetter != 5 {
					t.Fatalf("destination %+v, source %+v", dq.Counts(), q.Counts())
				}
				q.ClearFaults()
				time.Sleep(2 * time.Minute) // the locks expire
				st2, err := deadletter.Redrive(t.Context(), dlqReceiver(t, ns, q, azservicebus.ReceiveModePeekLock), dst, &deadletter.RedriveOptions{IdleTimeout: time.Second})
				if err != nil || st2.Moved != 5 {
					t.Fatalf("second re-drive: %+v, %v", st2, err)
				}
				want := 105
				if dedupe {
					want = 100
				}
				if q.Counts().DeadLetter != 0 || dq.Counts().Active != want {
					t.Fatalf("destination %+v, want %d active", dq.Counts(), want)
				}
			})
		})
	}
}

func TestRedriveCancelFinishesInFlight(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ns := sbtest.NewTestNamespace(t, &sbtest.NamespaceOptions{Queues: map[string]*sbtest.EntityOptions{"q": nil, "dst": nil}})
		ns.SetLatency(sbtest.Latency{RoundTrip: 7 * time.Millisecond})
		q, _ := ns.Entity("q")
		dq, _ := ns.Entity("dst")
		deadLetterAll(t, ns, "q", q, messages(2000, nil), func(int) string { return "x" })
		dst, _ := ns.NewSender("dst", nil)
		ctx, cancel := context.WithCancel(t.Context())
		st, err := deadletter.Redrive(ctx, dlqReceiver(t, ns, q, azservicebus.ReceiveModePeekLock), dst, &deadletter.RedriveOptions{IdleTimeout: time.Second, PageSize: 100,
			Hooks: []deadletter.Hook{deadletter.ProgressHookFunc(func(_ context.Context, s deadletter.Stats) {
				if s.Seen >= 500 {
					cancel()
				}
			})}})
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("err %v", err)
		}
		reconciles(t, st)
		if st.Stopped != deadletter.StopCancelled || st.Seen >= 2000 || st.Failed != 0 {
			t.Fatalf("stats %+v", st)
		}
		if int64(dq.Counts().Active) != st.Moved || int64(q.Counts().DeadLetter) != 2000-st.Moved || q.Counts().Locked != 0 {
			t.Fatalf("moved %d; destination %+v; source %+v", st.Moved, dq.Counts(), q.Counts())
		}
	})
}

func TestRedriveSessionQueueKeepsOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ns := sbtest.NewTestNamespace(t, &sbtest.NamespaceOptions{Queues: map[string]*sbtest.EntityOptions{"s": {RequiresSession: true}}})
		q, _ := ns.Entity("s")
		msgs := messages(90, func(i int) string { return fmt.Sprint("session-", i%3) })
		deadLetterAll(t, ns, "s", q, msgs, func(int) string { return "x" })
		dst, _ := ns.NewSender("s", nil)
		st, err := deadletter.Redrive(t.Context(), dlqReceiver(t, ns, q, azservicebus.ReceiveModePeekLock), dst, &deadletter.RedriveOptions{IdleTimeout: time.Second})
		if err != nil || st.Moved != 90 {
			t.Fatalf("%+v %v", st, err)
		}
		for _, s := range []string{"session-0", "session-1", "session-2"} {
			sr, err := ns.AcceptSessionForQueue(t.Context(), "s", s, nil)
			if err != nil {
				t.Fatal(err)
			}
			rctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
			got, _ := sr.ReceiveMessages(rctx, 100, nil)
			cancel()
			if len(got) != 30 {
				t.Fatalf("session %s: %d messages", s, len(got))
			}
			ids := make([]string, len(got))
			for i, m := range got {
				ids[i] = m.MessageID
			}
			if !sort.StringsAreSorted(ids) {
				t.Fatalf("session %s out of order: %v", s, ids)
			}
			_ = sr.Close(t.Context())
		}
	})
}

// Skipped messages held past their lock come back during a long re-drive: they are held
// again, not counted twice, and the counts still reconcile.
func TestRedriveHeldLocksExpireMidRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ns := sbtest.NewTestNamespace(t, &sbtest.NamespaceOptions{Queues: map[string]*sbtest.EntityOptions{"q": {LockDuration: time.Second}, "dst": nil}})
		q, _ := ns.Entity("q")
		dq, _ := ns.Entity("dst")
		deadLetterAll(t, ns, "q", q, messages(100, nil), func(i int) string { return fmt.Sprint("r", i%2) })
		dst, _ := ns.NewSender("dst", nil)
		// 50 sends at 20 per second take 2.5 s: the skipped messages' 1 s locks expire twice.
		st, err := deadletter.Redrive(t.Context(), dlqReceiver(t, ns, q, azservicebus.ReceiveModePeekLock), dst,
			&deadletter.RedriveOptions{IdleTimeout: 5 * time.Second, PageSize: 10, Rate: 20, Filter: &deadletter.Filter{Reasons: []string{"r0"}}})
		if err != nil {
			t.Fatal(err)
		}
		reconciles(t, st)
		if st.Seen != 100 || st.Moved != 50 || st.Skipped != 50 {
			t.Fatalf("%+v", st)
		}
		if dq.Counts().Active != 50 || q.Counts().DeadLetter != 50 {
			t.Fatalf("destination %+v, source %+v", dq.Counts(), q.Counts())
		}
	})
}

func TestRedriveHoldLimit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ns := sbtest.NewTestNamespace(t, &sbtest.NamespaceOptions{Queues: map[string]*sbtest.EntityOptions{"q": nil}})
		q, _ := ns.Entity("q")
		deadLetterAll(t, ns, "q", q, messages(100, nil), func(int) string { return "x" })
		dst, _ := ns.NewSender("q", nil)
		st, err := deadletter.Redrive(t.Context(), dlqReceiver(t, ns, q, azservicebus.ReceiveModePeekLock), dst,
			&deadletter.RedriveOptions{IdleTimeout: time.Second, PageSize: 10, MaxHeld: 25, Filter: &deadletter.Filter{Reasons: []string{"none"}}})
		if err != nil || st.Stopped != deadletter.StopHoldLimit || st.Skipped < 25 || st.Seen >= 100 {
			t.Fatalf("%+v %v", st, err)
		}
		reconciles(t, st)
		if c := q.Counts(); c.DeadLetter != 100 {
			t.Fatalf("%+v", c)
		}
	})
}

func TestRedriveInvalidOptions(t *testing.T) {
	for _, o := range []*deadletter.RedriveOptions{{MaxMessages: -1}, {Rate: -1}, {PageSize: -1}, {IdleTimeout: -1}, {MaxHeld: -1},
		{ShutdownTimeout: -1}, {SettleTimeout: -1}, {MaxInFlight: -1}, {Hooks: []deadletter.Hook{42}}} {
		if _, err := deadletter.Redrive(t.Context(), nil, nil, o); !errors.Is(err, deadletter.ErrInvalidOptions) {
			t.Errorf("%+v: %v", o, err)
		}
	}
}

// A message a processor dead-lettered after its delayed redeliveries were spent comes back
// as new work: the copy drops the redelivery properties, so the processor's policy starts
// again instead of dead-lettering it after its first immediate attempts.
func TestRedriveStartsRedeliveriesAgain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ns := sbtest.NewTestNamespace(t, &sbtest.NamespaceOptions{Queues: map[string]*sbtest.EntityOptions{"q": nil}})
		q, _ := ns.Entity("q")
		msgs := messages(1, nil)
		msgs[0].ApplicationProperties[sbkit.RedeliveryAttemptProperty] = int64(5)
		msgs[0].ApplicationProperties[sbkit.RedeliveryFirstFailureProperty] = time.Now().UTC()
		msgs[0].ApplicationProperties[sbkit.RedeliveryOriginalIDProperty] = "original"
		deadLetterAll(t, ns, "q", q, msgs, func(int) string { return "x" })
		dst, _ := ns.NewSender("q", nil)
		if _, err := deadletter.Redrive(t.Context(), dlqReceiver(t, ns, q, azservicebus.ReceiveModePeekLock), dst, &deadletter.RedriveOptions{IdleTimeout: time.Second}); err != nil {
			t.Fatal(err)
		}
		got := drainQueue(t, ns, q)["m0000"][0]
		if attempt, _ := sbkit.RedeliveryOf(got); attempt != 0 {
			t.Fatalf("re-driven copy stands for redelivery attempt %d, want 0 (properties %v)", attempt, got.ApplicationProperties)
		}
		for _, k := range []string{sbkit.RedeliveryFirstFailureProperty, sbkit.RedeliveryOriginalIDProperty} {
			if _, ok := got.ApplicationProperties[k]; ok {
				t.Fatalf("re-driven copy keeps %s", k)
			}
		}
		if got.ApplicationProperties["i"] != int64(0) {
			t.Fatalf("re-driven copy lost its own properties: %v", got.ApplicationProperties)
		}
	})
}

// With Rate set, a page holds about a second of sends, so that the locks of a page's
// last messages do not run out while the rate spaces the sends before them.
func TestRedriveRateKeepsPagesWithinLocks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ns := sbtest.NewTestNamespace(t, &sbtest.NamespaceOptions{Queues: map[string]*sbtest.EntityOptions{"q": {LockDuration: 5 * time.Second}}})
		q, _ := ns.Entity("q")
		deadLetterAll(t, ns, "q", q, messages(60, nil), func(int) string { return "x" })
		dst, _ := ns.NewSender("q", nil)
		src := &pageRecorder{MessageReceiver: dlqReceiver(t, ns, q, azservicebus.ReceiveModePeekLock)}
		st, err := deadletter.Redrive(t.Context(), src, dst, &deadletter.RedriveOptions{IdleTimeout: time.Second, Rate: 10})
		if err != nil {
			t.Fatal(err)
		}
		reconciles(t, st)
		if st.Moved != 60 || st.CompleteFailed != 0 {
			t.Fatalf("60 messages at 10/s with locks of 5s: stats %+v", st)
		}
		if src.largest > 10 {
			t.Errorf("a page asked for %d messages at 10 per second, want at most 10", src.largest)
		}
		if c := q.Counts(); c.DeadLetter != 0 || c.Active != 60 {
			t.Fatalf("counts %+v", c)
		}
	})
}

// pageRecorder records the largest page a ReceiveMessages call asked for.
type pageRecorder struct {
	sbkit.MessageReceiver
	largest int
}

func (p *pageRecorder) ReceiveMessages(ctx context.Context, n int, o *azservicebus.ReceiveMessagesOptions) ([]*azservicebus.ReceivedMessage, error) {
	p.largest = max(p.largest, n)
	return p.MessageReceiver.ReceiveMessages(ctx, n, o)
}
