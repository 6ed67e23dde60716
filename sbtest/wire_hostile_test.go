package sbtest

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"runtime"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/sbkit/sbkit/sbtest/internal/amqp"
)

// rawConn is a hand-driven AMQP client for feeding the server broken input.
type rawConn struct {
	t  *testing.T
	nc net.Conn
	br *bufio.Reader
}

func dialRaw(t *testing.T, srv *Server) *rawConn {
	t.Helper()
	nc, err := net.Dial("tcp", srv.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = nc.Close() })
	_ = nc.SetDeadline(time.Now().Add(wireTimeout))
	return &rawConn{t: t, nc: nc, br: bufio.NewReader(nc)}
}

func (c *rawConn) write(b []byte) {
	c.t.Helper()
	if _, err := c.nc.Write(b); err != nil {
		c.t.Fatalf("write: %v", err)
	}
}

func (c *rawConn) writeFrame(typ uint8, ch uint16, body amqp.Performative, payload []byte) {
	c.t.Helper()
	b, err := amqp.AppendFrame(nil, amqp.Frame{Type: typ, Channel: ch, Body: body, Payload: payload})
	if err != nil {
		c.t.Fatal(err)
	}
	c.write(b)
}

func (c *rawConn) readFrame() amqp.Frame {
	c.t.Helper()
	for {
		fr, err := amqp.ReadFrame(c.br, 1<<20)
		if err != nil {
			c.t.Fatalf("read frame: %v", err)
		}
		if fr.Body != nil {
			return fr
		}
	}
}

func (c *rawConn) header(want string) {
	c.t.Helper()
	h, err := amqp.ReadProtoHeader(c.br)
	if err != nil || string(h[:]) != want {
		c.t.Fatalf("protocol header %q, %v; want %q", h[:], err, want)
	}
}

// open runs SASL ANONYMOUS and the open exchange.
func (c *rawConn) open() {
	c.t.Helper()
	c.write([]byte(amqp.ProtoHeaderSASL))
	c.header(amqp.ProtoHeaderSASL)
	if _, ok := c.readFrame().Body.(*amqp.SASLMechanisms); !ok {
		c.t.Fatal("no sasl-mechanisms")
	}
	c.writeFrame(amqp.FrameTypeSASL, 0, &amqp.SASLInit{Mechanism: "ANONYMOUS"}, nil)
	if o, ok := c.readFrame().Body.(*amqp.SASLOutcome); !ok || o.Code != amqp.SASLCodeOK {
		c.t.Fatal("sasl failed")
	}
	c.write([]byte(amqp.ProtoHeaderAMQP))
	c.header(amqp.ProtoHeaderAMQP)
	c.writeFrame(amqp.FrameTypeAMQP, 0, &amqp.Open{ContainerID: "raw", MaxFrameSize: amqp.Ptr(uint32(65536))}, nil)
	if _, ok := c.readFrame().Body.(*amqp.Open); !ok {
		c.t.Fatal("no open")
	}
}

// begin starts a session on channel 0 and attaches a sending link to queue "q" with
// handle 0.
func (c *rawConn) beginAndAttach() {
	c.t.Helper()
	c.writeFrame(amqp.FrameTypeAMQP, 0, &amqp.Begin{NextOutgoingID: 0, IncomingWindow: 100, OutgoingWindow: 100}, nil)
	if _, ok := c.readFrame().Body.(*amqp.Begin); !ok {
		c.t.Fatal("no begin")
	}
	c.writeFrame(amqp.FrameTypeAMQP, 0, &amqp.Attach{Name: "s", Handle: 0, Role: amqp.RoleSender,
		Source: &amqp.Source{Address: "raw"}, Target: &amqp.Target{Address: "q"}}, nil)
	if a, ok := c.readFrame().Body.(*amqp.Attach); !ok || a.Target == nil {
		c.t.Fatal("attach refused")
	}
	if _, ok := c.readFrame().Body.(*amqp.Flow); !ok {
		c.t.Fatal("no credit")
	}
}

