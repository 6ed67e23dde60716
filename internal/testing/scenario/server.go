package scenario

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/sbkit/sbkit/sbtest"
)

// Server is the backend of [sbtest.NewServer] reached by the real [*azservicebus.Client]
// over AMQP on loopback: the same in-memory entity model as Memory, but every operation
// goes through the SDK, go-amqp and the server's protocol handling. Every scenario gets a
// new queue, created in the server's Namespace, and all share one client connection.
type Server struct {
	srv    *sbtest.Server
	client *azservicebus.Client
	n      atomic.Int64
}

// NewServer starts a server and connects a client to it; both are closed when t ends.
// The client retries quickly (a few times, up to half a second apart): the server is on
// loopback, and a scenario that needs the SDK's retries to pass has found a bug.
func NewServer(t *testing.T) *Server {
	t.Helper()
	srv := sbtest.NewTestServer(t, nil)
	client, err := azservicebus.NewClientFromConnectionString(srv.ConnectionString(), &azservicebus.ClientOptions{
		RetryOptions: azservicebus.RetryOptions{MaxRetries: 3, RetryDelay: 50 * time.Millisecond, MaxRetryDelay: 500 * time.Millisecond},
	})
	if err != nil {
		t.Fatalf("client for %s: %v", srv.ConnectionString(), err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), closeTimeout)
		defer cancel()
		if err := client.Close(ctx); err != nil {
			t.Errorf("client Close: %v", err)
		}
	})
	return &Server{srv: srv, client: client}
}

// Name returns "server".
func (s *Server) Name() string { return "server" }

// Parallel returns true: every scenario has its own queue.
func (s *Server) Parallel() bool { return true }

// Queue creates a new queue with opts in the server's Namespace.
func (s *Server) Queue(t *testing.T, opts QueueOptions) Queue {
	t.Helper()
	name, props := createQueue(t, s.srv.Namespace(), &s.n, opts)
	return &sdkQueue{client: s.client, name: name, props: props}
}

// MissingQueue returns a name no queue of the server's namespace has.
func (s *Server) MissingQueue(t *testing.T) MissingQueue {
	return sdkMissingQueue(s.client, fmt.Sprintf("missing-%d", s.n.Add(1)))
}
