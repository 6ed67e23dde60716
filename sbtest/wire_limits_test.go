package sbtest

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"runtime"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/sbkit/sbkit/sbtest/internal/amqp"
	"github.com/sbkit/sbkit/sbtest/internal/wire"
)

// liveHeap returns the live heap after a full collection.
func liveHeap() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// dialRawNoRead connects a raw client whose socket receive buffer is small, so that a
// client that does not read backs the server's writes up at once instead of after the
// megabytes the kernel would otherwise buffer for it.
func dialRawNoRead(t *testing.T, srv *Server) *rawConn {
	t.Helper()
	d := net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
		var serr error
		err := rc.Control(func(fd uintptr) {
			serr = errors.Join(syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 8192),
				syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_SNDBUF, 8192))
		})
		return errors.Join(err, serr)
	}}
	nc, err := d.Dial("tcp", srv.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = nc.Close() })
	_ = nc.SetDeadline(time.Now().Add(wireTimeout))
	c := &rawConn{t: t, nc: nc, br: bufio.NewReader(nc)}
	c.open()
	// The same on the server's side of the socket (under the first-byte reader of
	// internal/wire/https.go).
	if err := srv.w.SetConnWriteBuffer(nc.LocalAddr(), 8192); err != nil {
		t.Fatal(err)
	}
	return c
}

// checkQueued fails the test unless the server queues about wire.MaxQueued at most for
// the client (one more frame may be appended by a writer that does not wait).
func checkQueued(t *testing.T, srv *Server, c *rawConn) {
	t.Helper()
	if q := srv.w.Queued(c.nc.LocalAddr()); q > wire.MaxQueued+64<<10 {
		t.Fatalf("%d KiB queued for a client that reads nothing", q>>10)
	}
}

// flood writes burst to c again and again, going on when a write times out, while
// checking every 100 ms that the live heap stays within limit of base. It returns once
// the server has read nothing for a second (its writes are backed up: it stopped
// reading), reporting the bytes the client wrote, or fails the test after d.
func flood(t *testing.T, c *rawConn, d time.Duration, base, limit uint64, burst []byte) int64 {
	t.Helper()
	var written atomic.Int64
	stop := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		var pending []byte // the rest of a burst a timed-out write left: frames stay whole
		for {
			select {
			case <-stop:
				done <- nil
				return
			default:
			}
			if len(pending) == 0 {
				pending = burst
			}
			_ = c.nc.SetWriteDeadline(time.Now().Add(50 * time.Millisecond))
			n, err := c.nc.Write(pending)
			pending = pending[n:]
			written.Add(int64(n))
			var ne net.Error
			if err != nil && !(errors.As(err, &ne) && ne.Timeout()) {
				done <- err
				return
			}
		}
	}()
	defer func() {
		close(stop)
		if err := <-done; err != nil {
			t.Errorf("the server dropped the connection: %v", err)
		}
	}()
	start := time.Now()
	last, lastChange := int64(0), start
	for time.Since(start) < d {
		time.Sleep(100 * time.Millisecond)
		if h := liveHeap(); h > base+limit {
			t.Fatalf("live heap grew by %d MiB (limit %d MiB) after %d KiB from the client", (h-base)>>20, limit>>20, written.Load()>>10)
		}
		if n := written.Load(); n != last {
			last, lastChange = n, time.Now()
		} else if time.Since(lastChange) >= time.Second {
			return n
		}
	}
	t.Fatalf("after %v the server still reads from a client that reads nothing (%d KiB so far)", d, written.Load()>>10)
	return 0
}

