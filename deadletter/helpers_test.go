package deadletter_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/sbkit/sbkit"
	"github.com/sbkit/sbkit/sbtest"
)

// dlqSetup sends the messages to the queue or topic dst, receives them from the entity
// e (a queue, or one subscription of topic dst) and dead-letters them with reason(i).
// Session entities are read with a session receiver per SessionID.
func deadLetterAll(t *testing.T, ns *sbtest.Namespace, dst string, e *sbtest.Entity, msgs []*azservicebus.Message, reason func(i int) string) {
	t.Helper()
	ctx := context.Background()
	snd, err := ns.NewSender(dst, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range msgs {
		if err := snd.SendMessage(ctx, m, nil); err != nil {
			t.Fatal(err)
		}
	}
	idx := map[string]int{}
	for i, m := range msgs {
		idx[*m.MessageID] = i
	}
	dead := 0
	settle := func(r sbkit.MessageReceiver) {
		for {
			rctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
			got, _ := r.ReceiveMessages(rctx, 100, nil)
			cancel()
			if len(got) == 0 {
				return
			}
			for _, m := range got {
				i := idx[m.MessageID]
				if err := r.DeadLetterMessage(ctx, m, &azservicebus.DeadLetterOptions{Reason: new(reason(i)), ErrorDescription: new(fmt.Sprintf("description %d", i))}); err != nil {
					t.Fatal(err)
				}
				dead++
			}
		}
	}
	var topic, sub string
	if tp := e.Topic(); tp != nil {
		topic, sub = tp.Name(), subName(e)
	}
	if e.Options().RequiresSession {
		seen := map[string]bool{}
		for _, m := range msgs {
			if seen[*m.SessionID] {
				continue
			}
			seen[*m.SessionID] = true
			var sr *sbtest.SessionReceiver
			if topic != "" {
				sr, err = ns.AcceptSessionForSubscription(ctx, topic, sub, *m.SessionID, nil)
			} else {
				sr, err = ns.AcceptSessionForQueue(ctx, e.Name(), *m.SessionID, nil)
			}
			if err != nil {
				t.Fatal(err)
			}
			settle(sr)
			_ = sr.Close(ctx)
		}
	} else {
		var r *sbtest.Receiver
		if topic != "" {
			r, err = ns.NewReceiverForSubscription(topic, sub, nil)
		} else {
			r, err = ns.NewReceiverForQueue(e.Name(), nil)
		}
		if err != nil {
			t.Fatal(err)
		}
		settle(r)
		_ = r.Close(ctx)
	}
	if dead != len(msgs) {
		t.Fatalf("dead-lettered %d of %d messages", dead, len(msgs))
	}
}

// dlqReceiver is a peek-lock receiver of e's dead-letter queue.
func dlqReceiver(t *testing.T, ns *sbtest.Namespace, e *sbtest.Entity, mode azservicebus.ReceiveMode) *sbtest.Receiver {
	t.Helper()
	o := &sbtest.ReceiverOptions{SubQueue: azservicebus.SubQueueDeadLetter, ReceiveMode: mode}
	var r *sbtest.Receiver
	var err error
	if tp := e.Topic(); tp != nil {
		r, err = ns.NewReceiverForSubscription(tp.Name(), subName(e), o)
	} else {
		r, err = ns.NewReceiverForQueue(e.Name(), o)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close(context.Background()) })
	return r
}

// messages makes n messages with every field a re-drive keeps.
func messages(n int, session func(i int) string) []*azservicebus.Message {
	out := make([]*azservicebus.Message, n)
	for i := range out {
		m := &azservicebus.Message{
			Body:                  []byte(fmt.Sprintf("body %d", i)),
			MessageID:             new(fmt.Sprintf("m%04d", i)),
			ContentType:           new("text/plain"),
			CorrelationID:         new(fmt.Sprintf("c%d", i)),
			Subject:               new("subject"),
			To:                    new("to"),
			ReplyTo:               new("reply"),
			ApplicationProperties: map[string]any{"i": int64(i), "kind": fmt.Sprint(i % 3)},
		}
		if session != nil {
			m.SessionID = new(session(i))
		}
		out[i] = m
	}
	return out
}

// subName is the subscription's own name of e's path ("topic/Subscriptions/sub").
func subName(e *sbtest.Entity) string {
	n := e.Name()
	return n[strings.LastIndex(n, "/")+1:]
}