// sendFirst sends payload as delivery 0, unsettled, on the link beginAndAttach attached.
func (c *rawConn) sendFirst(payload []byte) {
	c.t.Helper()
	c.writeFrame(amqp.FrameTypeAMQP, 0, &amqp.Transfer{Handle: 0, DeliveryID: amqp.Ptr(uint32(0)),
		DeliveryTag: []byte("t"), MessageFormat: amqp.Ptr(uint32(0))}, payload)
}

// readDisposition reads until the server's next disposition and returns it.
func (c *rawConn) readDisposition() *amqp.Disposition {
	c.t.Helper()
	for {
		if d, ok := c.readFrame().Body.(*amqp.Disposition); ok {
			return d
		}
	}
}

// expectClose reads until the server's close frame and returns its error condition, then
// expects the socket to be closed.
func (c *rawConn) expectClose() amqp.Symbol {
	c.t.Helper()
	for {
		fr, err := amqp.ReadFrame(c.br, 1<<20)
		if err != nil {
			c.t.Fatalf("connection ended without a close frame: %v", err)
		}
		if cl, ok := fr.Body.(*amqp.Close); ok {
			if cl.Error == nil {
				c.t.Fatal("close without an error")
			}
			c.expectEOF()
			return cl.Error.Condition
		}
	}
}

func (c *rawConn) expectEOF() {
	c.t.Helper()
	if _, err := io.Copy(io.Discard, c.br); err != nil && !errors.Is(err, net.ErrClosed) {
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			c.t.Fatal("the server did not close the connection")
		}
	}
}

