package sbenv_test

import (
	"context"
	"strings"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/sbkit/sbkit/examples/internal/sbenv"
)

func env(kv map[string]string) func(string) string { return func(k string) string { return kv[k] } }

func TestOpen(t *testing.T) {
	const cs = "Endpoint=sb://example.servicebus.windows.net/;SharedAccessKeyName=send;SharedAccessKey=c2VjcmV0"
	tests := []struct {
		name      string
		env       map[string]string
		inMemory  bool
		queue     string
		wantError string
	}{
		{"default: in memory, orders", nil, true, "orders", ""},
		{"queue from env", map[string]string{sbenv.QueueEnv: "invoices"}, true, "invoices", ""},
		{"real namespace", map[string]string{sbenv.ConnectionStringEnv: cs}, false, "orders", ""},
		{"malformed connection string", map[string]string{sbenv.ConnectionStringEnv: "not a connection string"}, false, "", sbenv.ConnectionStringEnv},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			conn, err := sbenv.Open(&sbenv.Options{Getenv: env(tc.env)})
			if tc.wantError != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantError) {
					t.Fatalf("err = %v, want it to mention %q", err, tc.wantError)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close(context.Background())
			if conn.InMemory() != tc.inMemory || conn.QueueName != tc.queue {
				t.Errorf("InMemory = %v, queue %q", conn.InMemory(), conn.QueueName)
			}
			if strings.Contains(conn.String(), "c2VjcmV0") {
				t.Errorf("String leaks the key: %s", conn)
			}
			if tc.inMemory && (conn.Queue == nil || conn.Queue.Name() != tc.queue) {
				t.Errorf("in-memory queue not created: %v", conn.Queue)
			}
		})
	}
}

func TestInMemoryRoundTrip(t *testing.T) {
	for _, wire := range []bool{false, true} {
		t.Run(map[bool]string{false: "in memory", true: "on the wire"}[wire], func(t *testing.T) { roundTrip(t, wire) })
	}
}

func roundTrip(t *testing.T, wire bool) {
	conn, err := sbenv.Open(&sbenv.Options{Wire: wire})
	if err != nil {
		t.Fatal(err)
	}
	if !conn.InMemory() || strings.Contains(conn.String(), "NewServer") != wire {
		t.Errorf("InMemory %v, String %q", conn.InMemory(), conn)
	}
	ctx := t.Context()
	s, err := conn.NewSender()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(ctx)
	if err := s.SendMessage(ctx, &azservicebus.Message{Body: []byte("hello")}, nil); err != nil {
		t.Fatal(err)
	}
	r, err := conn.NewReceiver(azservicebus.ReceiveModeReceiveAndDelete)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close(ctx)
	msgs, err := r.ReceiveMessages(ctx, 10, nil)
	if err != nil || len(msgs) != 1 || string(msgs[0].Body) != "hello" {
		t.Fatalf("received %v, %v", msgs, err)
	}
	if n := conn.Queue.Counts().Active + conn.Queue.Counts().Locked; n != 0 {
		t.Errorf("receive-and-delete left %d messages", n)
	}
	if err := conn.Close(ctx); err != nil {
		t.Errorf("Close in memory: %v", err)
	}
}