// TestServerHostileClientBoundedHeap: a client that never reads must not make the server
// buffer without bound, neither by echoed flows nor by dispositions for ranges of
// deliveries it never received, and a healthy client on another connection keeps
// working meanwhile: what a client makes the server hold is bounded. Not parallel: it
// measures the process's heap.
func TestServerHostileClientBoundedHeap(t *testing.T) {
	const limit = 6 << 20 // the write buffer's 1 MiB (twice: queued, being written) and slack
	w := newWire(t, &ServerOptions{Queues: map[string]*EntityOptions{"q": nil, "held": nil}})
	ctx := wireCtx(t)
	healthy := w.healthyClient(t, "q")
	healthy(t)

	t.Run("echoed flows", func(t *testing.T) {
		c := dialRawNoRead(t, w.srv)
		c.beginSession(100)
		base := liveHeap()
		total := flood(t, c, 6*time.Second, base, limit, echoFlows(t))
		checkQueued(t, w.srv, c)
		t.Logf("the server stopped reading after %d KiB; heap %+d KiB", total>>10, (int64(liveHeap())-int64(base))>>10)
		healthy(t)
	})

	t.Run("disposition ranges", func(t *testing.T) {
		const held = 2000
		hq, _ := w.srv.Namespace().Entity("held")
		hs := w.sender(t, "held")
		batch, err := hs.NewMessageBatch(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		for range held {
			if err := batch.AddMessage(&azservicebus.Message{Body: []byte("h")}, nil); err != nil {
				t.Fatal(err)
			}
		}
		if err := hs.SendMessageBatch(ctx, batch, nil); err != nil {
			t.Fatal(err)
		}
		c := dialRawNoRead(t, w.srv)
		c.beginSession(held)
		c.attachReceiver("held")
		c.flow(0, held, 0, held, false)
		c.expectTransfers(held)
		if n := hq.Counts().Locked; n != held {
			t.Fatalf("%d messages locked, want %d", n, held)
		}
		// Unsettled dispositions for ids the client never received, never reading the
		// answers.
		var burst []byte
		for i := range 200 {
			burst, err = amqp.AppendFrame(burst, amqp.Frame{Type: amqp.FrameTypeAMQP, Body: &amqp.Disposition{
				Role: amqp.RoleReceiver, First: held + uint32(i)%7, Last: amqp.Ptr(uint32(2*held - 2)), State: &amqp.Accepted{}}})
			if err != nil {
				t.Fatal(err)
			}
		}
		base := liveHeap()
		total := flood(t, c, 6*time.Second, base, limit, burst)
		checkQueued(t, w.srv, c)
		t.Logf("the server stopped reading after %d KiB; heap %+d KiB", total>>10, (int64(liveHeap())-int64(base))>>10)
		healthy(t)
	})
}

// TestServerDispositionRangeAnswersOnce: a disposition for a range of deliveries the
// server does not hold is answered by one rejection for the whole run, not one frame per
// id: a disposition costs at most one answer per delivery it settles, plus one.
func TestServerDispositionRangeAnswersOnce(t *testing.T) {
	t.Parallel()
	w := newWire(t, &ServerOptions{Queues: map[string]*EntityOptions{"q": nil}})
	w.sendN(t, "q", 4)
	c := dialRaw(t, w.srv)
	c.open()
	c.beginSession(100)
	c.attachReceiver("q")
	c.flow(0, 100, 0, 4, false)
	c.expectTransfers(4)
	// Settle 0..9: ids 0-3 are held (four confirmations), 4-9 are not (one rejection).
	c.writeFrame(amqp.FrameTypeAMQP, 0, &amqp.Disposition{Role: amqp.RoleReceiver, First: 0, Last: amqp.Ptr(uint32(9)), State: &amqp.Accepted{}}, nil)
	var accepted, rejected []string
	for len(accepted)+len(rejected) < 5 {
		d := c.readDisposition()
		last := d.First
		if d.Last != nil {
			last = *d.Last
		}
		switch st := d.State.(type) {
		case *amqp.Accepted:
			accepted = append(accepted, fmt.Sprint(d.First, "..", last))
		case *amqp.Rejected:
			if st.Error == nil || st.Error.Condition != condLockLost {
				t.Fatalf("rejection %+v, want %s", st, condLockLost)
			}
			rejected = append(rejected, fmt.Sprint(d.First, "..", last))
		default:
			t.Fatalf("disposition state %T", d.State)
		}
	}
	if len(accepted) != 4 || len(rejected) != 1 || rejected[0] != "4..9" {
		t.Fatalf("accepted %v, rejected %v; want 4 confirmations and one rejection of 4..9", accepted, rejected)
	}
}

// TestServerWriteTimeout: a client that stops reading while the server has frames for it
// is disconnected after ServerOptions.WriteTimeout, so its unread frames cannot pile up.
func TestServerWriteTimeout(t *testing.T) {
	t.Parallel()
	w := newWire(t, &ServerOptions{Queues: map[string]*EntityOptions{"q": nil}, WriteTimeout: 300 * time.Millisecond})
	c := dialRawNoRead(t, w.srv)
	c.beginSession(100)
	burst := echoFlows(t)
	start := time.Now()
	for {
		_ = c.nc.SetWriteDeadline(time.Now().Add(wireTimeout))
		if _, err := c.nc.Write(burst); err != nil {
			break // the server closed the connection
		}
		if time.Since(start) > wireTimeout {
			t.Fatal("the server kept reading from a client that reads nothing")
		}
	}
	eventually(t, "the connection to be dropped", func() bool { return w.srv.connCount() == 0 })
}

// echoFlows returns 1000 session flow frames asking for an echo.
func echoFlows(t *testing.T) []byte {
	t.Helper()
	var b []byte
	for range 1000 {
		var err error
		b, err = amqp.AppendFrame(b, amqp.Frame{Type: amqp.FrameTypeAMQP, Body: &amqp.Flow{
			NextIncomingID: amqp.Ptr(uint32(0)), IncomingWindow: 100, OutgoingWindow: 100, Echo: true}})
		if err != nil {
			t.Fatal(err)
		}
	}
	return b
}

func (s *Server) connCount() int { return s.w.Conns() }

// TestServerHugeCredit: link credit is a uint32; a flow granting 0xFFFFFFFF delivers
// (AMQP 1.0 part 2.7.4: link-credit is a uint).
func TestServerHugeCredit(t *testing.T) {
	t.Parallel()
	w := newWire(t, &ServerOptions{Queues: map[string]*EntityOptions{"q": nil}})
	for _, tc := range []struct {
		name          string
		deliveryCount uint32
		credit        uint32
	}{
		{"max credit", 0, 0xFFFFFFFF},
		{"above 2^31", 0, 1<<31 + 5},
		{"delivery-count wraps", 0xFFFFFFF0, 1 << 31},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Fresh messages: the locks of the previous connection's outlive it ("Message
			// transfers, locks, and settlement").
			w.sendN(t, "q", 3)
			c := dialRaw(t, w.srv)
			c.open()
			c.beginSession(100)
			c.attachReceiver("q")
			c.flow(0, 100, tc.deliveryCount, tc.credit, false)
			c.expectTransfers(3)
		})
	}
}

