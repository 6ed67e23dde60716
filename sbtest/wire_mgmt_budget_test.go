package sbtest

import (
	"bytes"
	"runtime"
	"strings"
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
		if goroutinesIn("(*responseLink).sendResponse(")+goroutinesIn("(*responseLink).reserveCredit(") >= peeks {
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

// A receive by sequence number answers every deferred message asked for or none, within
// the response link's max-message-size: asking for more than one answer carries is
// refused before any message is taken, so a receive-and-delete receiver loses none (the
// Go SDK closes a link on a larger answer, and the server used to build one of any size,
// deleting the messages it could not deliver).
func TestServerReceiveDeferredBounded(t *testing.T) {
	w := newWire(t, &ServerOptions{Queues: map[string]*EntityOptions{"q": nil}})
	ctx := wireCtx(t)
	s := w.sender(t, "q")
	const n = 3
	for range n {
		if err := s.SendMessage(ctx, &azservicebus.Message{Body: make([]byte, 200<<10)}, nil); err != nil {
			t.Fatal(err)
		}
	}
	pl := w.receiver(t, "q", nil)
	var seqs []int64
	for _, m := range receiveN(t, pl, n) {
		if err := pl.DeferMessage(ctx, m, nil); err != nil {
			t.Fatal(err)
		}
		seqs = append(seqs, *m.SequenceNumber)
	}
	client, err := azservicebus.NewClientFromConnectionString(w.srv.ConnectionString(),
		&azservicebus.ClientOptions{RetryOptions: azservicebus.RetryOptions{MaxRetries: -1}})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = client.Close(ctx) }()
	rd, err := client.NewReceiverForQueue("q", &azservicebus.ReceiverOptions{ReceiveMode: azservicebus.ReceiveModeReceiveAndDelete})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := rd.ReceiveDeferredMessages(ctx, seqs, nil); err == nil || len(got) != 0 {
		t.Fatalf("receiving %d deferred messages of 200 KiB at once: %d messages, %v; want an error", n, len(got), err)
	} else if !strings.Contains(err.Error(), "ask for fewer") {
		t.Errorf("the refusal does not say what to do: %v", err)
	}
	peeker := w.receiver(t, "q", nil)
	for _, seq := range seqs { // one at a time: a peek answers what fits in 256 KiB
		peeked, err := peeker.PeekMessages(ctx, 1, &azservicebus.PeekMessagesOptions{FromSequenceNumber: &seq})
		if err != nil {
			t.Fatal(err)
		}
		if len(peeked) != 1 || *peeked[0].SequenceNumber != seq || peeked[0].State != azservicebus.MessageStateDeferred {
			t.Fatalf("after the refused receive, peeking message %d: %d messages, want it still deferred", seq, len(peeked))
		}
	}
	for _, seq := range seqs {
		got, err := rd.ReceiveDeferredMessages(ctx, []int64{seq}, nil)
		if err != nil || len(got) != 1 || len(got[0].Body) != 200<<10 {
			t.Fatalf("receiving deferred message %d alone: %d messages, %v", seq, len(got), err)
		}
	}
}

// A peek's answer holds what fits in 256 KiB, and the server copies no more than that
// out of the queue to build it: a peek of 200 on a queue of 200 messages of 200 KiB
// allocates about one answer, not a 40 MiB copy of the queue.
func TestServerPeekCopiesWhatItAnswers(t *testing.T) {
	w := newWire(t, &ServerOptions{Queues: map[string]*EntityOptions{"q": nil}})
	ctx := wireCtx(t)
	const n = 200
	s, err := w.srv.Namespace().NewSender("q", nil)
	if err != nil {
		t.Fatal(err)
	}
	for range n {
		if err := s.SendMessage(ctx, &azservicebus.Message{Body: make([]byte, 200<<10)}, nil); err != nil {
			t.Fatal(err)
		}
	}
	r := w.receiver(t, "q", nil)
	if _, err := r.PeekMessages(ctx, 1, nil); err != nil { // links up
		t.Fatal(err)
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	peeked, err := r.PeekMessages(ctx, n, nil)
	runtime.ReadMemStats(&after)
	if err != nil || len(peeked) == 0 {
		t.Fatalf("peek of %d: %d messages, %v", n, len(peeked), err)
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 8<<20 {
		t.Errorf("a peek answering %d messages of 200 KiB allocated %d MiB", len(peeked), alloc>>20)
	}
}
