package deadletter_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus/admin"
	"github.com/Azure/go-amqp"
	"github.com/sbkit/sbkit/deadletter"
	"github.com/sbkit/sbkit/sbtest"
)

// These tests run the real SDK against sbtest.NewServer: what the package does over
// AMQP, with the SDK's own receivers, senders, retries and connection recovery.

func wireClient(t *testing.T, conn string) *azservicebus.Client {
	t.Helper()
	c, err := azservicebus.NewClientFromConnectionString(conn, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close(context.Background()) })
	return c
}

func wireDLQ(t *testing.T, c *azservicebus.Client, queue, topic, sub string) *azservicebus.Receiver {
	t.Helper()
	o := &azservicebus.ReceiverOptions{SubQueue: azservicebus.SubQueueDeadLetter}
	var r *azservicebus.Receiver
	var err error
	if topic != "" {
		r, err = c.NewReceiverForSubscription(topic, sub, o)
	} else {
		r, err = c.NewReceiverForQueue(queue, o)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close(context.Background()) })
	return r
}

func wireSender(t *testing.T, c *azservicebus.Client, dst string) *azservicebus.Sender {
	t.Helper()
	s, err := c.NewSender(dst, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close(context.Background()) })
	return s
}

func TestWireRedriveQueueAllBodyKinds(t *testing.T) {
	srv := sbtest.NewTestServer(t, &sbtest.ServerOptions{Queues: map[string]*sbtest.EntityOptions{"q": nil}})
	ns := srv.Namespace()
	q, _ := ns.Entity("q")
	c := wireClient(t, srv.ConnectionString())
	ctx := t.Context()
	snd := wireSender(t, c, "q")
	// A value body, a sequence body and two data sections, with typed properties.
	props := map[string]any{"u": amqp.UUID{1, 2, 3}, "t": time.Date(2026, 5, 6, 7, 8, 9, 0, time.UTC), "i8": int8(-3), "u64": uint64(1 << 60), "f": 1.25}
	odd := []*azservicebus.AMQPAnnotatedMessage{
		{Body: azservicebus.AMQPAnnotatedMessageBody{Value: map[string]any{"k": int32(7)}}, Properties: &azservicebus.AMQPAnnotatedMessageProperties{MessageID: "value"}, ApplicationProperties: props},
		{Body: azservicebus.AMQPAnnotatedMessageBody{Sequence: [][]any{{"a", int64(1)}, {true}}}, Properties: &azservicebus.AMQPAnnotatedMessageProperties{MessageID: "sequence"}},
		{Body: azservicebus.AMQPAnnotatedMessageBody{Data: [][]byte{[]byte("one"), []byte("two")}}, Properties: &azservicebus.AMQPAnnotatedMessageProperties{MessageID: "data"}},
	}
	for _, m := range odd {
		if err := snd.SendAMQPAnnotatedMessage(ctx, m, nil); err != nil {
			t.Fatal(err)
		}
	}
	r, err := c.NewReceiverForQueue("q", nil)
	if err != nil {
		t.Fatal(err)
	}
	var got []*azservicebus.ReceivedMessage
	for len(got) < 3 {
		ms, err := r.ReceiveMessages(ctx, 3-len(got), nil)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, ms...)
	}
	for _, m := range got {
		if err := r.DeadLetterMessage(ctx, m, &azservicebus.DeadLetterOptions{Reason: new("odd")}); err != nil {
			t.Fatal(err)
		}
	}
	deadLetterAll(t, ns, "q", q, messages(300, nil), func(int) string { return "plain" })

	// Export by peek, then re-drive, then compare what arrived with the export.
	var export bytes.Buffer
	if st, err := deadletter.Export(ctx, wireDLQ(t, c, "q", "", ""), &export, nil); err != nil || st.Moved != 303 {
		t.Fatalf("export %+v %v", st, err)
	}
	st, err := deadletter.Redrive(ctx, wireDLQ(t, c, "q", "", ""), snd, &deadletter.RedriveOptions{IdleTimeout: 2 * time.Second})
	if err != nil || st.Moved != 303 || st.Failed != 0 {
		t.Fatalf("re-drive %+v %v", st, err)
	}
	reconciles(t, st)
	if c := q.Counts(); c.DeadLetter != 0 || c.Active != 303 {
		t.Fatalf("%+v", c)
	}
	byID := map[string]*azservicebus.ReceivedMessage{}
	for len(byID) < 303 {
		ms, err := r.ReceiveMessages(ctx, 100, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range ms {
			byID[m.MessageID] = m
			if err := r.CompleteMessage(ctx, m, nil); err != nil {
				t.Fatal(err)
			}
		}
	}
	if v := byID["value"].RawAMQPMessage.Body.Value; !reflect.DeepEqual(v, map[string]any{"k": int32(7)}) {
		t.Fatalf("value body %#v", v)
	}
	for k, want := range props {
		got := byID["value"].ApplicationProperties[k]
		if tm, ok := got.(time.Time); ok {
			got = tm.UTC() // AMQP timestamps carry no zone; the SDK decodes them in Local
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("property %s: %#v, want %#v", k, got, want)
		}
	}
	if s := byID["sequence"].RawAMQPMessage.Body.Sequence; !reflect.DeepEqual(s, [][]any{{"a", int64(1)}, {true}}) {
		t.Fatalf("sequence body %#v", s)
	}
	if d := byID["data"].RawAMQPMessage.Body.Data; len(d) != 2 || string(d[1]) != "two" {
		t.Fatalf("data sections %q", d)
	}

	// Import the export to a second queue: the same bodies and properties.
	if _, err := ns.NewQueue("copy", nil); err != nil {
		t.Fatal(err)
	}
	ist, err := deadletter.Import(ctx, &export, wireSender(t, c, "copy"), nil)
	if err != nil || ist.Moved != 303 {
		t.Fatalf("import %+v %v", ist, err)
	}
	cr, err := c.NewReceiverForQueue("copy", nil)
	if err != nil {
		t.Fatal(err)
	}
	imported := map[string]*azservicebus.ReceivedMessage{}
	for len(imported) < 303 {
		ms, err := cr.ReceiveMessages(ctx, 100, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range ms {
			imported[m.MessageID] = m
		}
	}
	for _, id := range []string{"value", "sequence", "data"} {
		if got, want := imported[id].RawAMQPMessage.Body, byID[id].RawAMQPMessage.Body; !reflect.DeepEqual(got, want) {
			t.Fatalf("imported %s body %#v, re-driven %#v", id, got, want)
		}
	}
	if got := imported["value"].ApplicationProperties["u"]; !reflect.DeepEqual(got, amqp.UUID{1, 2, 3}) {
		t.Fatalf("imported uuid property %#v", got)
	}
	if got := imported["value"].ApplicationProperties["u64"]; got != uint64(1<<60) {
		t.Fatalf("imported uint64 property %#v", got)
	}
}

func TestWireRedriveSubscriptionWithRules(t *testing.T) {
	srv := sbtest.NewTestServer(t, &sbtest.ServerOptions{Topics: map[string]sbtest.TopicOptions{"t": {Subscriptions: map[string]*sbtest.EntityOptions{"a": nil, "b": nil}}}})
	ns := srv.Namespace()
	tp, _ := ns.Topic("t")
	a, _ := tp.Subscription("a")
	b, _ := tp.Subscription("b")
	deadLetterAll(t, ns, "t", a, messages(50, nil), func(int) string { return "x" })
	drainQueue(t, ns, b)
	ctx := t.Context()
	// The rules, through the administration API as sbctl applies them.
	adm, err := admin.NewClientFromConnectionString(srv.ConnectionString(), srv.AdminClientOptions())
	if err != nil {
		t.Fatal(err)
	}
	for _, sub := range []string{"a", "b"} {
		var rules []admin.RuleProperties
		pager := adm.NewListRulesPager("t", sub, nil)
		for pager.More() {
			page, err := pager.NextPage(ctx)
			if err != nil {
				t.Fatal(err)
			}
			rules = append(rules, page.Rules...)
		}
		guarded, _, err := deadletter.GuardRules(sub, rules)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range guarded {
			if _, err := adm.UpdateRule(ctx, "t", sub, r); err != nil {
				t.Fatal(err)
			}
		}
		if sub == "a" {
			rr := deadletter.RedriveRule("a")
			if _, err := adm.CreateRule(ctx, "t", "a", &admin.CreateRuleOptions{Name: &rr.Name, Filter: rr.Filter}); err != nil {
				t.Fatal(err)
			}
		}
	}
	c := wireClient(t, srv.ConnectionString())
	st, err := deadletter.Redrive(ctx, wireDLQ(t, c, "", "t", "a"), wireSender(t, c, "t"), &deadletter.RedriveOptions{IdleTimeout: 2 * time.Second, Subscription: "a"})
	if err != nil || st.Moved != 50 {
		t.Fatalf("%+v %v", st, err)
	}
	if a.Counts().Active != 50 || b.Counts().Active != 0 || a.Counts().DeadLetter != 0 {
		t.Fatalf("a %+v, b %+v", a.Counts(), b.Counts())
	}
}

func TestWireRedriveSessionQueue(t *testing.T) {
	srv := sbtest.NewTestServer(t, &sbtest.ServerOptions{Queues: map[string]*sbtest.EntityOptions{"s": {RequiresSession: true}}})
	ns := srv.Namespace()
	q, _ := ns.Entity("s")
	deadLetterAll(t, ns, "s", q, messages(60, func(i int) string { return fmt.Sprint("s", i%4) }), func(int) string { return "x" })
	c := wireClient(t, srv.ConnectionString())
	st, err := deadletter.Redrive(t.Context(), wireDLQ(t, c, "s", "", ""), wireSender(t, c, "s"), &deadletter.RedriveOptions{IdleTimeout: 2 * time.Second})
	if err != nil || st.Moved != 60 {
		t.Fatalf("%+v %v", st, err)
	}
	if got := drainQueue(t, ns, q); len(got) != 60 {
		t.Fatalf("%d messages back in the session queue", len(got))
	}
}

// proxy forwards TCP connections to target and can cut them all, as a network failure.
type proxy struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	conns  []net.Conn
	wg     sync.WaitGroup
}

