package sbtest

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus/admin"
	"github.com/sbkit/sbkit/sbtest/internal/atom"
)

// TestAdminPartitionedSize: a partitioned entity of the Standard tier has 16 partitions
// of MaxSizeInMegabytes each, and the admin API reports their total; sending back what
// was read keeps it (SDK live tests TestAdminClient_CreateQueue_Standard, ...CreateTopic).
func TestAdminPartitionedSize(t *testing.T) {
	t.Parallel()
	_, ac := adminWire(t)
	ctx := wireCtx(t)
	q, err := ac.CreateQueue(ctx, "pq", &admin.CreateQueueOptions{Properties: &admin.QueueProperties{
		EnablePartitioning: to.Ptr(true), MaxSizeInMegabytes: to.Ptr(int32(4096))}})
	if err != nil {
		t.Fatal(err)
	}
	if got := *q.MaxSizeInMegabytes; got != 16*4096 {
		t.Fatalf("created partitioned queue reports MaxSizeInMegabytes %d, want 16 × 4096", got)
	}
	got, err := ac.GetQueue(ctx, "pq", nil)
	if err != nil {
		t.Fatal(err)
	}
	upd, err := ac.UpdateQueue(ctx, "pq", got.QueueProperties, nil)
	if err != nil {
		t.Fatalf("updating with the properties read: %v", err)
	}
	if *upd.MaxSizeInMegabytes != 16*4096 {
		t.Fatalf("after a round trip MaxSizeInMegabytes %d, want 16 × 4096", *upd.MaxSizeInMegabytes)
	}
	tp, err := ac.CreateTopic(ctx, "pt", &admin.CreateTopicOptions{Properties: &admin.TopicProperties{
		EnablePartitioning: to.Ptr(true), MaxSizeInMegabytes: to.Ptr(int32(2048))}})
	if err != nil {
		t.Fatal(err)
	}
	if got := *tp.MaxSizeInMegabytes; got != 16*2048 {
		t.Fatalf("created partitioned topic reports MaxSizeInMegabytes %d, want 16 × 2048", got)
	}
	plain, err := ac.CreateQueue(ctx, "q", &admin.CreateQueueOptions{Properties: &admin.QueueProperties{MaxSizeInMegabytes: to.Ptr(int32(2048))}})
	if err != nil || *plain.MaxSizeInMegabytes != 2048 {
		t.Fatalf("a queue without partitions: %v, %v", plain, err)
	}
}