// TestServerIdleLinksCostNoGoroutine: a receiving link without credit runs no goroutine
// (idle links cost memory, not goroutines: 16,384 of them must not cost 16,384
// goroutines).
func TestServerIdleLinksCostNoGoroutine(t *testing.T) {
	w := newWire(t, &ServerOptions{Queues: map[string]*EntityOptions{"q": nil}, MaxLinksPerSession: 300})
	c := dialRaw(t, w.srv)
	c.open()
	c.beginSession(100)
	before := runtime.NumGoroutine()
	var b []byte
	for h := range uint32(256) {
		var err error
		b, err = amqp.AppendFrame(b, amqp.Frame{Type: amqp.FrameTypeAMQP, Body: &amqp.Attach{Name: fmt.Sprint("r", h), Handle: h, Role: amqp.RoleReceiver,
			RcvSettleMode: amqp.Ptr(amqp.ReceiverSettleSecond), Source: &amqp.Source{Address: "q"}, Target: &amqp.Target{Address: "raw"}}})
		if err != nil {
			t.Fatal(err)
		}
	}
	c.write(b)
	for range 256 {
		if a, ok := c.readFrame().Body.(*amqp.Attach); !ok || a.Source == nil {
			t.Fatal("attach refused")
		}
	}
	if n := runtime.NumGoroutine() - before; n > 16 {
		t.Fatalf("256 idle links cost %d goroutines", n)
	}
	// Credit starts a link's delivery; it still works.
	ctx := wireCtx(t)
	if err := w.sender(t, "q").SendMessage(ctx, &azservicebus.Message{Body: []byte("m")}, nil); err != nil {
		t.Fatal(err)
	}
	c.writeFrame(amqp.FrameTypeAMQP, 0, &amqp.Flow{NextIncomingID: amqp.Ptr(uint32(0)), IncomingWindow: 100,
		OutgoingWindow: 100, Handle: amqp.Ptr(uint32(200)), DeliveryCount: amqp.Ptr(uint32(0)), LinkCredit: amqp.Ptr(uint32(1))}, nil)
	for {
		if tr, ok := c.readFrame().Body.(*amqp.Transfer); ok {
			if tr.Handle != 200 {
				t.Fatalf("transfer on handle %d, want 200", tr.Handle)
			}
			break
		}
	}
}

