package sbtest

import (
	"context"
	"log/slog"
	"os"
	"runtime"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
)

// wireTimeout bounds every wire operation of the server tests: generous, since a loaded
// 2-core machine can be slow, while a passing test takes milliseconds.
const wireTimeout = 20 * time.Second

// wired is a server and a real SDK client connected to it.
type wired struct {
	srv    *Server
	client *azservicebus.Client
}

// newWire starts a server with opts and connects a client; both are closed at the end of
// the test.
func newWire(t *testing.T, opts *ServerOptions) *wired {
	t.Helper()
	if os.Getenv("SBTEST_SERVER_LOG") != "" {
		o := ServerOptions{}
		if opts != nil {
			o = *opts
		}
		o.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
		opts = &o
	}
	srv := NewTestServer(t, opts)
	client, err := azservicebus.NewClientFromConnectionString(srv.ConnectionString(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { // before the server's cleanup, registered earlier
		ctx, cancel := context.WithTimeout(context.Background(), wireTimeout)
		defer cancel()
		_ = client.Close(ctx)
	})
	return &wired{srv: srv, client: client}
}

// oneConnection fails the test if the client had to reconnect: an answer the SDK did not
// like (a settlement confirmed with an error, a malformed response) makes it drop the
// connection and retry, which hides the error from the caller.
func (w *wired) oneConnection(t *testing.T) {
	t.Helper()
	if n := w.srv.w.ConnsOpened(); n != 1 {
		t.Fatalf("the client opened %d connections, want 1", n)
	}
}

func wireCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), wireTimeout)
	t.Cleanup(cancel)
	return ctx
}

func (w *wired) sender(t *testing.T, queueOrTopic string) *azservicebus.Sender {
	t.Helper()
	s, err := w.client.NewSender(queueOrTopic, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close(context.Background()) })
	return s
}

func (w *wired) receiver(t *testing.T, queue string, opts *azservicebus.ReceiverOptions) *azservicebus.Receiver {
	t.Helper()
	r, err := w.client.NewReceiverForQueue(queue, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close(context.Background()) })
	return r
}

// receiveN receives until n messages arrived, failing the test after wireTimeout.
func receiveN(t *testing.T, r interface {
	ReceiveMessages(context.Context, int, *azservicebus.ReceiveMessagesOptions) ([]*azservicebus.ReceivedMessage, error)
}, n int) []*azservicebus.ReceivedMessage {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wireTimeout)
	defer cancel()
	var out []*azservicebus.ReceivedMessage
	for len(out) < n {
		ms, err := r.ReceiveMessages(ctx, n-len(out), nil)
		if err != nil {
			t.Fatalf("receive (%d of %d so far): %v", len(out), n, err)
		}
		out = append(out, ms...)
	}
	return out
}

// eventually polls cond until it holds, failing the test after wireTimeout.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	Eventually(t, wireTimeout, what, cond)
}

// noGoroutinesAbove fails the test unless the number of goroutines drops to at most
// base within wireTimeout.
func noGoroutinesAbove(t *testing.T, base int) {
	t.Helper()
	deadline := time.Now().Add(wireTimeout)
	for runtime.NumGoroutine() > base {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			n := runtime.Stack(buf, true)
			t.Fatalf("%d goroutines left, want at most %d:\n%s", runtime.NumGoroutine(), base, buf[:n])
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// healthyClient returns a round trip (send, then receive-and-delete) of the wire's SDK
// client on queue, which fails the test unless it works: a healthy client keeps working
// while others misbehave.
func (w *wired) healthyClient(t *testing.T, queue string) func(t *testing.T) {
	ctx := wireCtx(t)
	s := w.sender(t, queue)
	r := w.receiver(t, queue, &azservicebus.ReceiverOptions{ReceiveMode: azservicebus.ReceiveModeReceiveAndDelete})
	return func(t *testing.T) {
		t.Helper()
		if err := s.SendMessage(ctx, &azservicebus.Message{Body: []byte("ok")}, nil); err != nil {
			t.Fatalf("healthy client: %v", err)
		}
		if m := receiveN(t, r, 1)[0]; string(m.Body) != "ok" {
			t.Fatalf("healthy client received %q", m.Body)
		}
	}
}

// sendN sends n one-byte messages to queue with the wire's SDK client.
func (w *wired) sendN(t *testing.T, queue string, n int) {
	t.Helper()
	ctx := wireCtx(t)
	s := w.sender(t, queue)
	for range n {
		if err := s.SendMessage(ctx, &azservicebus.Message{Body: []byte("m")}, nil); err != nil {
			t.Fatal(err)
		}
	}
}
