package main

import (
	"bytes"
	"context"
	"crypto/sha1"
	"fmt"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/sbkit/sbkit/sbtest"
)

// microsoftConfig is Microsoft's emulator configuration as its installer ships it, with
// its // comments (testdata/microsoft/README.md says where from); microsoftConfigBlob is
// that file's git blob id there, so that the copy stays unmodified.
const (
	microsoftConfig     = "testdata/microsoft/Config.json"
	microsoftConfigBlob = "49fe1fd319555a99d0ca479b58c23932b00b96bd"
)

// Microsoft's Config.json, unmodified, starts the emulator, and its entities and filters
// behave as the file documents: queue.1 with a 1-minute lock, 3 deliveries and a 1-hour
// TTL; topic.1 whose subscription.1 takes application/json, subscription.2 messages
// with prop1 = value1, subscription.3 everything, subscription.4 MessageId 123456 with
// userProp1 = value1, its action setting To to 'Entity'.
func TestMicrosoftConfig(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile(microsoftConfig)
	if err != nil {
		t.Fatal(err)
	}
	if blob := fmt.Sprintf("%x", sha1.Sum(append(fmt.Appendf(nil, "blob %d\x00", len(b)), b...))); blob != microsoftConfigBlob {
		t.Fatalf("%s has git blob %s, want Microsoft's %s: the copy must stay unmodified", microsoftConfig, blob, microsoftConfigBlob)
	}
	if !bytes.Contains(b, []byte("// Other supported properties")) {
		t.Fatalf("%s has no // comment; the test is about the file as shipped", microsoftConfig)
	}
	srv := startRun(t, "-addr", "127.0.0.1:0", "-config", microsoftConfig)
	ns := srv.Namespace()

	lock, ttl := time.Minute, time.Hour
	want := map[string]sbtest.EntityOptions{
		"queue.1": {LockDuration: lock, MaxDeliveryCount: 3, DefaultTTL: ttl},
		"topic.1": {DefaultTTL: ttl},
	}
	for i := 1; i <= 4; i++ {
		want[fmt.Sprintf("topic.1/Subscriptions/subscription.%d", i)] = sbtest.EntityOptions{LockDuration: lock, MaxDeliveryCount: 3, DefaultTTL: ttl}
	}
	for path, w := range want {
		var got sbtest.EntityOptions
		if path == "topic.1" {
			topic, ok := ns.Topic(path)
			if !ok {
				t.Fatalf("no topic %s", path)
			}
			got = topic.Options()
		} else {
			e, ok := ns.Entity(path)
			if !ok {
				t.Fatalf("no entity %s", path)
			}
			got = e.Options()
		}
		if path == "topic.1" {
			got = sbtest.EntityOptions{DefaultTTL: got.DefaultTTL} // a topic has no lock or deliveries
		}
		if got != w {
			t.Errorf("%s: options %+v, want %+v", path, got, w)
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	client, err := azservicebus.NewClientFromConnectionString(srv.ConnectionString(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close(ctx)
	sender, err := client.NewSender("topic.1", nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range []*azservicebus.Message{
		{Body: []byte("json"), ContentType: to.Ptr("application/json")},
		{Body: []byte("prop"), ApplicationProperties: map[string]any{"prop1": "value1"}},
		{Body: []byte("sql"), MessageID: to.Ptr("123456"), ApplicationProperties: map[string]any{"userProp1": "value1"}},
		{Body: []byte("sql-other-id"), MessageID: to.Ptr("654321"), ApplicationProperties: map[string]any{"userProp1": "value1"}},
		{Body: []byte("none")},
	} {
		if err := sender.SendMessage(ctx, m, nil); err != nil {
			t.Fatal(err)
		}
	}
	routed := map[string][]string{
		"subscription.1": {"json"},
		"subscription.2": {"prop"},
		"subscription.3": {"json", "prop", "sql", "sql-other-id", "none"},
		"subscription.4": {"sql"},
	}
	for sub, bodies := range routed {
		e, _ := ns.Entity("topic.1/Subscriptions/" + sub)
		var got []string
		for _, m := range e.Active() {
			got = append(got, string(m.Body))
		}
		if !slices.Equal(got, bodies) {
			t.Errorf("%s holds %q, want %q", sub, got, bodies)
		}
	}
	r, err := client.NewReceiverForSubscription("topic.1", "subscription.4", nil)
	if err != nil {
		t.Fatal(err)
	}
	msgs, err := r.ReceiveMessages(ctx, 1, nil)
	if err != nil || len(msgs) != 1 || msgs[0].To == nil || *msgs[0].To != "Entity" {
		t.Fatalf("subscription.4 received %+v, %v; want one message with To set to Entity by the rule's action", msgs, err)
	}

	// queue.1: MaxDeliveryCount 3, then the dead-letter queue.
	qs, err := client.NewSender("queue.1", nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := qs.SendMessage(ctx, &azservicebus.Message{Body: []byte("q")}, nil); err != nil {
		t.Fatal(err)
	}
	qr, err := client.NewReceiverForQueue("queue.1", nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 3; i++ {
		msgs, err := qr.ReceiveMessages(ctx, 1, nil)
		if err != nil || len(msgs) != 1 || msgs[0].DeliveryCount != uint32(i) {
			t.Fatalf("delivery %d of queue.1: %+v, %v", i, msgs, err)
		}
		if err := qr.AbandonMessage(ctx, msgs[0], nil); err != nil {
			t.Fatal(err)
		}
	}
	if q, _ := ns.Entity("queue.1"); q.Counts().DeadLetter != 1 || q.Counts().Active != 0 {
		t.Fatalf("queue.1 after 3 abandons: %d dead-lettered, %d active; want 1, 0", q.Counts().DeadLetter, q.Counts().Active)
	}
}

// startRun runs the command in process with args and stops it at the end of the test.
func startRun(t *testing.T, args ...string) *sbtest.Server {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var stdout, stderr bytes.Buffer
	ready := make(chan *sbtest.Server, 1)
	done := make(chan error, 1)
	go func() { done <- run(ctx, args, noEnv, &stdout, &stderr, ready) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("run: %v", err)
		}
	})
	select {
	case srv := <-ready:
		return srv
	case err := <-done:
		done <- err
		t.Fatalf("run returned %v before serving; stderr:\n%s", err, stderr.String())
	case <-time.After(testTimeout):
		t.Fatal("the emulator did not start")
	}
	return nil
}