func newProxy(t *testing.T, target string) *proxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{ln: ln, target: target}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		for {
			in, err := ln.Accept()
			if err != nil {
				return
			}
			out, err := net.Dial("tcp", target)
			if err != nil {
				in.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, in, out)
			p.mu.Unlock()
			p.wg.Add(2)
			go func() { defer p.wg.Done(); _, _ = io.Copy(out, in); out.Close() }()
			go func() { defer p.wg.Done(); _, _ = io.Copy(in, out); in.Close() }()
		}
	}()
	t.Cleanup(func() { ln.Close(); p.cut(); p.wg.Wait() })
	return p
}

func (p *proxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

// TestWireRedriveFaults re-drives through every fault the issue of moving messages over
// a network brings: sends failing transiently (the SDK and the sender retry), completes
// failing after the copy was accepted, and the connection cut mid-run. Whatever
// happened, once the locks expired and a second re-drive ran, every message is in the
// destination exactly once where it detects duplicates, and none is lost where it does not.
func TestWireRedriveFaults(t *testing.T) {
	for _, dedupe := range []bool{true, false} {
		t.Run(fmt.Sprintf("dedupe=%v", dedupe), func(t *testing.T) {
			dstOpts := &sbtest.EntityOptions{}
			if dedupe {
				dstOpts.DuplicateDetectionWindow = time.Hour
			}
			srv := sbtest.NewTestServer(t, &sbtest.ServerOptions{Queues: map[string]*sbtest.EntityOptions{"q": {LockDuration: 2 * time.Second}, "dst": dstOpts}})
			ns := srv.Namespace()
			ns.SetLatency(sbtest.Latency{RoundTrip: time.Millisecond})
			q, _ := ns.Entity("q")
			dq, _ := ns.Entity("dst")
			const n = 300
			deadLetterAll(t, ns, "q", q, messages(n, nil), func(int) string { return "x" })
			p := newProxy(t, srv.Addr().String())
			conn := strings.Replace(srv.ConnectionString(), srv.Addr().String(), p.ln.Addr().String(), 1)
			c := wireClient(t, conn)
			dq.InjectFault(sbtest.Fault{Count: 2})                                                                                  // transient send failures
			q.InjectFault(sbtest.Fault{Op: sbtest.OpComplete, Count: 3, Err: &azservicebus.Error{Code: azservicebus.CodeLockLost}}) // completes fail after the send
			var cut sync.Once
			st, err := deadletter.Redrive(t.Context(), wireDLQ(t, c, "q", "", ""), wireSender(t, c, "dst"), &deadletter.RedriveOptions{IdleTimeout: 3 * time.Second, PageSize: 50, SettleTimeout: 2 * time.Second,
				Hooks: []deadletter.Hook{deadletter.ProgressHookFunc(func(_ context.Context, s deadletter.Stats) {
					if s.Seen >= 100 {
						cut.Do(p.cut)
					}
				})}})
			t.Logf("first re-drive: %+v, %v", st, err)
			reconciles(t, st)
			// Let every lock expire, then re-drive what is left.
			time.Sleep(3 * time.Second)
			c2 := wireClient(t, srv.ConnectionString())
			st2, err := deadletter.Redrive(t.Context(), wireDLQ(t, c2, "q", "", ""), wireSender(t, c2, "dst"), &deadletter.RedriveOptions{IdleTimeout: 3 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			reconciles(t, st2)
			t.Logf("second re-drive: %+v", st2)
			if qc := q.Counts(); qc.DeadLetter != 0 {
				t.Fatalf("dead letters left: %+v", qc)
			}
			ids := map[string]int{}
			for _, m := range dq.Active() {
				ids[m.MessageID]++
			}
			if len(ids) != n {
				t.Fatalf("%d distinct messages arrived of %d: messages lost", len(ids), n)
			}
			dups := len(dq.Active()) - n
			if dedupe && dups != 0 {
				t.Fatalf("%d duplicates despite duplicate detection", dups)
			}
			t.Logf("duplicates without duplicate detection: %d (completes failed after the copy: %d, second re-drive moved %d)", dups, st.CompleteFailed, st2.Moved)
		})
	}
}
