package amqp

// The go-amqp client (the SDK's AMQP stack) against a scripted peer built on this codec,
// over net.Pipe: SASL ANONYMOUS, open, begin, sender and receiver links, single- and
// multi-frame transfers, a batch, dispositions with every outcome, detach, end, close.
// Every frame the client sends is decoded here, and every frame sent here is decoded by
// the client.

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	goamqp "github.com/Azure/go-amqp"
)

// scriptedPeer is the server side of TestGoAMQPClient.
type scriptedPeer struct {
	conn    net.Conn
	capture bytes.Buffer // raw bytes of the frame being read
	frames  [][]byte     // raw frames read, for fuzz seeds

	mu          sync.Mutex
	received    []*Message      // messages (batches split) the client sent
	formats     []uint32        // message-format of each delivery
	tags        [][]byte        // delivery tag of each delivery
	filters     []Map           // source filters of the client's receiver attaches
	outcomes    []DeliveryState // states of the client's dispositions
	senderModes []*SenderSettleMode
	toSend      []*Message // messages for the client's receiver link
}

func (p *scriptedPeer) read() (Frame, error) {
	for {
		p.capture.Reset()
		f, err := ReadFrame(ioTee{p.conn, &p.capture}, 1<<16)
		if err != nil {
			return f, err
		}
		p.frames = append(p.frames, bytes.Clone(p.capture.Bytes()))
		if f.Body != nil {
			return f, nil
		}
	}
}

// ioTee copies what is read from r into w.
type ioTee struct {
	r net.Conn
	w *bytes.Buffer
}

func (t ioTee) Read(b []byte) (int, error) {
	n, err := t.r.Read(b)
	t.w.Write(b[:n])
	return n, err
}

func (p *scriptedPeer) write(f Frame) error {
	b, err := AppendFrame(nil, f)
	if err != nil {
		return err
	}
	_, err = p.conn.Write(b)
	return err
}

func expect[T Performative](p *scriptedPeer) (T, uint16, error) {
	var zero T
	f, err := p.read()
	if err != nil {
		return zero, 0, err
	}
	v, ok := f.Body.(T)
	if !ok {
		return zero, 0, fmt.Errorf("got %T, want %T", f.Body, zero)
	}
	return v, f.Channel, nil
}

