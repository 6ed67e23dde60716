package sender_test

import (
	"context"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/sbkit/sbkit/sbtest"
	"github.com/sbkit/sbkit/sender"
)

// TestSDKSenderIsBatched: a plain *azservicebus.Sender, handed to New without
// sbkit.NewBatchSender, batches. The real SDK client talks AMQP to sbtest.NewServer, and
// the broker counts how many requests carried the messages.
func TestSDKSenderIsBatched(t *testing.T) {
	srv := sbtest.NewTestServer(t, &sbtest.ServerOptions{Queues: map[string]*sbtest.EntityOptions{"q": nil}})
	q, _ := srv.Namespace().Entity("q")
	client, err := azservicebus.NewClientFromConnectionString(srv.ConnectionString(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Close(context.Background()) })
	sdk, err := client.NewSender("q", nil)
	if err != nil {
		t.Fatal(err)
	}
	s := newSender(t, sdk, nil)
	if !s.Batching() {
		t.Fatal("a *azservicebus.Sender with default options does not batch")
	}
	const n = 200
	if err := s.SendAll(t.Context(), msgs(0, n)); err != nil {
		t.Fatal(err)
	}
	st := q.Stats()
	if st.Sent != n || st.Batches == 0 || st.Batches > 4 {
		t.Fatalf("broker stored %d messages in %d batch requests; want %d in a few", st.Sent, st.Batches, n)
	}
	if got := s.Stats().BatchesSent; got != st.Batches {
		t.Errorf("sender counted %d batches, broker %d", got, st.Batches)
	}

	single := newSender(t, sdk, &sender.Options{DisableBatching: true})
	if err := single.SendAll(t.Context(), msgs(n, n+10)); err != nil {
		t.Fatal(err)
	}
	if st2 := q.Stats(); st2.Batches != st.Batches || st2.Sent != n+10 {
		t.Errorf("DisableBatching: broker stats %+v after %+v", st2, st)
	}
}
