package sbtest

import (
	"context"
	"net"
	"strings"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
)

// NewTestServer serves for the test that made it and is closed when that test ends,
// after the cleanups registered later (the client's here).
func TestNewTestServerClosesWithItsTest(t *testing.T) {
	var srv *Server
	t.Run("serves", func(t *testing.T) {
		srv = NewTestServer(t, &ServerOptions{Queues: map[string]*EntityOptions{"q": nil}})
		client, err := azservicebus.NewClientFromConnectionString(srv.ConnectionString(), nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = client.Close(context.Background()) })
		s, err := client.NewSender("q", nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.SendMessage(wireCtx(t), &azservicebus.Message{Body: []byte("m")}, nil); err != nil {
			t.Fatal(err)
		}
	})
	if q, _ := srv.Namespace().Entity("q"); q.Counts().Active != 1 {
		t.Fatal("the message did not arrive")
	}
	if c, err := net.Dial("tcp", srv.Addr().String()); err == nil {
		c.Close()
		t.Fatal("the server still listens after its test ended")
	}
}

// A server that cannot start fails the test, with the reason.
func TestNewTestServerBadOptions(t *testing.T) {
	rec := &recordingTB{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		NewTestServer(rec, &ServerOptions{MaxFrameSize: 100})
		t.Error("NewTestServer returned")
	}()
	<-done
	if !strings.Contains(rec.fatal, ErrInvalidOptions.Error()) || !strings.Contains(rec.fatal, "MaxFrameSize") {
		t.Fatalf("Fatal(%q), want ErrInvalidOptions naming MaxFrameSize", rec.fatal)
	}
}
