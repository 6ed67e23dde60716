package sbtest

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	goamqp "github.com/Azure/go-amqp"
)

// TestServerServesCreditAsItComes: the round trip is spent on the way of each frame,
// and credit is served as it comes, as the service serves a link (AMQP 1.0 part 2.6.7,
// "Flow Control": the sender may send whenever it has credit). A message asked for
// arrives one round trip after its credit was issued, and credit issued half a round
// trip after earlier credit is served half a round trip after it: its message arrives
// one round trip after it was issued, not after the earlier batch's round trip and one
// more (the server used to serve credit one batch per round trip, so credit issued
// meanwhile waited up to two). A message enqueued while credit is open arrives half a
// round trip after the enqueue.
func TestServerServesCreditAsItComes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const rtt = 100 * time.Millisecond
		ln := newPipeListener()
		srv, err := newServer(&ServerOptions{Queues: map[string]*EntityOptions{"q": nil}}, ln)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = srv.Close(context.Background()) }()
		ns := srv.Namespace()
		snd, err := ns.NewSender("q", nil)
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		for _, b := range []string{"a", "b"} {
			if err := snd.SendMessage(ctx, &azservicebus.Message{Body: []byte(b)}, nil); err != nil {
				t.Fatal(err)
			}
		}
		ns.SetLatency(Latency{RoundTrip: rtt})

		conn, err := goamqp.NewConn(ctx, ln.dial(), &goamqp.ConnOptions{SASLType: goamqp.SASLTypeAnonymous()})
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = conn.Close() }()
		sess, err := conn.NewSession(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		rcv, err := sess.NewReceiver(ctx, "q", &goamqp.ReceiverOptions{Credit: -1, SettlementMode: goamqp.ReceiverSettleModeSecond.Ptr()})
		if err != nil {
			t.Fatal(err)
		}
		var got []*goamqp.Message
		// receive receives the next message, wanting body want at the time due.
		receive := func(want string, due time.Time) {
			t.Helper()
			m, err := rcv.Receive(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			if got := string(m.GetData()); got != want {
				t.Fatalf("received %q, want %q", got, want)
			}
			if late := time.Since(due); late != 0 {
				t.Errorf("message %q arrived %v after it was due", want, late)
			}
			got = append(got, m) // accepted at the end: an accept waits for its answer
		}
		first := time.Now()
		if err := rcv.IssueCredit(1); err != nil {
			t.Fatal(err)
		}
		time.Sleep(rtt / 2)
		second := time.Now()
		if err := rcv.IssueCredit(1); err != nil {
			t.Fatal(err)
		}
		receive("a", first.Add(rtt))
		receive("b", second.Add(rtt))

		// Credit open, the queue empty: a message arrives half a round trip after it was
		// enqueued (the transfer's way), not whenever a receive loop's sleep ends.
		if err := rcv.IssueCredit(1); err != nil {
			t.Fatal(err)
		}
		time.Sleep(3 * rtt)
		// The send sleeps its round trip, then stores "c" as it returns (no time passes in
		// the bubble between the two). The latency stays as it is: turned off around the
		// send, the server's receive loop, woken by the enqueue, could read it before it
		// was turned on again and send "c" at once.
		if err := snd.SendMessage(ctx, &azservicebus.Message{Body: []byte("c")}, nil); err != nil {
			t.Fatal(err)
		}
		receive("c", time.Now().Add(rtt/2))
		for _, m := range got {
			if err := rcv.AcceptMessage(ctx, m); err != nil {
				t.Fatal(err)
			}
		}
		if q, _ := ns.Entity("q"); q.Stats().Completed != 3 {
			n := q.Stats().Completed
			t.Errorf("%d messages completed, want 3", n)
		}
		_ = rcv.Close(ctx)
	})
}
