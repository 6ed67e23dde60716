package serialize_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/sbkit/sbkit"
	"github.com/sbkit/sbkit/sbtest"
	"github.com/sbkit/sbkit/serialize"
)

// process is the smallest processor: receive, run the handler, settle as
// sbkit.SettlementOf says, until n messages are settled.
func process(ctx context.Context, t *testing.T, r sbkit.MessageReceiver, h sbkit.Handler, n int) {
	t.Helper()
	for settled := 0; settled < n; {
		msgs, err := r.ReceiveMessages(ctx, 10, nil)
		if err != nil {
			t.Fatalf("ReceiveMessages after %d settlements: %v", settled, err)
		}
		for _, msg := range msgs {
			action, se := sbkit.SettlementOf(h(ctx, msg))
			switch action {
			case sbkit.ActionComplete:
				err = r.CompleteMessage(ctx, msg, nil)
			case sbkit.ActionDeadLetter:
				err = r.DeadLetterMessage(ctx, msg, &azservicebus.DeadLetterOptions{Reason: &se.Reason, ErrorDescription: &se.Description})
			case sbkit.ActionDefer:
				err = r.DeferMessage(ctx, msg, nil)
			default:
				err = r.AbandonMessage(ctx, msg, nil)
			}
			if err != nil {
				t.Fatalf("settle %v: %v", action, err)
			}
			settled++
		}
	}
}

// TestHandlerEndToEnd sends good and bad payloads through an in-memory queue: decodable
// ones reach the typed handler and are completed, the others are dead-lettered on their
// first delivery with a reason and a description naming the attempts.
func TestHandlerEndToEnd(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		ns := sbtest.NewTestNamespace(t, &sbtest.NamespaceOptions{Queues: map[string]*sbtest.EntityOptions{"orders": {MaxDeliveryCount: 5}}})
		queue, _ := ns.Entity("orders")
		sender, err := ns.NewSender("orders", nil)
		if err != nil {
			t.Fatal(err)
		}
		defer sender.Close(ctx)
		receiver, err := ns.NewReceiverForQueue("orders", nil)
		if err != nil {
			t.Fatal(err)
		}
		defer receiver.Close(ctx)

		reg := mustNew(t, &serialize.Options{MaxBodySize: 4096, MessageTypeProperty: "MessageType"})
		if err := reg.SetFallbacks("application/json", "application/xml"); err != nil {
			t.Fatal(err)
		}

		send := func(id, contentType string, body []byte) {
			m := &azservicebus.Message{MessageID: &id, Body: body}
			if contentType != "" {
				m.ContentType = &contentType
			}
			if err := sender.SendMessage(ctx, m, nil); err != nil {
				t.Fatal(err)
			}
		}
		// Good: encoded by the registry, other spellings, fallbacks.
		encoded, err := reg.Encode(order{ID: "enc", Qty: 1}, "application/vnd.acme.order+json; charset=utf-8", nil)
		if err != nil {
			t.Fatal(err)
		}
		encoded.MessageID = new("good-encoded")
		if err := sender.SendMessage(ctx, encoded, nil); err != nil {
			t.Fatal(err)
		}
		send("good-upper", "APPLICATION/JSON", []byte(`{"id":"upper","qty":2}`))
		send("good-missing-type", "", []byte(`{"id":"missing","qty":3}`))
		send("good-xml-mislabelled", "application/json", []byte(`<order><id>xml</id><qty>4</qty></order>`))
		// Bad.
		send("bad-garbage", "application/json", []byte(`{"id":`))
		send("bad-unknown", "application/msgpack", []byte{0x81, 0xa2})
		send("bad-too-large", "application/json", []byte(`{"id":"`+strings.Repeat("x", 5000)+`"}`))

		var mu sync.Mutex
		seen := map[string]order{}
		var hookErrs []error
		h := mustHandler(t, reg, func(_ context.Context, o order, msg *azservicebus.ReceivedMessage) error {
			mu.Lock()
			defer mu.Unlock()
			seen[msg.MessageID] = o
			if msg.MessageID == "good-encoded" && msg.ApplicationProperties["MessageType"] != "serialize_test.order" {
				t.Errorf("message-type property: %v", msg.ApplicationProperties)
			}
			return nil
		}, &serialize.HandlerOptions{Hooks: []serialize.Hook{serialize.DecodeErrorHookFunc(func(_ context.Context, e *serialize.UndecodableError) {
			mu.Lock()
			defer mu.Unlock()
			hookErrs = append(hookErrs, e.Err)
		})}})
		process(ctx, t, receiver, h, 7)

		want := map[string]order{
			"good-encoded":         {ID: "enc", Qty: 1},
			"good-upper":           {ID: "upper", Qty: 2},
			"good-missing-type":    {ID: "missing", Qty: 3},
			"good-xml-mislabelled": {ID: "xml", Qty: 4},
		}
		if len(seen) != len(want) {
			t.Fatalf("handler saw %v", seen)
		}
		for id, o := range want {
			if seen[id] != o {
				t.Errorf("%s: handler got %+v, want %+v", id, seen[id], o)
			}
		}

		dlq := queue.DeadLetters()
		if len(dlq) != 3 {
			t.Fatalf("dead letters: %d, want 3", len(dlq))
		}
		wantDLQ := map[string]struct{ reason, desc string }{
			"bad-garbage":   {"DeserializationFailed", `content-type "application/json" (json): unexpected end of JSON input; fallback "application/xml" (xml): `},
			"bad-unknown":   {"DeserializationFailed", `content-type "application/msgpack": serialize: no codec for content type "application/msgpack"; fallback "application/json" (json): invalid character`},
			"bad-too-large": {"BodyTooLarge", "limit 4096"},
		}
		for _, m := range dlq {
			w, ok := wantDLQ[m.MessageID]
			if !ok {
				t.Errorf("unexpected dead letter %s", m.MessageID)
				continue
			}
			if m.DeadLetterReason == nil || *m.DeadLetterReason != w.reason {
				t.Errorf("%s: reason %v, want %q", m.MessageID, m.DeadLetterReason, w.reason)
			}
			if m.DeadLetterErrorDescription == nil || !strings.Contains(*m.DeadLetterErrorDescription, w.desc) {
				t.Errorf("%s: description %v, want it to contain %q", m.MessageID, m.DeadLetterErrorDescription, w.desc)
			}
			if m.DeliveryCount != 1 {
				t.Errorf("%s: delivered %d times; an undecodable message must be dead-lettered on its first delivery", m.MessageID, m.DeliveryCount)
			}
		}
		st := queue.Stats()
		if st.Completed != 4 || st.DeadLettered != 3 || st.Abandoned != 0 || queue.Counts().Active != 0 {
			t.Fatalf("stats %+v, active %d", st, queue.Counts().Active)
		}
		if len(hookErrs) != 3 {
			t.Fatalf("the DecodeErrorHook saw %d errors, want 3", len(hookErrs))
		}
		var tooLarge, decodeErrs int
		for _, err := range hookErrs {
			var derr *serialize.DecodeError
			switch {
			case errors.Is(err, serialize.ErrBodyTooLarge):
				tooLarge++
			case errors.As(err, &derr):
				decodeErrs++
			}
		}
		if tooLarge != 1 || decodeErrs != 2 {
			t.Fatalf("hook errors: %v", hookErrs)
		}
	})
}
