package sbtest

import (
	"context"
	"errors"
	"net"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	goamqp "github.com/Azure/go-amqp"
	"github.com/sbkit/sbkit/sbtest/internal/wire"
)

// pipeListener is a listener of in-memory connections (net.Pipe), so that a server and
// its clients can run inside a synctest bubble, where a goroutine blocked on a socket
// would keep the fake clock from moving.
type pipeListener struct {
	conns chan net.Conn
	done  chan struct{}
	once  sync.Once
}

func newPipeListener() *pipeListener {
	return &pipeListener{conns: make(chan net.Conn), done: make(chan struct{})}
}

func (l *pipeListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *pipeListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

func (l *pipeListener) Addr() net.Addr { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 5672} }

// dial returns the client's end of a new connection the listener accepts.
func (l *pipeListener) dial() net.Conn {
	client, server := net.Pipe()
	l.conns <- server
	return client
}

// A link lives as long as a token on $cbs covers its entity: when the last one expires,
// the server detaches it with amqp:unauthorized-access, as the service "promptly drops
// all links on the connection to the respective entity" (AMQP protocol guide, "Token
// renewal"); a token put again before then keeps it.
func TestServerDropsLinksWhenTheirTokenExpires(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ln := newPipeListener()
		srv, err := newServer(&ServerOptions{Queues: map[string]*EntityOptions{"q": nil, "other": nil},
			SASKeys: map[string]string{"k": "secret"}}, ln)
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		conn, err := goamqp.NewConn(ctx, ln.dial(), &goamqp.ConnOptions{SASLType: goamqp.SASLTypeAnonymous(), HostName: "127.0.0.1"})
		if err != nil {
			t.Fatal(err)
		}
		defer func() {
			_ = conn.Close()
			if err := srv.Close(ctx); err != nil {
				t.Error(err)
			}
		}()
		sess, err := conn.NewSession(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		cbsOut, err := sess.NewSender(ctx, cbsNode, nil)
		if err != nil {
			t.Fatal(err)
		}
		cbsIn, err := sess.NewReceiver(ctx, cbsNode, &goamqp.ReceiverOptions{TargetAddress: "cbs-replies"})
		if err != nil {
			t.Fatal(err)
		}
		put := func(entity string, life time.Duration) {
			t.Helper()
			audience := "sb://127.0.0.1/" + entity
			err := cbsOut.Send(ctx, &goamqp.Message{
				Properties: &goamqp.MessageProperties{MessageID: entity, ReplyTo: ptr("cbs-replies")},
				ApplicationProperties: map[string]any{"operation": opPutToken, "type": "servicebus.windows.net:sastoken",
					"name": audience},
				Value: wire.SignSAS("k", "secret", audience, time.Now().Add(life).Unix()),
			}, nil)
			if err != nil {
				t.Fatal(err)
			}
			m, err := cbsIn.Receive(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			_ = cbsIn.AcceptMessage(ctx, m)
			if code := m.ApplicationProperties["status-code"]; code != int32(202) {
				t.Fatalf("put-token for %s: %v %v", entity, code, m.ApplicationProperties["status-description"])
			}
		}
		put("q", 10*time.Minute)
		put("other", time.Hour)
		snd, err := sess.NewSender(ctx, "q", nil)
		if err != nil {
			t.Fatal(err)
		}
		rcv, err := sess.NewReceiver(ctx, "q", &goamqp.ReceiverOptions{Credit: 10})
		if err != nil {
			t.Fatal(err)
		}
		other, err := sess.NewSender(ctx, "other", nil)
		if err != nil {
			t.Fatal(err)
		}
		send := func(s *goamqp.Sender) error {
			return s.Send(ctx, &goamqp.Message{Data: [][]byte{[]byte("x")}}, nil)
		}

		time.Sleep(8 * time.Minute)
		put("q", 10*time.Minute) // renewed: now valid until 18 min
		time.Sleep(5 * time.Minute)
		synctest.Wait()
		if err := send(snd); err != nil {
			t.Fatalf("send 13 min in, its token renewed at 8 min for 10: %v", err)
		}
		if m, err := rcv.Receive(ctx, nil); err != nil {
			t.Fatalf("receive 13 min in: %v", err)
		} else if err := rcv.AcceptMessage(ctx, m); err != nil {
			t.Fatal(err)
		}

		time.Sleep(6 * time.Minute) // 19 min: the renewed token expired too
		synctest.Wait()
		var le *goamqp.LinkError
		if err := send(snd); !errors.As(err, &le) || le.RemoteErr == nil || le.RemoteErr.Condition != goamqp.ErrCondUnauthorizedAccess {
			t.Errorf("send after its token expired: %v, want the link detached with %s", err, goamqp.ErrCondUnauthorizedAccess)
		}
		if _, err := rcv.Receive(ctx, nil); !errors.As(err, &le) || le.RemoteErr == nil || le.RemoteErr.Condition != goamqp.ErrCondUnauthorizedAccess {
			t.Errorf("receive after its token expired: %v, want the link detached with %s", err, goamqp.ErrCondUnauthorizedAccess)
		}
		if err := send(other); err != nil {
			t.Errorf("send to an entity whose token is valid: %v", err)
		}
		if _, err := sess.NewSender(ctx, "q", nil); err == nil {
			t.Error("a new link to q attached without a valid token")
		}
	})
}