func (p *scriptedPeer) run() error {
	_ = p.conn.SetDeadline(time.Now().Add(20 * time.Second))
	// SASL layer.
	if h, err := ReadProtoHeader(p.conn); err != nil || string(h[:]) != ProtoHeaderSASL {
		return fmt.Errorf("SASL header %q: %v", h, err)
	}
	if _, err := p.conn.Write([]byte(ProtoHeaderSASL)); err != nil {
		return err
	}
	if err := p.write(Frame{Type: FrameTypeSASL, Body: &SASLMechanisms{Mechanisms: []Symbol{"MSSBCBS", "ANONYMOUS"}}}); err != nil {
		return err
	}
	init, _, err := expect[*SASLInit](p)
	if err != nil {
		return err
	}
	if init.Mechanism != "ANONYMOUS" {
		return fmt.Errorf("mechanism %q", init.Mechanism)
	}
	if err := p.write(Frame{Type: FrameTypeSASL, Body: &SASLOutcome{Code: SASLCodeOK}}); err != nil {
		return err
	}
	// AMQP layer.
	if h, err := ReadProtoHeader(p.conn); err != nil || string(h[:]) != ProtoHeaderAMQP {
		return fmt.Errorf("AMQP header %q: %v", h, err)
	}
	if _, err := p.conn.Write([]byte(ProtoHeaderAMQP)); err != nil {
		return err
	}
	open, _, err := expect[*Open](p)
	if err != nil {
		return err
	}
	if open.ContainerID != "client-1" || open.Hostname != "sbtest.local" {
		return fmt.Errorf("open = %+v", open)
	}
	// A small max-frame-size makes the client split large transfers.
	if err := p.write(Frame{Body: &Open{ContainerID: "peer", MaxFrameSize: Ptr(uint32(1024)), ChannelMax: Ptr(uint16(7)),
		Properties: Map{{Symbol("product"), "sbtest"}}}}); err != nil {
		return err
	}
	begin, ch, err := expect[*Begin](p)
	if err != nil {
		return err
	}
	if err := p.write(Frame{Channel: ch, Body: &Begin{RemoteChannel: &ch, NextOutgoingID: 0,
		IncomingWindow: 5000, OutgoingWindow: 5000, HandleMax: Ptr(uint32(63))}}); err != nil {
		return err
	}
	_ = begin
	var nextOut uint32  // delivery-id of the next transfer sent here
	var partial []byte  // payload of an incomplete multi-frame delivery
	var first *Transfer // first frame of the delivery being received
	for {
		f, err := p.read()
		if err != nil {
			return err
		}
		switch b := f.Body.(type) {
		case *Attach:
			reply := &Attach{Name: b.Name, Handle: b.Handle, Role: !b.Role, SndSettleMode: b.SndSettleMode,
				RcvSettleMode: b.RcvSettleMode, Source: b.Source, Target: b.Target, MaxMessageSize: 1 << 20}
			if err := p.write(Frame{Channel: ch, Body: reply}); err != nil {
				return err
			}
			if b.Role == RoleSender {
				p.mu.Lock()
				p.senderModes = append(p.senderModes, b.SndSettleMode)
				p.mu.Unlock()
				if err := p.write(Frame{Channel: ch, Body: &Flow{NextIncomingID: Ptr(uint32(0)), IncomingWindow: 5000,
					NextOutgoingID: nextOut, OutgoingWindow: 5000, Handle: &b.Handle, DeliveryCount: Ptr(uint32(0)),
					LinkCredit: Ptr(uint32(100))}}); err != nil {
					return err
				}
			} else {
				p.mu.Lock()
				p.filters = append(p.filters, b.Source.Filter)
				p.mu.Unlock()
			}
		case *Flow:
			if b.Handle == nil || b.LinkCredit == nil || *b.LinkCredit == 0 {
				continue
			}
			p.mu.Lock()
			msgs := p.toSend
			p.toSend = nil
			p.mu.Unlock()
			for _, m := range msgs {
				payload, err := m.MarshalBinary()
				if err != nil {
					return err
				}
				tag := UUID{byte(nextOut), 0xaa}
				if err := p.write(Frame{Channel: ch, Body: &Transfer{Handle: *b.Handle, DeliveryID: Ptr(nextOut),
					DeliveryTag: tag[:], MessageFormat: Ptr(uint32(0))}, Payload: payload}); err != nil {
					return err
				}
				nextOut++
			}
		case *Transfer:
			if first == nil {
				first = b
			}
			partial = append(partial, f.Payload...)
			if b.More {
				continue
			}
			var m Message
			if err := m.UnmarshalBinary(partial); err != nil {
				return fmt.Errorf("client's message: %w", err)
			}
			partial = nil
			format := uint32(0)
			if first.MessageFormat != nil {
				format = *first.MessageFormat
			}
			msgs := []*Message{&m}
			if format == MessageFormatBatch {
				if msgs, err = SplitBatch(&m); err != nil {
					return err
				}
			}
			p.mu.Lock()
			p.received = append(p.received, msgs...)
			p.formats = append(p.formats, format)
			p.tags = append(p.tags, first.DeliveryTag)
			p.mu.Unlock()
			id := *first.DeliveryID
			first = nil
			if !b.Settled {
				if err := p.write(Frame{Channel: ch, Body: &Disposition{Role: RoleReceiver, First: id,
					Settled: true, State: &Accepted{}}}); err != nil {
					return err
				}
			}
		case *Disposition:
			p.mu.Lock()
			p.outcomes = append(p.outcomes, b.State)
			p.mu.Unlock()
			if !b.Settled {
				state := b.State
				if _, ok := state.(*Rejected); ok {
					state = &Rejected{} // go-amqp reports a confirmed rejection's error as the settle error
				}
				if err := p.write(Frame{Channel: ch, Body: &Disposition{Role: RoleSender, First: b.First, Last: b.Last,
					Settled: true, State: state}}); err != nil {
					return err
				}
			}
		case *Detach:
			if err := p.write(Frame{Channel: ch, Body: &Detach{Handle: b.Handle, Closed: true}}); err != nil {
				return err
			}
		case *End:
			if err := p.write(Frame{Channel: ch, Body: &End{}}); err != nil {
				return err
			}
		case *Close:
			// go-amqp closes the connection right after its close frame without waiting
			// for this answer (part 2.4.3 allows it), so a failed write is expected.
			_ = p.write(Frame{Body: &Close{}})
			return nil
		default:
			return fmt.Errorf("unexpected %T", b)
		}
	}
}