// TestServerLimits: connections, sessions per connection and links per session beyond
// ServerOptions' limits are refused with amqp:resource-limit-exceeded, which the SDK
// reports at once as a non-retryable error (Service Bus quotas:
// "subsequent requests for additional connections are rejected").
func TestServerLimits(t *testing.T) {
	t.Parallel()
	w := newWire(t, &ServerOptions{Queues: map[string]*EntityOptions{"q": nil},
		MaxConnections: 2, MaxSessionsPerConnection: 3, MaxLinksPerSession: 2})
	ctx := wireCtx(t)
	if err := w.sender(t, "q").SendMessage(ctx, &azservicebus.Message{Body: []byte("m")}, nil); err != nil {
		t.Fatal(err)
	}

	// Each subtest's raw client is the second connection.
	rawOnly := func(t *testing.T) *rawConn {
		t.Helper()
		eventually(t, "only the SDK's connection", func() bool { return w.srv.connCount() == 1 })
		c := dialRaw(t, w.srv)
		c.open()
		return c
	}
	t.Run("links per session", func(t *testing.T) {
		c := rawOnly(t)
		c.beginSession(100)
		for h := range uint32(3) {
			c.writeFrame(amqp.FrameTypeAMQP, 0, &amqp.Attach{Name: fmt.Sprint("l", h), Handle: h, Role: amqp.RoleReceiver,
				Source: &amqp.Source{Address: "q"}, Target: &amqp.Target{Address: "raw"}}, nil)
			a, ok := c.readFrame().Body.(*amqp.Attach)
			if !ok {
				t.Fatal("no attach")
			}
			if h < 2 {
				if a.Source == nil {
					t.Fatalf("link %d refused", h)
				}
				continue
			}
			d, ok := c.readFrame().Body.(*amqp.Detach)
			if a.Source != nil || !ok || d.Error == nil || d.Error.Condition != condResourceLimit {
				t.Fatalf("third link: %+v then %+v, want a refusal with %s", a, d, condResourceLimit)
			}
		}
		// A detached link frees its place.
		c.writeFrame(amqp.FrameTypeAMQP, 0, &amqp.Detach{Handle: 2, Closed: true}, nil)
		c.writeFrame(amqp.FrameTypeAMQP, 0, &amqp.Detach{Handle: 0, Closed: true}, nil)
		for {
			if d, ok := c.readFrame().Body.(*amqp.Detach); ok && d.Handle == 0 {
				break
			}
		}
		c.writeFrame(amqp.FrameTypeAMQP, 0, &amqp.Attach{Name: "again", Handle: 0, Role: amqp.RoleReceiver,
			Source: &amqp.Source{Address: "q"}, Target: &amqp.Target{Address: "raw"}}, nil)
		if a, ok := c.readFrame().Body.(*amqp.Attach); !ok || a.Source == nil {
			t.Fatal("attach after a detach refused")
		}
	})

	t.Run("sessions per connection", func(t *testing.T) {
		c := rawOnly(t)
		for ch := range uint16(4) {
			c.writeFrame(amqp.FrameTypeAMQP, ch, &amqp.Begin{IncomingWindow: 100, OutgoingWindow: 100}, nil)
			fr := c.readFrame()
			if _, ok := fr.Body.(*amqp.Begin); !ok || fr.Channel != ch {
				t.Fatalf("session %d: %T on channel %d", ch, fr.Body, fr.Channel)
			}
			if ch < 3 {
				continue
			}
			fr = c.readFrame()
			if e, ok := fr.Body.(*amqp.End); !ok || fr.Channel != ch || e.Error == nil || e.Error.Condition != condResourceLimit {
				t.Fatalf("fourth session: %+v, want an end with %s", fr.Body, condResourceLimit)
			}
		}
		// The client answers the refusal's end (the server does not answer that), and
		// ends another session: a place is free again.
		c.writeFrame(amqp.FrameTypeAMQP, 3, &amqp.End{}, nil)
		c.writeFrame(amqp.FrameTypeAMQP, 0, &amqp.End{}, nil)
		if fr := c.readFrame(); fr.Channel != 0 {
			t.Fatalf("%T on channel %d, want the end of channel 0", fr.Body, fr.Channel)
		} else if _, ok := fr.Body.(*amqp.End); !ok {
			t.Fatalf("%T, want an end", fr.Body)
		}
		c.writeFrame(amqp.FrameTypeAMQP, 3, &amqp.Begin{IncomingWindow: 100, OutgoingWindow: 100}, nil)
		if fr := c.readFrame(); fr.Channel != 3 {
			t.Fatalf("%T on channel %d", fr.Body, fr.Channel)
		} else if _, ok := fr.Body.(*amqp.Begin); !ok {
			t.Fatalf("begin after an end: %T", fr.Body)
		}
	})

	t.Run("SDK beyond the session limit", func(t *testing.T) {
		// The wire client holds sessions for its sender and $cbs; more receivers need
		// more sessions than 3: the SDK reports the refusal, it does not hang.
		var err error
		for i := 0; i < 4 && err == nil; i++ {
			var r *azservicebus.Receiver
			r, err = w.client.NewReceiverForQueue("q", nil)
			if err == nil {
				t.Cleanup(func() { _ = r.Close(context.Background()) })
				_, err = r.PeekMessages(ctx, 1, nil)
			}
		}
		if err == nil || !isResourceLimit(err) || ctx.Err() != nil {
			t.Fatalf("err %v, want the server's resource-limit refusal", err)
		}
	})

	t.Run("connections", func(t *testing.T) {
		// The wire client holds one connection, the raw client a second.
		c := rawOnly(t)
		client, err := azservicebus.NewClientFromConnectionString(w.srv.ConnectionString(), nil)
		if err != nil {
			t.Fatal(err)
		}
		defer client.Close(ctx)
		start := time.Now()
		snd, err := client.NewSender("q", nil)
		if err != nil {
			t.Fatal(err)
		}
		err = snd.SendMessage(ctx, &azservicebus.Message{Body: []byte("x")}, nil)
		if err == nil || !isResourceLimit(err) {
			t.Fatalf("third connection: %v, want the server's resource-limit refusal", err)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Fatalf("the refusal took %v", d)
		}
		// Under the limit again, a new client connects (the refused one keeps its
		// error: the SDK does not reconnect after a non-retryable one).
		_ = c.nc.Close()
		eventually(t, "the raw connection to be dropped", func() bool { return w.srv.connCount() == 1 })
		client2, err := azservicebus.NewClientFromConnectionString(w.srv.ConnectionString(), nil)
		if err != nil {
			t.Fatal(err)
		}
		defer client2.Close(ctx)
		snd2, err := client2.NewSender("q", nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := snd2.SendMessage(ctx, &azservicebus.Message{Body: []byte("x")}, nil); err != nil {
			t.Fatalf("a connection under the limit: %v", err)
		}
	})
}

// isResourceLimit reports whether the SDK's error carries the server's
// amqp:resource-limit-exceeded (go-amqp's *Error, which the SDK passes on unwrapped).
func isResourceLimit(err error) bool {
	return err != nil && strings.Contains(err.Error(), string(condResourceLimit))
}

// linkCount returns how many links the server's session on channel ch of the
// connection to the client at addr holds.
func (s *Server) linkCount(addr net.Addr, ch uint16) int { return s.w.Links(addr, ch) }

// TestServerRefusedLinksKeepOnlyTheirHandle: a refused link keeps nothing but its handle
// number until the client detaches it (AMQP 1.0 part 2.6.2, link handles: the handle
// stays in use until both sides detached), so a client that never detaches refused links
// costs bits, not links; frames that crossed the refusal are ignored, the handle is
// refused while in use, and free again after the client's detach.
func TestServerRefusedLinksKeepOnlyTheirHandle(t *testing.T) {
	t.Parallel()
	w := newWire(t, &ServerOptions{Queues: map[string]*EntityOptions{"q": nil}, MaxLinksPerSession: 2})
	c := dialRaw(t, w.srv)
	c.open()
	c.beginSession(100)
	attach := func(h uint32, addr string) {
		c.writeFrame(amqp.FrameTypeAMQP, 0, &amqp.Attach{Name: fmt.Sprint("l", h), Handle: h, Role: amqp.RoleReceiver,
			Source: &amqp.Source{Address: addr}, Target: &amqp.Target{Address: "raw"}}, nil)
	}
	refused := func(h uint32) {
		t.Helper()
		a, ok := c.readFrame().Body.(*amqp.Attach)
		d, dok := c.readFrame().Body.(*amqp.Detach)
		if !ok || a.Handle != h || a.Source != nil || !dok || d.Handle != h || d.Error == nil {
			t.Fatalf("handle %d: %+v then %+v, want a refusal", h, a, d)
		}
	}
	for h := range uint32(2) {
		attach(h, "q")
		if a, ok := c.readFrame().Body.(*amqp.Attach); !ok || a.Source == nil {
			t.Fatalf("link %d refused", h)
		}
	}
	var burst []byte
	for h := uint32(2); h < 1000; h++ {
		addr := "q"
		if h%2 == 1 {
			addr = "missing" // refused for another reason: not found
		}
		b, err := amqp.AppendFrame(nil, amqp.Frame{Type: amqp.FrameTypeAMQP, Body: &amqp.Attach{Name: fmt.Sprint("l", h), Handle: h,
			Role: amqp.RoleReceiver, Source: &amqp.Source{Address: addr}, Target: &amqp.Target{Address: "raw"}}})
		if err != nil {
			t.Fatal(err)
		}
		burst = append(burst, b...)
	}
	c.write(burst)
	for h := uint32(2); h < 1000; h++ {
		refused(h)
	}
	if n := w.srv.linkCount(c.nc.LocalAddr(), 0); n != 2 {
		t.Fatalf("the session holds %d links after 998 refusals, want the 2 attached", n)
	}
	// A flow the client sent before it saw the refusal is ignored.
	c.writeFrame(amqp.FrameTypeAMQP, 0, &amqp.Flow{NextIncomingID: amqp.Ptr(uint32(0)), IncomingWindow: 100, OutgoingWindow: 100,
		Handle: amqp.Ptr(uint32(5)), DeliveryCount: amqp.Ptr(uint32(0)), LinkCredit: amqp.Ptr(uint32(10))}, nil)
	// The client's detach frees a refused handle: attached again (over the limit), it
	// is refused again rather than "in use".
	c.writeFrame(amqp.FrameTypeAMQP, 0, &amqp.Detach{Handle: 7, Closed: true}, nil)
	attach(7, "q")
	refused(7)
	// Still in use until the client's detach: the connection is closed with
	// amqp:session:handle-in-use.
	attach(9, "q")
	if cond := c.expectClose(); cond != condHandleInUse {
		t.Fatalf("attach on a refused handle not detached: %s, want %s", cond, condHandleInUse)
	}
	w.healthyClient(t, "q")(t)
}
