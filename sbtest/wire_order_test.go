package sbtest

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"testing"
	"time"

	goamqp "github.com/Azure/go-amqp"
	"github.com/sbkit/sbkit/sbtest/internal/amqp"
)

// The server applies the frames of a session in the order they arrived: a transfer is
// stored (or refused) before a later detach or close, a settlement takes effect before
// a later detach, sequence numbers follow arrival order. These tests drive go-amqp (the
// SDK's AMQP stack) directly, to send frames the SDK would not: pre-settled sends and
// settlements, and a detach or close right after them. A latency model makes every
// store and settlement wait, so that a server which let a later frame overtake them
// would show it every time.

// amqpSession dials srv with go-amqp and begins one session; both end with the test.
func amqpSession(t *testing.T, srv *Server) (*goamqp.Conn, *goamqp.Session) {
	t.Helper()
	ctx := wireCtx(t)
	conn, err := goamqp.Dial(ctx, "amqp://"+srv.Addr().String(), &goamqp.ConnOptions{SASLType: goamqp.SASLTypeAnonymous()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	sess, err := conn.NewSession(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	return conn, sess
}

// connsGone waits until srv serves no connection: every frame a closed or dropped
// connection delivered has been handled.
func connsGone(t *testing.T, srv *Server) {
	t.Helper()
	eventually(t, "the server to finish its connections", func() bool {
		return srv.w.Conns() == 0
	})
}

// orderedWire is a server whose every store and settlement waits 3 ms.
func orderedWire(t *testing.T, queues map[string]*EntityOptions) *Server {
	t.Helper()
	return newWire(t, &ServerOptions{
		Queues:           queues,
		NamespaceOptions: &NamespaceOptions{Latency: Latency{RoundTrip: 3 * time.Millisecond}},
	}).srv
}

// sendPipelined sends bodies "0".."n-1" on snd without waiting for any outcome and
// returns the receipts of unsettled sends (none for a pre-settled sender).
func sendPipelined(t *testing.T, snd *goamqp.Sender, n int, settled bool) []goamqp.SendReceipt {
	t.Helper()
	ctx := wireCtx(t)
	var receipts []goamqp.SendReceipt
	for i := range n {
		msg := goamqp.NewMessage([]byte(strconv.Itoa(i)))
		if settled {
			if err := snd.Send(ctx, msg, nil); err != nil {
				t.Fatal(err)
			}
			continue
		}
		rc, err := snd.SendWithReceipt(ctx, msg, nil)
		if err != nil {
			t.Fatal(err)
		}
		receipts = append(receipts, rc)
	}
	return receipts
}

func senderMode(settled bool) *goamqp.SenderSettleMode {
	if settled {
		return goamqp.SenderSettleModeSettled.Ptr()
	}
	return goamqp.SenderSettleModeUnsettled.Ptr()
}

// TestServerStoresTransfersBeforeDetachOrClose: transfers the server received before
// the client's detach or close are stored, pre-settled or not; unsettled ones are
// accepted before the server answers the detach.
func TestServerStoresTransfersBeforeDetachOrClose(t *testing.T) {
	t.Parallel()
	const n = 20
	for _, settled := range []bool{true, false} {
		for _, end := range []string{"detach", "close"} {
			t.Run(fmt.Sprintf("settled=%v/%s", settled, end), func(t *testing.T) {
				t.Parallel()
				srv := orderedWire(t, map[string]*EntityOptions{"q": nil})
				q, _ := srv.Namespace().Entity("q")
				conn, sess := amqpSession(t, srv)
				ctx := wireCtx(t)
				snd, err := sess.NewSender(ctx, "q", &goamqp.SenderOptions{SettlementMode: senderMode(settled)})
				if err != nil {
					t.Fatal(err)
				}
				receipts := sendPipelined(t, snd, n, settled)
				if end == "detach" {
					if err := snd.Close(ctx); err != nil {
						t.Fatal(err)
					}
					// The server answered the detach: every transfer before it is stored.
					if got := q.Stats().Sent; got != n {
						t.Fatalf("%d of %d messages stored when the detach was answered", got, n)
					}
					_ = receipts // go-amqp may report either its detach or the outcome once both arrived: see TestServerAnswersTransfersBeforeDetach
				} else {
					if err := conn.Close(); err != nil {
						t.Fatal(err)
					}
					connsGone(t, srv)
					if got := q.Stats().Sent; got != n {
						t.Fatalf("%d of %d messages stored before the connection closed", got, n)
					}
				}
				if got := q.Counts().Active; got != n {
					t.Fatalf("%d messages available, want %d", got, n)
				}
			})
		}
	}
}

// TestServerAnswersTransfersBeforeDetach: the server answers every unsettled transfer
// that arrived before the client's detach before it answers the detach, each accepted.
func TestServerAnswersTransfersBeforeDetach(t *testing.T) {
	t.Parallel()
	const n = 20
	srv := orderedWire(t, map[string]*EntityOptions{"q": nil})
	c := dialRaw(t, srv)
	c.open()
	c.beginAndAttach()
	msg, _ := (&amqp.Message{Data: [][]byte{[]byte("x")}}).MarshalBinary()
	var b []byte
	for i := range uint32(n) {
		var err error
		b, err = amqp.AppendFrame(b, amqp.Frame{Type: amqp.FrameTypeAMQP, Body: &amqp.Transfer{Handle: 0, DeliveryID: amqp.Ptr(i),
			DeliveryTag: []byte{byte(i)}, MessageFormat: amqp.Ptr(uint32(0))}, Payload: msg})
		if err != nil {
			t.Fatal(err)
		}
	}
	b, err := amqp.AppendFrame(b, amqp.Frame{Type: amqp.FrameTypeAMQP, Body: &amqp.Detach{Handle: 0, Closed: true}})
	if err != nil {
		t.Fatal(err)
	}
	c.write(b) // one write: the detach arrives right behind the transfers
	accepted := 0
	for {
		switch f := c.readFrame().Body.(type) {
		case *amqp.Disposition:
			if _, ok := f.State.(*amqp.Accepted); !ok {
				t.Fatalf("disposition %+v, want accepted", f)
			}
			last := f.First
			if f.Last != nil {
				last = *f.Last
			}
			accepted += int(last - f.First + 1)
		case *amqp.Detach:
			if accepted != n {
				t.Fatalf("%d of %d transfers accepted before the detach's answer", accepted, n)
			}
			return
		}
	}
}

// TestServerStoresInArrivalOrder: back-to-back sends on one link are stored in the order
// they arrived, and their sequence numbers follow that order, while their waits overlap.
func TestServerStoresInArrivalOrder(t *testing.T) {
	t.Parallel()
	const n = 50
	for _, settled := range []bool{true, false} {
		t.Run(fmt.Sprintf("settled=%v", settled), func(t *testing.T) {
			t.Parallel()
			srv := orderedWire(t, map[string]*EntityOptions{"q": nil})
			q, _ := srv.Namespace().Entity("q")
			_, sess := amqpSession(t, srv)
			ctx := wireCtx(t)
			snd, err := sess.NewSender(ctx, "q", &goamqp.SenderOptions{SettlementMode: senderMode(settled)})
			if err != nil {
				t.Fatal(err)
			}
			receipts := sendPipelined(t, snd, n, settled)
			for _, rc := range receipts {
				if _, err := rc.Wait(ctx); err != nil {
					t.Fatal(err)
				}
			}
			eventually(t, "every message to be stored", func() bool { return q.Stats().Sent == n })
			var got []string
			for _, m := range q.Active() {
				got = append(got, string(m.Body))
			}
			want := make([]string, n)
			for i := range want {
				want[i] = strconv.Itoa(i)
			}
			if !slices.Equal(got, want) {
				t.Fatalf("stored in the order %v, want %v", got, want)
			}
			if peak := q.Stats().PeakInFlightSends; peak < 2 {
				t.Fatalf("peak in-flight sends %d: the waits of pipelined sends do not overlap", peak)
			}
		})
	}
}

// TestServerSettlesBeforeDetach: settlements a client sends (pre-settled, receive settle
// mode first) right before it detaches take effect before the detach, for every outcome
// and on a session queue too: the messages are completed, dead-lettered, deferred or
// given back, not left locked until their locks expire.
func TestServerSettlesBeforeDetach(t *testing.T) {
	t.Parallel()
	testSettlesBefore(t, "detach")
}

// TestServerSettlesBeforeClose: the same when the client closes its connection instead
// (Proton's accept then close; AMQP 1.0 part 2.4.3, closing a connection): the
// settlements before the close frame take effect, none is dropped with the connection.
func TestServerSettlesBeforeClose(t *testing.T) {
	t.Parallel()
	testSettlesBefore(t, "close")
}

// testSettlesBefore receives n messages pre-settled, settles each with one outcome, then
// ends with a detach or a close, and checks that every settlement took effect.
func testSettlesBefore(t *testing.T, end string) {
	const n = 10
	type outcome struct {
		name   string
		settle func(context.Context, *goamqp.Receiver, *goamqp.Message) error
		check  func(*testing.T, *Entity)
	}
	outcomes := []outcome{
		{"accept", func(ctx context.Context, r *goamqp.Receiver, m *goamqp.Message) error { return r.AcceptMessage(ctx, m) },
			func(t *testing.T, q *Entity) {
				if st := q.Stats(); st.Completed != n {
					t.Fatalf("%d of %d completed", st.Completed, n)
				}
			}},
		{"reject", func(ctx context.Context, r *goamqp.Receiver, m *goamqp.Message) error {
			return r.RejectMessage(ctx, m, nil)
		}, func(t *testing.T, q *Entity) {
			if got := q.Counts().DeadLetter; got != n {
				t.Fatalf("%d of %d dead-lettered", got, n)
			}
		}},
		{"defer", func(ctx context.Context, r *goamqp.Receiver, m *goamqp.Message) error {
			return r.ModifyMessage(ctx, m, &goamqp.ModifyMessageOptions{UndeliverableHere: true})
		}, func(t *testing.T, q *Entity) {
			if got := q.Counts().Deferred; got != n {
				t.Fatalf("%d of %d deferred", got, n)
			}
		}},
		{"release", func(ctx context.Context, r *goamqp.Receiver, m *goamqp.Message) error {
			return r.ReleaseMessage(ctx, m)
		},
			func(t *testing.T, q *Entity) {
				if got := q.Counts().Active; got != n {
					t.Fatalf("%d of %d available again", got, n)
				}
			}},
	}
	for _, session := range []bool{false, true} {
		for _, oc := range outcomes {
			t.Run(fmt.Sprintf("session=%v/%s", session, oc.name), func(t *testing.T) {
				t.Parallel()
				srv := orderedWire(t, map[string]*EntityOptions{"q": {RequiresSession: session}})
				q, _ := srv.Namespace().Entity("q")
				conn, sess := amqpSession(t, srv)
				ctx := wireCtx(t)
				snd, err := sess.NewSender(ctx, "q", nil)
				if err != nil {
					t.Fatal(err)
				}
				for i := range n {
					m := goamqp.NewMessage([]byte(strconv.Itoa(i)))
					if session {
						m.Properties = &goamqp.MessageProperties{GroupID: ptr("s")}
					}
					if err := snd.Send(ctx, m, nil); err != nil {
						t.Fatal(err)
					}
				}
				// Manual credit, n once: go-amqp would otherwise top the credit up as messages
				// are settled, and released ones would be delivered (and locked) again.
				opts := &goamqp.ReceiverOptions{Credit: -1, SettlementMode: goamqp.ReceiverSettleModeFirst.Ptr()}
				if session {
					opts.Filters = []goamqp.LinkFilter{goamqp.NewLinkFilter(string(sessionFilterName), 0x00000137000000C, "s")}
				}
				rcv, err := sess.NewReceiver(ctx, "q", opts)
				if err != nil {
					t.Fatal(err)
				}
				if err := rcv.IssueCredit(n); err != nil {
					t.Fatal(err)
				}
				for range n {
					m, err := rcv.Receive(ctx, nil)
					if err != nil {
						t.Fatal(err)
					}
					if err := oc.settle(ctx, rcv, m); err != nil {
						t.Fatal(err)
					}
				}
				if end == "detach" {
					if err := rcv.Close(ctx); err != nil {
						t.Fatal(err)
					}
				} else {
					if err := conn.Close(); err != nil {
						t.Fatal(err)
					}
					connsGone(t, srv) // go-amqp's Close does not wait for the server's answer
				}
				// The server answered the detach, or finished the connection after the close:
				// every settlement before either took effect.
				if got := q.Counts().Locked; got != 0 {
					t.Fatalf("%d messages still locked after the %s", got, end)
				}
				oc.check(t, q)
			})
		}
	}
}

// TestServerFlowAfterDetach: a flow that follows the client's detach on its handle, as
// go-amqp's receiver may send while it waits for the answer, is ignored: the server
// answers the detach, the connection lives and the handle can be attached again.
func TestServerFlowAfterDetach(t *testing.T) {
	t.Parallel()
	srv := newWire(t, &ServerOptions{Queues: map[string]*EntityOptions{"q": nil}}).srv
	c := dialRaw(t, srv)
	c.open()
	c.beginSession(100)
	c.attachReceiver("q")
	c.writeFrame(amqp.FrameTypeAMQP, 0, &amqp.Detach{Handle: 1, Closed: true}, nil)
	c.flow(0, 100, 0, 5, false)
	if d, ok := c.readFrame().Body.(*amqp.Detach); !ok || d.Error != nil {
		t.Fatalf("answer %+v, want a detach without error", d)
	}
	c.attachReceiver("q")
}
