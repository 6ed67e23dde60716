package sbkit_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/sbkit/sbkit"
	"github.com/sbkit/sbkit/sbtest"
)

// TestMessageSizeMatchesSDKBatch compares MessageSize with what the real SDK counts when
// it adds the message to a MessageBatch (the bytes the message adds to a batch that
// already holds one, so that the batch's envelope is left out).
func TestMessageSizeMatchesSDKBatch(t *testing.T) {
	srv := sbtest.NewTestServer(t, &sbtest.ServerOptions{Queues: map[string]*sbtest.EntityOptions{"q": nil}})
	ctx := t.Context()
	client, err := azservicebus.NewClientFromConnectionString(srv.ConnectionString(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Close(context.Background()) })
	s, err := client.NewSender("q", nil)
	if err != nil {
		t.Fatal(err)
	}
	sp := func(s string) *string { return &s }
	ttl, now := time.Hour, time.Now()
	tests := []struct {
		name string
		m    *azservicebus.Message
		// slack is how much the estimate may exceed the SDK's count (numbers are counted
		// at their largest encoding); it may never be more than 8 bytes below it.
		slack int64
	}{
		{"empty, the SDK sets a MessageID", &azservicebus.Message{}, 8},
		{"empty MessageID", &azservicebus.Message{MessageID: sp("")}, 8},
		{"small body", &azservicebus.Message{Body: []byte("x"), MessageID: sp("m-1")}, 8},
		{"body just under 256", &azservicebus.Message{Body: make([]byte, 250)}, 8},
		{"1 KiB body", &azservicebus.Message{Body: make([]byte, 1024)}, 8},
		{"64 KiB body", &azservicebus.Message{Body: make([]byte, 64<<10)}, 8},
		{"every string", &azservicebus.Message{MessageID: sp("id"), ContentType: sp("application/json"),
			CorrelationID: sp("c"), Subject: sp("s"), To: sp("to"), ReplyTo: sp("r"), SessionID: sp("sess"),
			ReplyToSessionID: sp("rs"), PartitionKey: sp("sess")}, 8},
		{"session", &azservicebus.Message{SessionID: sp("session-1")}, 8},
		{"partition key", &azservicebus.Message{PartitionKey: sp("pk")}, 8},
		{"ttl and schedule", &azservicebus.Message{TimeToLive: &ttl, ScheduledEnqueueTime: &now}, 8},
		{"trace context", &azservicebus.Message{ApplicationProperties: map[string]any{
			"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}}, 8},
		{"long property", &azservicebus.Message{Body: make([]byte, 300),
			ApplicationProperties: map[string]any{"k": []byte(strings.Repeat("v", 300))}}, 8},
		{"scalars", &azservicebus.Message{ApplicationProperties: map[string]any{
			"i": int64(1 << 40), "t": now, "f": 1.5, "b": true}}, 8},
		{"small numbers", &azservicebus.Message{ApplicationProperties: map[string]any{
			"a": int32(5), "b": -7, "c": float32(1)}}, 8 + 3*7},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := s.NewMessageBatch(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			if err := b.AddMessage(&azservicebus.Message{MessageID: sp("first")}, nil); err != nil {
				t.Fatal(err)
			}
			before := b.NumBytes()
			est := sbkit.MessageSize(tt.m) // before AddMessage, which may set the MessageID
			if err := b.AddMessage(tt.m, nil); err != nil {
				t.Fatal(err)
			}
			counted := int64(b.NumBytes() - before)
			if est < counted-8 || est > counted+tt.slack {
				t.Errorf("MessageSize = %d, the SDK batch counts %d", est, counted)
			}
		})
	}
	if sbkit.MessageSize(nil) != 0 {
		t.Errorf("MessageSize(nil) = %d, want 0", sbkit.MessageSize(nil))
	}
}