func TestServerHostileInput(t *testing.T) {
	t.Parallel()
	w := newWire(t, &ServerOptions{Queues: map[string]*EntityOptions{"q": nil}, MaxFrameSize: 4096})
	q, _ := w.srv.Namespace().Entity("q")

	// A healthy client keeps working while the others misbehave.
	ctx := wireCtx(t)
	s := w.sender(t, "q")
	r := w.receiver(t, "q", &azservicebus.ReceiverOptions{ReceiveMode: azservicebus.ReceiveModeReceiveAndDelete})
	roundTrip := func(t *testing.T) {
		t.Helper()
		if err := s.SendMessage(ctx, &azservicebus.Message{Body: []byte("ok")}, nil); err != nil {
			t.Fatalf("healthy client: %v", err)
		}
		if m := receiveN(t, r, 1)[0]; string(m.Body) != "ok" {
			t.Fatalf("healthy client received %q", m.Body)
		}
	}
	roundTrip(t)

	frameHeader := func(size uint32, typ uint8, ch uint16) []byte {
		b := make([]byte, 8)
		binary.BigEndian.PutUint32(b, size)
		b[4], b[5] = 2, typ
		binary.BigEndian.PutUint16(b[6:], ch)
		return b
	}
	tests := []struct {
		name string
		run  func(c *rawConn)
		cond amqp.Symbol // "" : only the socket closes
	}{
		{"garbage instead of a protocol header", func(c *rawConn) {
			c.write([]byte("GET / HTTP/1.1\r\n\r\n"))
			c.header(amqp.ProtoHeaderAMQP)
			c.expectEOF()
		}, ""},
		{"garbage frame body", func(c *rawConn) {
			c.open()
			c.write(append(frameHeader(16, 0, 0), 0xde, 0xad, 0xbe, 0xef, 0xff, 0xff, 0xff, 0xff))
		}, condDecodeError},
		{"performative with a wrongly typed field", func(c *rawConn) {
			c.open()
			c.beginSession(100)
			// attach(name "x", handle "bad" (a string, not a uint), role receiver)
			body := []byte{0x00, 0x53, 0x12, 0xc0, 10, 3, 0xa1, 1, 'x', 0xa1, 3, 'b', 'a', 'd', 0x41}
			c.write(append(frameHeader(uint32(8+len(body)), 0, 0), body...))
		}, condDecodeError},
		{"frame size below the header", func(c *rawConn) {
			c.open()
			c.write(frameHeader(4, 0, 0))
		}, condDecodeError},
		{"oversize frame", func(c *rawConn) {
			c.open()
			c.write(frameHeader(1<<30, 0, 0))
		}, condFramingError},
		{"transfer without a session", func(c *rawConn) {
			c.open()
			c.writeFrame(amqp.FrameTypeAMQP, 3, &amqp.Transfer{Handle: 0, DeliveryID: amqp.Ptr(uint32(0))}, []byte("x"))
		}, condNotAllowed},
		{"transfer on an unattached handle", func(c *rawConn) {
			c.open()
			c.beginAndAttach()
			c.writeFrame(amqp.FrameTypeAMQP, 0, &amqp.Transfer{Handle: 7, DeliveryID: amqp.Ptr(uint32(0))}, []byte("x"))
		}, condUnattachedHandle},
		{"attach on a handle in use", func(c *rawConn) {
			c.open()
			c.beginAndAttach()
			c.writeFrame(amqp.FrameTypeAMQP, 0, &amqp.Attach{Name: "again", Handle: 0, Role: amqp.RoleSender, Target: &amqp.Target{Address: "q"}}, nil)
		}, condHandleInUse},
		{"second open", func(c *rawConn) {
			c.open()
			c.writeFrame(amqp.FrameTypeAMQP, 0, &amqp.Open{ContainerID: "again"}, nil)
		}, condNotAllowed},
		{"sasl frame after open", func(c *rawConn) {
			c.open()
			c.writeFrame(amqp.FrameTypeSASL, 0, &amqp.SASLInit{Mechanism: "ANONYMOUS"}, nil)
		}, condFramingError},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := dialRaw(t, w.srv)
			tc.run(c)
			if tc.cond != "" {
				if got := c.expectClose(); got != tc.cond {
					t.Fatalf("close condition %q, want %q", got, tc.cond)
				}
			}
			roundTrip(t)
		})
	}

	t.Run("client vanishes mid-transfer", func(t *testing.T) {
		c := dialRaw(t, w.srv)
		c.open()
		c.beginAndAttach()
		before := q.Stats().Sent
		c.writeFrame(amqp.FrameTypeAMQP, 0, &amqp.Transfer{Handle: 0, DeliveryID: amqp.Ptr(uint32(0)),
			DeliveryTag: []byte("t"), MessageFormat: amqp.Ptr(uint32(0)), More: true}, []byte{0x00, 0x53})
		_ = c.nc.Close()
		roundTrip(t)
		if got := q.Stats().Sent - before; got != 1 {
			t.Fatalf("%d messages stored, want only the healthy client's", got)
		}
	})

	t.Run("transfers beyond the credit", func(t *testing.T) {
		slow, err := w.srv.Namespace().NewQueue("slow", nil)
		if err != nil {
			t.Fatal(err)
		}
		slow.InjectFault(Fault{Op: OpSend, Hang: true}) // stores never finish: no credit comes back
		c := dialRaw(t, w.srv)
		c.open()
		c.writeFrame(amqp.FrameTypeAMQP, 0, &amqp.Begin{NextOutgoingID: 0, IncomingWindow: 100, OutgoingWindow: 100}, nil)
		c.readFrame()
		c.writeFrame(amqp.FrameTypeAMQP, 0, &amqp.Attach{Name: "s", Handle: 0, Role: amqp.RoleSender, Target: &amqp.Target{Address: "slow"}}, nil)
		c.readFrame()
		f, ok := c.readFrame().Body.(*amqp.Flow)
		if !ok || f.LinkCredit == nil {
			t.Fatal("no credit")
		}
		msg, _ := (&amqp.Message{Data: [][]byte{[]byte("x")}}).MarshalBinary()
		var b []byte
		for i := range *f.LinkCredit + 1 {
			b, err = amqp.AppendFrame(b, amqp.Frame{Type: amqp.FrameTypeAMQP, Body: &amqp.Transfer{Handle: 0, DeliveryID: amqp.Ptr(i),
				DeliveryTag: []byte("t"), MessageFormat: amqp.Ptr(uint32(0))}, Payload: msg})
			if err != nil {
				t.Fatal(err)
			}
		}
		c.write(b)
		if got := c.expectClose(); got != condTransferLimit {
			t.Fatalf("close condition %q, want %q", got, condTransferLimit)
		}
		if n := slow.Stats().Sent; n != 0 {
			t.Fatalf("%d hung sends were stored", n)
		}
		roundTrip(t)
	})

	// go-amqp ends a session it abandoned (NewSession's context ended) even when its Begin
	// was never written; the server must not drop the connection and its other sessions.
	t.Run("end on a channel with no session is ignored", func(t *testing.T) {
		c := dialRaw(t, w.srv)
		c.open()
		c.writeFrame(amqp.FrameTypeAMQP, 5, &amqp.End{}, nil)
		c.beginAndAttach() // fails if the next frame is not the answer to this begin
		before := q.Stats().Sent
		msg, _ := (&amqp.Message{Data: [][]byte{[]byte("after end")}}).MarshalBinary()
		c.sendFirst(msg)
		d := c.readDisposition()
		if _, ok := d.State.(*amqp.Accepted); !ok {
			t.Fatalf("disposition %+v, want accepted", d)
		}
		if got := q.Stats().Sent - before; got != 1 {
			t.Fatalf("%d messages stored, want 1", got)
		}
		m := receiveN(t, r, 1)[0]
		if string(m.Body) != "after end" {
			t.Fatalf("received %q", m.Body)
		}
		roundTrip(t)
	})

	t.Run("malformed message is rejected, the connection lives", func(t *testing.T) {
		c := dialRaw(t, w.srv)
		c.open()
		c.beginAndAttach()
		c.sendFirst([]byte{0x00, 0x53, 0x75, 0xff})
		d := c.readDisposition()
		if rej, ok := d.State.(*amqp.Rejected); !ok || rej.Error == nil || rej.Error.Condition != condDecodeError || !d.Settled {
			t.Fatalf("disposition %+v, want rejected with %s", d, condDecodeError)
		}
		roundTrip(t)
	})
}