// TestAdminImmutableProperties: duplicate detection and partitioning are chosen when the
// entity is created ("Enable duplicate message detection": "You can't enable or disable
// duplicate detection after the queue or topic is created"; SDK live test
// TestAdminClient_UpdateTopic: "Partitioning cannot be changed for Topic."): an update
// that changes either is refused with 400 and changes nothing.
func TestAdminImmutableProperties(t *testing.T) {
	t.Parallel()
	w, ac := adminWire(t)
	ctx := wireCtx(t)
	if _, err := ac.CreateQueue(ctx, "q", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := ac.CreateTopic(ctx, "t", &admin.CreateTopicOptions{Properties: &admin.TopicProperties{RequiresDuplicateDetection: to.Ptr(true)}}); err != nil {
		t.Fatal(err)
	}
	q, _ := ac.GetQueue(ctx, "q", nil)
	tp, _ := ac.GetTopic(ctx, "t", nil)
	for _, tc := range []struct {
		name, want string
		update     func() error
	}{
		{"queue partitioning", "Partitioning cannot be changed for Queue.", func() error {
			p := q.QueueProperties
			p.EnablePartitioning = to.Ptr(true)
			_, err := ac.UpdateQueue(ctx, "q", p, nil)
			return err
		}},
		{"queue duplicate detection", "RequiresDuplicateDetection", func() error {
			p := q.QueueProperties
			p.RequiresDuplicateDetection = to.Ptr(true)
			_, err := ac.UpdateQueue(ctx, "q", p, nil)
			return err
		}},
		{"topic partitioning", "Partitioning cannot be changed for Topic.", func() error {
			p := tp.TopicProperties
			p.EnablePartitioning = to.Ptr(true)
			_, err := ac.UpdateTopic(ctx, "t", p, nil)
			return err
		}},
		{"topic duplicate detection off", "RequiresDuplicateDetection", func() error {
			p := tp.TopicProperties
			p.RequiresDuplicateDetection = to.Ptr(false)
			_, err := ac.UpdateTopic(ctx, "t", p, nil)
			return err
		}},
	} {
		err := tc.update()
		wantStatus(t, tc.name, err, http.StatusBadRequest)
		if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want it to say %q", tc.name, err, tc.want)
		}
	}
	if e, _ := w.srv.Namespace().Entity("q"); e.Options().DuplicateDetectionWindow != 0 {
		t.Error("a refused update turned duplicate detection on")
	}
	if top, _ := w.srv.Namespace().Topic("t"); top.Options().DuplicateDetectionWindow == 0 {
		t.Error("a refused update turned duplicate detection off")
	}
	// The window of an entity with duplicate detection can change.
	p := tp.TopicProperties
	p.DuplicateDetectionHistoryTimeWindow = to.Ptr("PT1M")
	if _, err := ac.UpdateTopic(ctx, "t", p, nil); err != nil {
		t.Fatalf("changing the window: %v", err)
	}
}

