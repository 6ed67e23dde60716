package sbtest

import (
	"io"
	"net"
	"testing"
	"time"

	"github.com/sbkit/sbkit/sbtest/internal/amqp"
)

func fuzzFrames(t testing.TB, frames ...amqp.Performative) []byte {
	var b []byte
	for _, f := range frames {
		var err error
		b, err = amqp.AppendFrame(b, amqp.Frame{Type: amqp.FrameTypeAMQP, Body: f})
		if err != nil {
			t.Fatal(err)
		}
	}
	return b
}

// FuzzServerFrames feeds arbitrary bytes to a connection after a valid open: whatever
// they are, the server must neither panic nor stop serving other connections.
func FuzzServerFrames(f *testing.F) {
	msg, _ := (&amqp.Message{Data: [][]byte{[]byte("x")}}).MarshalBinary()
	transfer, _ := amqp.AppendFrame(nil, amqp.Frame{Type: amqp.FrameTypeAMQP, Body: &amqp.Transfer{Handle: 0,
		DeliveryID: amqp.Ptr(uint32(0)), DeliveryTag: []byte("t"), MessageFormat: amqp.Ptr(uint32(0))}, Payload: msg})
	begin := &amqp.Begin{IncomingWindow: 10, OutgoingWindow: 10}
	f.Add([]byte{})
	f.Add([]byte{0, 0, 0, 8, 2, 0, 0, 0})
	f.Add(fuzzFrames(f, begin))
	f.Add(append(fuzzFrames(f, begin, &amqp.Attach{Name: "s", Role: amqp.RoleSender, Target: &amqp.Target{Address: "q"}}), transfer...))
	f.Add(fuzzFrames(f, begin, &amqp.Attach{Name: "r", Role: amqp.RoleReceiver, Source: &amqp.Source{Address: "t/Subscriptions/s"}},
		&amqp.Flow{IncomingWindow: 10, NextOutgoingID: 0, OutgoingWindow: 10, Handle: amqp.Ptr(uint32(0)), LinkCredit: amqp.Ptr(uint32(5)), Drain: true},
		&amqp.Disposition{Role: amqp.RoleReceiver, First: 0, Last: amqp.Ptr(uint32(1 << 31)), State: &amqp.Accepted{}},
		&amqp.Detach{Handle: 0, Closed: true}, &amqp.End{}))
	f.Add(fuzzFrames(f, begin, &amqp.Attach{Name: "m", Role: amqp.RoleSender, Target: &amqp.Target{Address: "q/$management"}}, &amqp.Close{}))
	req, _ := (&amqp.Message{
		Properties:            &amqp.Properties{MessageID: "1", ReplyTo: amqp.Ptr("r")},
		ApplicationProperties: amqp.Map{{Key: "operation", Value: "com.microsoft:renew-lock"}},
		Value:                 amqp.Map{{Key: "lock-tokens", Value: []any{"not", "uuids"}}}, HasValue: true,
	}).MarshalBinary()
	reqTransfer, _ := amqp.AppendFrame(nil, amqp.Frame{Type: amqp.FrameTypeAMQP, Body: &amqp.Transfer{Handle: 0,
		DeliveryID: amqp.Ptr(uint32(0)), DeliveryTag: []byte("t"), MessageFormat: amqp.Ptr(uint32(0))}, Payload: req})
	f.Add(append(fuzzFrames(f, begin,
		&amqp.Attach{Name: "m", Role: amqp.RoleSender, Target: &amqp.Target{Address: "q/$management"}},
		&amqp.Attach{Name: "n", Handle: 1, Role: amqp.RoleReceiver, Source: &amqp.Source{Address: "q/$management"}, Target: &amqp.Target{Address: "r"}},
		&amqp.Flow{IncomingWindow: 10, NextOutgoingID: 0, OutgoingWindow: 10, Handle: amqp.Ptr(uint32(1)), LinkCredit: amqp.Ptr(uint32(5))},
	), reqTransfer...))
	f.Fuzz(func(t *testing.T, data []byte) {
		srv := NewTestServer(t, &ServerOptions{
			Queues: map[string]*EntityOptions{"q": nil},
			Topics: map[string]TopicOptions{"t": {Subscriptions: map[string]*EntityOptions{"s": nil}}},
		})
		c := dialRaw(t, srv)
		c.open()
		_, _ = c.nc.Write(data)
		// The server answers, closes the connection, or waits for more: all fine.
		_ = c.nc.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
		_, _ = io.Copy(io.Discard, c.br)
		_ = c.nc.Close()

		// Another connection still gets through the handshake.
		healthy := dialRaw(t, srv)
		healthy.open()
		_ = healthy.nc.(*net.TCPConn).Close()
	})
}