func TestServerCloseReleasesEverything(t *testing.T) {
	base := runtime.NumGoroutine()
	srv, err := NewServer(&ServerOptions{Queues: map[string]*EntityOptions{"q": nil}})
	if err != nil {
		t.Fatal(err)
	}
	client, err := azservicebus.NewClientFromConnectionString(srv.ConnectionString(), nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), wireTimeout)
	defer cancel()
	s, _ := client.NewSender("q", nil)
	for i := range 3 {
		if err := s.SendMessage(ctx, &azservicebus.Message{Body: []byte{byte(i)}}, nil); err != nil {
			t.Fatal(err)
		}
	}
	r, _ := client.NewReceiverForQueue("q", nil)
	if _, err := r.ReceiveMessages(ctx, 3, nil); err != nil {
		t.Fatal(err)
	}
	q, _ := srv.Namespace().Entity("q")
	if q.Counts().Locked == 0 {
		t.Fatal("nothing locked")
	}
	// A raw client in the middle of its handshake.
	raw, err := net.Dial("tcp", srv.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()

	if err := srv.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := srv.Close(context.Background()); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	// The locks outlive the connections, until LockedUntil ("Message transfers, locks,
	// and settlement").
	if n := q.Counts().Locked; n != 3 {
		t.Fatalf("%d messages locked after Close, want the 3 locks kept", n)
	}
	_ = client.Close(ctx)
	_ = raw.Close()
	noGoroutinesAbove(t, base)
}

// beginSession starts a session on channel 0 with the given incoming window.
func (c *rawConn) beginSession(window uint32) {
	c.t.Helper()
	c.writeFrame(amqp.FrameTypeAMQP, 0, &amqp.Begin{NextOutgoingID: 0, IncomingWindow: window, OutgoingWindow: 100}, nil)
	if _, ok := c.readFrame().Body.(*amqp.Begin); !ok {
		c.t.Fatal("no begin")
	}
}

