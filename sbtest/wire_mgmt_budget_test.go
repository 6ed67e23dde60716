package sbtest

import (
	"bytes"
	"runtime"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	goamqp "github.com/Azure/go-amqp"
)

// goroutinesIn returns how many goroutines have fn on their stack.
func goroutinesIn(fn string) int {
	buf := make([]byte, 1<<22)
	buf = buf[:runtime.Stack(buf, true)]
	return bytes.Count(buf, []byte(fn))
}

// $management requests are run only once their answers can go: peeks sent while the
// response link has no credit make the server build nothing (the package doc: every cost
// a client can cause is bounded), and a peek's answer stops past 1 MiB, the count asked
// for being at most what a peek returns ("Message browsing").
func TestServerManagementAnswersBounded(t *testing.T) {
	w := newWire(t, &ServerOptions{Queues: map[string]*EntityOptions{"q": nil}})
	ctx := wireCtx(t)
	s := w.sender(t, "q")
	body := make([]byte, 4<<10)
	for range 32 {
		b, err := s.NewMessageBatch(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		for range 32 {
			if err := b.AddMessage(&azservicebus.Message{Body: body}, nil); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.SendMessageBatch(ctx, b, nil); err != nil {
			t.Fatal(err)
		}
	}
	_, sess := amqpSession(t, w.srv)
	const replyTo = "peeker-replies"
	rcv, err := sess.NewReceiver(ctx, "q/$management", &goamqp.ReceiverOptions{Credit: -1, TargetAddress: replyTo})
	if err != nil {
		t.Fatal(err)
	}
	snd, err := sess.NewSender(ctx, "q/$management", nil)
	if err != nil {
		t.Fatal(err)
	}
	before := heapInUse()
	const peeks = 32
	for i := range peeks {
		req := &goamqp.Message{
			Properties:            &goamqp.MessageProperties{MessageID: uint64(i), ReplyTo: ptr(replyTo)},
			ApplicationProperties: map[string]any{"operation": opPeek},
			Value:                 map[string]any{"from-sequence-number": int64(1), "message-count": int32(1000)},
		}
		if err := snd.Send(ctx, req, nil); err != nil {
			t.Fatal(err)
		}
	}
	// Every peek waits for its answer to go (or, on a slow machine, still builds it).
	for end := time.Now().Add(wireTimeout); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		if goroutinesIn("sbtest.(*responseLink).sendResponse(")+goroutinesIn("sbtest.(*responseLink).reserveCredit(") >= peeks {
			break
		}
	}
	if grown := int64(heapInUse()) - int64(before); grown > 8<<20 {
		t.Errorf("%d peeks of a 4 MiB queue whose answers cannot go grew the heap by %d MiB", peeks, grown>>20)
	}
	if err := rcv.IssueCredit(1); err != nil {
		t.Fatal(err)
	}
	m, err := rcv.Receive(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if code := m.ApplicationProperties["statusCode"]; code != int32(200) {
		t.Fatalf("peek answered %v", code)
	}
	msgs, _ := m.Value.(map[string]any)["messages"].([]any)
	if n := len(msgs); n == 0 || n*len(body) > 2<<20 {
		t.Fatalf("a peek of 1,000 answered %d messages of 4 KiB, want some and at most about 1 MiB", n)
	}
	// The SDK's peek of 1,000 gets what fits in its response link's max-message-size.
	peeked, err := w.receiver(t, "q", nil).PeekMessages(ctx, 1000, nil)
	if err != nil || len(peeked) == 0 {
		t.Fatalf("the SDK's peek of 1,000 messages of 4 KiB: %d messages, %v", len(peeked), err)
	}
}