// TestAdminAccessedAt: AccessedAt is zero until the entity is used (SDK live tests
// TestAdminClient_QueueWithMaxValues, TestAdminClient_CreateTopic), then the time of its
// last send or receive (the service's topic description in the SDK's
// admin_client_topic_filtercount_test.go: accessed after created); a subscription's is
// set when it is created (TestAdminClient_ListSubscriptionRuntimeProperties).
func TestAdminAccessedAt(t *testing.T) {
	t.Parallel()
	w, ac := adminWire(t)
	ctx := wireCtx(t)
	if _, err := ac.CreateQueue(ctx, "q", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := ac.CreateTopic(ctx, "t", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := ac.CreateSubscription(ctx, "t", "s", nil); err != nil {
		t.Fatal(err)
	}
	qrt, _ := ac.GetQueueRuntimeProperties(ctx, "q", nil)
	trt, _ := ac.GetTopicRuntimeProperties(ctx, "t", nil)
	srt, _ := ac.GetSubscriptionRuntimeProperties(ctx, "t", "s", nil)
	if !qrt.AccessedAt.IsZero() || !trt.AccessedAt.IsZero() {
		t.Fatalf("unused queue and topic AccessedAt %v, %v, want zero", qrt.AccessedAt, trt.AccessedAt)
	}
	if srt.AccessedAt.IsZero() {
		t.Fatal("a new subscription's AccessedAt is zero")
	}
	before := time.Now().Add(-time.Second)
	for _, to := range []string{"q", "t"} {
		if err := w.sender(t, to).SendMessage(ctx, &azservicebus.Message{Body: []byte("m")}, nil); err != nil {
			t.Fatal(err)
		}
	}
	qrt, _ = ac.GetQueueRuntimeProperties(ctx, "q", nil)
	trt, _ = ac.GetTopicRuntimeProperties(ctx, "t", nil)
	if qrt.AccessedAt.Before(before) || trt.AccessedAt.Before(before) {
		t.Fatalf("after a send AccessedAt %v, %v, want after %v", qrt.AccessedAt, trt.AccessedAt, before)
	}
	sent := qrt.AccessedAt
	time.Sleep(10 * time.Millisecond) // AccessedAt has the clock's resolution
	r := w.receiver(t, "q", &azservicebus.ReceiverOptions{ReceiveMode: azservicebus.ReceiveModeReceiveAndDelete})
	receiveN(t, r, 1)
	qrt, _ = ac.GetQueueRuntimeProperties(ctx, "q", nil)
	if !qrt.AccessedAt.After(sent) {
		t.Fatalf("after a receive AccessedAt %v, want after the send's %v", qrt.AccessedAt, sent)
	}
}

// TestAdminForwardingNeverIdle: an entity that auto-forwards reports AutoDeleteOnIdle at
// its maximum, whatever was asked ("Chaining Service Bus entities with autoforwarding":
// "the value for AutoDeleteOnIdle on the source entity is automatically set to the
// maximum value of the data type").
func TestAdminForwardingNeverIdle(t *testing.T) {
	t.Parallel()
	_, ac := adminWire(t)
	ctx := wireCtx(t)
	if _, err := ac.CreateQueue(ctx, "dest", nil); err != nil {
		t.Fatal(err)
	}
	q, err := ac.CreateQueue(ctx, "src", &admin.CreateQueueOptions{Properties: &admin.QueueProperties{
		ForwardTo: to.Ptr("dest"), AutoDeleteOnIdle: to.Ptr("PT10M")}})
	if err != nil {
		t.Fatal(err)
	}
	if *q.AutoDeleteOnIdle != atom.MaxTimeSpan {
		t.Fatalf("forwarding queue AutoDeleteOnIdle %s, want %s", *q.AutoDeleteOnIdle, atom.MaxTimeSpan)
	}
	if _, err := ac.CreateTopic(ctx, "topic", nil); err != nil {
		t.Fatal(err)
	}
	s, err := ac.CreateSubscription(ctx, "topic", "s", &admin.CreateSubscriptionOptions{Properties: &admin.SubscriptionProperties{
		ForwardTo: to.Ptr("dest"), AutoDeleteOnIdle: to.Ptr("PT10M")}})
	if err != nil {
		t.Fatal(err)
	}
	if *s.AutoDeleteOnIdle != atom.MaxTimeSpan {
		t.Fatalf("forwarding subscription AutoDeleteOnIdle %s, want %s", *s.AutoDeleteOnIdle, atom.MaxTimeSpan)
	}
	plain, err := ac.CreateQueue(ctx, "idle", &admin.CreateQueueOptions{Properties: &admin.QueueProperties{AutoDeleteOnIdle: to.Ptr("PT10M")}})
	if err != nil || *plain.AutoDeleteOnIdle != "PT10M" {
		t.Fatalf("a queue that does not forward: %v, %v", plain, err)
	}
}

// TestAdminNamesIgnoreCase: the admin API finds an entity by its name in any letter case
// (resource names are case-insensitive) and refuses to create one that differs only in
// case.
func TestAdminNamesIgnoreCase(t *testing.T) {
	t.Parallel()
	_, ac := adminWire(t)
	ctx := wireCtx(t)
	if _, err := ac.CreateQueue(ctx, "Orders", &admin.CreateQueueOptions{Properties: &admin.QueueProperties{UserMetadata: to.Ptr("m")}}); err != nil {
		t.Fatal(err)
	}
	got, err := ac.GetQueue(ctx, "orders", nil)
	if err != nil || got == nil || got.UserMetadata == nil || *got.UserMetadata != "m" {
		t.Fatalf("GetQueue(orders) = %+v, %v; want Orders with its UserMetadata", got, err)
	}
	got.UserMetadata = to.Ptr("n")
	if _, err := ac.UpdateQueue(ctx, "ORDERS", got.QueueProperties, nil); err != nil {
		t.Fatal(err)
	}
	if again, _ := ac.GetQueue(ctx, "Orders", nil); *again.UserMetadata != "n" {
		t.Fatalf("after an update through ORDERS, UserMetadata %q, want n", *again.UserMetadata)
	}
	_, err = ac.CreateQueue(ctx, "ORDERS", nil)
	wantStatus(t, "create ORDERS beside Orders", err, http.StatusConflict)
}
