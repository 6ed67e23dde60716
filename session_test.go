package sbkit_test

import (
	"context"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/sbkit/sbkit"
	"github.com/sbkit/sbkit/sbtest"
)

// TestSDKSessionAcceptor drives the SDK adapters against the emulator: sessions by id and
// next, and a failed accept returns a nil interface (not a typed nil receiver).
func TestSDKSessionAcceptor(t *testing.T) {
	srv := sbtest.NewTestServer(t, &sbtest.ServerOptions{
		Queues: map[string]*sbtest.EntityOptions{"sq": {RequiresSession: true}},
		Topics: map[string]sbtest.TopicOptions{"t": {Subscriptions: map[string]*sbtest.EntityOptions{"s": {RequiresSession: true}}}},
	})
	client, err := azservicebus.NewClientFromConnectionString(srv.ConnectionString(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close(context.Background())
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for name, acc := range map[string]sbkit.SessionAcceptor{
		"queue":        sbkit.NewQueueSessionAcceptor(client, "sq", nil),
		"subscription": sbkit.NewSubscriptionSessionAcceptor(client, "t", "s", nil),
	} {
		r, err := acc.AcceptSession(ctx, "a")
		if err != nil || r.SessionID() != "a" {
			t.Fatalf("%s: accept a: %v", name, err)
		}
		if r2, err := acc.AcceptSession(ctx, "a"); err == nil || r2 != nil {
			t.Fatalf("%s: second accept of a: %v, %v (want an error and a nil receiver)", name, r2, err)
		}
		short, cancelShort := context.WithTimeout(ctx, 200*time.Millisecond)
		if r3, err := acc.AcceptNextSession(short); err == nil || r3 != nil {
			t.Fatalf("%s: accept next with none: %v, %v", name, r3, err)
		}
		cancelShort()
		if err := r.Close(ctx); err != nil {
			t.Fatal(err)
		}
	}
}