// attachReceiver attaches a peek-lock receiving link with handle 1 on addr.
func (c *rawConn) attachReceiver(addr string) {
	c.t.Helper()
	c.writeFrame(amqp.FrameTypeAMQP, 0, &amqp.Attach{Name: "r", Handle: 1, Role: amqp.RoleReceiver,
		RcvSettleMode: amqp.Ptr(amqp.ReceiverSettleSecond), Source: &amqp.Source{Address: addr}, Target: &amqp.Target{Address: "raw"}}, nil)
	if a, ok := c.readFrame().Body.(*amqp.Attach); !ok || a.Source == nil {
		c.t.Fatal("attach refused")
	}
}

func (c *rawConn) flow(nextIncoming, window, deliveryCount, credit uint32, drain bool) {
	c.t.Helper()
	c.writeFrame(amqp.FrameTypeAMQP, 0, &amqp.Flow{NextIncomingID: amqp.Ptr(nextIncoming), IncomingWindow: window,
		NextOutgoingID: 0, OutgoingWindow: 100, Handle: amqp.Ptr(uint32(1)), DeliveryCount: amqp.Ptr(deliveryCount),
		LinkCredit: amqp.Ptr(credit), Drain: drain}, nil)
}

func (c *rawConn) expectTransfers(n int) {
	c.t.Helper()
	for i := range n {
		if tr, ok := c.readFrame().Body.(*amqp.Transfer); !ok || tr.Handle != 1 || len(tr.DeliveryTag) != 16 {
			c.t.Fatalf("frame %d is not a transfer on handle 1", i)
		}
	}
}

func TestServerFlowControl(t *testing.T) {
	t.Parallel()
	w := newWire(t, &ServerOptions{Queues: map[string]*EntityOptions{"q": nil, "empty": nil}})
	ctx := wireCtx(t)
	s := w.sender(t, "q")
	for range 5 {
		if err := s.SendMessage(ctx, &azservicebus.Message{Body: []byte("m")}, nil); err != nil {
			t.Fatal(err)
		}
	}

	t.Run("drain", func(t *testing.T) {
		c := dialRaw(t, w.srv)
		c.open()
		c.beginSession(100)
		c.attachReceiver("empty")
		c.flow(0, 100, 0, 7, true)
		f, ok := c.readFrame().Body.(*amqp.Flow)
		if !ok || !f.Drain || f.LinkCredit == nil || *f.LinkCredit != 0 || f.DeliveryCount == nil || *f.DeliveryCount != 7 {
			t.Fatalf("drain answered with %+v, want drain, credit 0, delivery-count 7", f)
		}
	})

	t.Run("session window", func(t *testing.T) {
		c := dialRaw(t, w.srv)
		c.open()
		c.beginSession(2)
		c.attachReceiver("q")
		c.flow(0, 2, 0, 5, false)
		c.expectTransfers(2)
		_ = c.nc.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
		if fr, err := amqp.ReadFrame(c.br, 1<<20); err == nil {
			t.Fatalf("got %T beyond the session window", fr.Body)
		}
		_ = c.nc.SetReadDeadline(time.Now().Add(wireTimeout))
		c.flow(2, 3, 2, 3, false)
		c.expectTransfers(3)
	})

	t.Run("heartbeat", func(t *testing.T) {
		c := dialRaw(t, w.srv)
		c.write([]byte(amqp.ProtoHeaderAMQP))
		c.header(amqp.ProtoHeaderAMQP)
		c.writeFrame(amqp.FrameTypeAMQP, 0, &amqp.Open{ContainerID: "raw", IdleTimeOut: amqp.Ptr(uint32(100))}, nil)
		if _, ok := c.readFrame().Body.(*amqp.Open); !ok {
			t.Fatal("no open")
		}
		fr, err := amqp.ReadFrame(c.br, 1<<20)
		if err != nil || fr.Body != nil {
			t.Fatalf("got %T, %v; want an empty frame", fr.Body, err)
		}
	})
}
