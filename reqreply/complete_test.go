package reqreply_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/sbkit/sbkit/reqreply"
	"github.com/sbkit/sbkit/sbtest"
)

// TestReplyReturnedWhenCompleteFails: once the reply is received the request has been
// answered, and Request returns the reply whatever becomes of completing it (an error
// would make a caller that retries run the request twice). A transient failure is
// retried and the reply completed; one that lasts returns the reply with a nil error and
// is reported to the hooks and the log.
func TestReplyReturnedWhenCompleteFails(t *testing.T) {
	tests := []struct {
		name          string
		fault         sbtest.Fault
		wantCompleted int64
		wantReported  int
	}{
		{"transient", sbtest.Fault{Op: sbtest.OpComplete, Count: 1}, 1, 0},
		{"permanent", sbtest.Fault{Op: sbtest.OpComplete, Count: 1, Err: sbtest.PermanentError}, 0, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				b := newBroker(t)
				b.replies.InjectFault(tt.fault)
				var mu sync.Mutex
				var reported []error
				hook := notCompletedFunc(func(reply *azservicebus.ReceivedMessage, err error) {
					mu.Lock()
					reported = append(reported, err)
					mu.Unlock()
				})
				s, err := b.ns.NewSender("requests", nil)
				if err != nil {
					t.Fatal(err)
				}
				req, err := reqreply.NewRequester(s, b.ns.QueueSessionAcceptor("replies", nil), "replies",
					&reqreply.RequesterOptions{Hooks: []reqreply.Hook{hook}})
				if err != nil {
					t.Fatal(err)
				}
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				var runs atomic.Int32
				resp := b.responder(t)
				h, err := resp.Handler(func(ctx context.Context, m *azservicebus.ReceivedMessage) (*azservicebus.Message, error) {
					runs.Add(1)
					return &azservicebus.Message{Body: []byte("answer")}, nil
				})
				if err != nil {
					t.Fatal(err)
				}
				var wg sync.WaitGroup
				wg.Go(func() { b.serve(t, ctx, 1, h) })
				reply, err := req.Request(ctx, &azservicebus.Message{Body: []byte("q")})
				wg.Wait()
				if err != nil || reply == nil || string(reply.Body) != "answer" {
					t.Fatalf("Request = %v, %v; want the reply and no error", reply, err)
				}
				if runs.Load() != 1 {
					t.Fatalf("the request ran %d times", runs.Load())
				}
				if got := b.replies.Stats().Completed; got != tt.wantCompleted {
					t.Errorf("%d replies completed, want %d", got, tt.wantCompleted)
				}
				mu.Lock()
				defer mu.Unlock()
				if len(reported) != tt.wantReported {
					t.Fatalf("hook told %v, want %d reports", reported, tt.wantReported)
				}
				for _, err := range reported {
					if !errors.Is(err, reqreply.ErrReplyNotCompleted) || !errors.Is(err, sbtest.PermanentError) {
						t.Errorf("reported %v, want ErrReplyNotCompleted wrapping the broker's error", err)
					}
				}
			})
		})
	}
}

// notCompletedFunc is a ReplyNotCompletedHook made of a function.
type notCompletedFunc func(reply *azservicebus.ReceivedMessage, err error)

func (f notCompletedFunc) OnReplyNotCompleted(_ context.Context, e reqreply.ReplyNotCompleted) {
	f(e.Reply, e.Err)
}