func TestGoAMQPClient(t *testing.T) {
	now := time.UnixMilli(1700000000123).UTC()
	cli, srv := net.Pipe()
	peer := &scriptedPeer{conn: srv}
	for i, outcome := range []string{"dead-letter", "abandon", "complete"} {
		peer.toSend = append(peer.toSend, &Message{
			Header: &Header{DeliveryCount: uint32(i)},
			MessageAnnotations: Map{
				{Symbol("x-opt-sequence-number"), int64(i + 1)},
				{Symbol("x-opt-enqueued-time"), now},
				{Symbol("x-opt-locked-until"), now.Add(time.Minute)},
			},
			Properties:            &Properties{MessageID: fmt.Sprintf("m%d", i)},
			ApplicationProperties: Map{{"outcome", outcome}},
			Data:                  [][]byte{[]byte("to the client " + outcome)},
		})
	}
	peerErr := make(chan error, 1)
	go func() {
		err := peer.run()
		srv.Close()
		peerErr <- err
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	fail := func(step string, err error) {
		t.Helper()
		cli.Close()
		t.Fatalf("%s: %v (peer: %v)", step, err, <-peerErr)
	}

	conn, err := goamqp.NewConn(ctx, cli, &goamqp.ConnOptions{ContainerID: "client-1", HostName: "sbtest.local",
		SASLType: goamqp.SASLTypeAnonymous(), Properties: map[string]any{"user-agent": "test"}})
	if err != nil {
		fail("NewConn", err)
	}
	sess, err := conn.NewSession(ctx, nil)
	if err != nil {
		fail("NewSession", err)
	}
	snd, err := sess.NewSender(ctx, "queue", &goamqp.SenderOptions{SettlementMode: goamqp.SenderSettleModeMixed.Ptr(),
		Properties: map[string]any{"com.microsoft:timeout": uint32(60000)}})
	if err != nil {
		fail("NewSender", err)
	}
	if got := snd.MaxMessageSize(); got != 1<<20 {
		t.Errorf("sender MaxMessageSize = %d, want the peer's 1 MiB", got)
	}
	sent := &goamqp.Message{
		Annotations:           goamqp.Annotations{"x-opt-partition-key": "pk", "x-opt-scheduled-enqueue-time": now},
		Properties:            &goamqp.MessageProperties{MessageID: "single"},
		ApplicationProperties: map[string]any{"k": "v"},
		Data:                  [][]byte{[]byte("hello")},
	}
	if err := snd.Send(ctx, sent, nil); err != nil {
		fail("Send", err)
	}
	big := &goamqp.Message{Properties: &goamqp.MessageProperties{MessageID: "big"}, Data: [][]byte{bytes.Repeat([]byte("b"), 5000)}}
	if err := snd.Send(ctx, big, nil); err != nil {
		fail("Send big", err)
	}
	var batchData [][]byte
	for _, id := range []string{"b1", "b2"} {
		b, err := (&goamqp.Message{Properties: &goamqp.MessageProperties{MessageID: id}, Data: [][]byte{[]byte(id)}}).MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		batchData = append(batchData, b)
	}
	batch := &goamqp.Message{Format: MessageFormatBatch, Properties: &goamqp.MessageProperties{MessageID: "b1"}, Data: batchData}
	if err := snd.Send(ctx, batch, nil); err != nil {
		fail("Send batch", err)
	}

	rcv, err := sess.NewReceiver(ctx, "queue", &goamqp.ReceiverOptions{Credit: 10,
		SettlementMode: goamqp.ReceiverSettleModeSecond.Ptr(),
		Filters:        []goamqp.LinkFilter{goamqp.NewSelectorFilter("a = 1")}})
	if err != nil {
		fail("NewReceiver", err)
	}
	for i := range 3 {
		m, err := rcv.Receive(ctx, nil)
		if err != nil {
			fail("Receive", err)
		}
		if m.Properties.MessageID != fmt.Sprintf("m%d", i) || m.Annotations["x-opt-sequence-number"] != int64(i+1) ||
			!m.Annotations["x-opt-enqueued-time"].(time.Time).Equal(now) || m.Header.DeliveryCount != uint32(i) {
			t.Errorf("received %+v", m)
		}
		if len(m.DeliveryTag) != 16 || m.DeliveryTag[1] != 0xaa {
			t.Errorf("delivery tag % x", m.DeliveryTag)
		}
		switch m.ApplicationProperties["outcome"] {
		case "dead-letter":
			err = rcv.RejectMessage(ctx, m, &goamqp.Error{Condition: "com.microsoft:dead-letter", Description: "desc",
				Info: map[string]any{"DeadLetterReason": "reason"}})
		case "abandon":
			err = rcv.ModifyMessage(ctx, m, &goamqp.ModifyMessageOptions{UndeliverableHere: true,
				Annotations: goamqp.Annotations{"x": int64(1)}})
		default:
			err = rcv.AcceptMessage(ctx, m)
		}
		if err != nil {
			fail("settle", err)
		}
	}
	for _, c := range []func(context.Context) error{rcv.Close, snd.Close, sess.Close} {
		if err := c(ctx); err != nil {
			fail("close", err)
		}
	}
	if err := conn.Close(); err != nil {
		// Diagnostic only (go-amqp's words): its reader sees the pipe close.
		t.Logf("conn.Close: %v", err)
	}
	if err := <-peerErr; err != nil {
		t.Fatalf("peer: %v", err)
	}

	// What the peer saw.
	var ids []string
	for _, m := range peer.received {
		ids = append(ids, m.Properties.MessageID.(string))
	}
	if fmt.Sprint(ids) != "[single big b1 b2]" {
		t.Errorf("messages %v", ids)
	}
	if fmt.Sprint(peer.formats) != fmt.Sprint([]uint32{0, 0, MessageFormatBatch}) {
		t.Errorf("formats %v", peer.formats)
	}
	// go-amqp's delivery tags: an 8-byte big-endian counter per link.
	if fmt.Sprint(peer.tags) != "[[0 0 0 0 0 0 0 0] [0 0 0 0 0 0 0 1] [0 0 0 0 0 0 0 2]]" {
		t.Errorf("delivery tags %v", peer.tags)
	}
	first := peer.received[0]
	if v, _ := first.MessageAnnotations.Get(Symbol("x-opt-partition-key")); v != "pk" {
		t.Errorf("annotations %#v", first.MessageAnnotations)
	}
	if v, _ := first.MessageAnnotations.Get(Symbol("x-opt-scheduled-enqueue-time")); v != now {
		t.Errorf("scheduled time %#v", v)
	}
	if len(peer.received[1].Data[0]) != 5000 {
		t.Errorf("big message body %d bytes", len(peer.received[1].Data[0]))
	}
	if len(peer.filters) != 1 {
		t.Fatalf("filters %#v", peer.filters)
	}
	sel, _ := peer.filters[0].Get(Symbol("apache.org:selector-filter:string"))
	if d, ok := sel.(*Described); !ok || d.Descriptor != uint64(0x0000468C00000004) || d.Value != "a = 1" {
		t.Errorf("selector filter %#v", sel)
	}
	if len(peer.outcomes) != 3 {
		t.Fatalf("outcomes %#v", peer.outcomes)
	}
	if r, ok := peer.outcomes[0].(*Rejected); !ok || r.Error.Condition != "com.microsoft:dead-letter" || r.Error.Description != "desc" {
		t.Errorf("dead-letter outcome %#v", peer.outcomes[0])
	} else if v, _ := r.Error.Info.Get("DeadLetterReason"); v != "reason" {
		// go-amqp writes the info keys of an error as strings, not symbols.
		t.Errorf("dead-letter info %#v", r.Error.Info)
	}
	if m, ok := peer.outcomes[1].(*Modified); !ok || !m.UndeliverableHere || m.DeliveryFailed {
		t.Errorf("modify outcome %#v", peer.outcomes[1])
	}
	if _, ok := peer.outcomes[2].(*Accepted); !ok {
		t.Errorf("accept outcome %#v", peer.outcomes[2])
	}
	if len(peer.senderModes) != 1 || peer.senderModes[0] == nil || *peer.senderModes[0] != SenderSettleMixed {
		t.Errorf("sender settle modes %v", peer.senderModes)
	}

	// SBKIT_AMQP_CAPTURE=dir writes the client's frames as FuzzReadFrame seeds.
	if dir := os.Getenv("SBKIT_AMQP_CAPTURE"); dir != "" {
		for i, fr := range peer.frames {
			name := filepath.Join(dir, fmt.Sprintf("goamqp-client-%02d", i))
			if err := os.WriteFile(name, fmt.Appendf(nil, "go test fuzz v1\n[]byte(%q)\n", fr), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
}
