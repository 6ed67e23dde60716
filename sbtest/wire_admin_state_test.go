package sbtest

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus/admin"
	adminapi "github.com/sbkit/sbkit/sbtest/internal/admin"
)

// The administration API keeps nothing of a deleted entity (its queue, topic with
// subscriptions, or an entity deleted in the model), so create/delete cycles cost no
// memory.
func TestAdminForgetsDeletedEntities(t *testing.T) {
	w, ac := adminWire(t)
	ctx := wireCtx(t)
	meta := to.Ptr(strings.Repeat("m", 1024))
	for i := range 100 {
		if _, err := ac.CreateQueue(ctx, fmt.Sprint("q", i), &admin.CreateQueueOptions{Properties: &admin.QueueProperties{UserMetadata: meta}}); err != nil {
			t.Fatal(err)
		}
		if _, err := ac.DeleteQueue(ctx, fmt.Sprint("q", i), nil); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := ac.CreateTopic(ctx, "t", &admin.CreateTopicOptions{Properties: &admin.TopicProperties{UserMetadata: meta}}); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"a", "b"} {
		if _, err := ac.CreateSubscription(ctx, "t", s, &admin.CreateSubscriptionOptions{Properties: &admin.SubscriptionProperties{UserMetadata: meta}}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := ac.DeleteTopic(ctx, "t", nil); err != nil {
		t.Fatal(err)
	}
	if n := w.srv.w.AdminAPI().Kept(); n != 0 {
		t.Fatalf("the admin API keeps descriptions of %d deleted entities", n)
	}
	// Deleted in the model, forgotten by the next PUT.
	if _, err := ac.CreateQueue(ctx, "gone", &admin.CreateQueueOptions{Properties: &admin.QueueProperties{UserMetadata: meta}}); err != nil {
		t.Fatal(err)
	}
	if err := w.srv.Namespace().DeleteQueue("gone"); err != nil {
		t.Fatal(err)
	}
	if _, err := ac.CreateQueue(ctx, "kept", nil); err != nil {
		t.Fatal(err)
	}
	if n := w.srv.w.AdminAPI().Kept(); n != 1 {
		t.Fatalf("the admin API keeps descriptions of %d entities, want 1 (kept)", n)
	}
}

// UserMetadata holds at most 1,024 characters (QueueProperties.UserMetadata in the .NET
// SDK's administration client: "Max length is 1024 chars"), and an entity at most 12
// authorization rules (Service Bus quotas) with names and keys of at most 256
// characters: the service's limits, refused with 400 before anything is created.
func TestAdminDescriptionLimits(t *testing.T) {
	w, ac := adminWire(t)
	ctx := wireCtx(t)
	long := to.Ptr(strings.Repeat("m", 1025))
	_, err := ac.CreateQueue(ctx, "q", &admin.CreateQueueOptions{Properties: &admin.QueueProperties{UserMetadata: long}})
	wantStatus(t, "queue UserMetadata of 1025 characters", err, http.StatusBadRequest)
	_, err = ac.CreateTopic(ctx, "t", &admin.CreateTopicOptions{Properties: &admin.TopicProperties{UserMetadata: long}})
	wantStatus(t, "topic UserMetadata of 1025 characters", err, http.StatusBadRequest)
	if _, err := ac.CreateTopic(ctx, "t", nil); err != nil {
		t.Fatal(err)
	}
	_, err = ac.CreateSubscription(ctx, "t", "s", &admin.CreateSubscriptionOptions{Properties: &admin.SubscriptionProperties{UserMetadata: long}})
	wantStatus(t, "subscription UserMetadata of 1025 characters", err, http.StatusBadRequest)
	var rules []admin.AuthorizationRule
	for i := range 13 {
		rules = append(rules, admin.AuthorizationRule{KeyName: to.Ptr(fmt.Sprint("k", i)), AccessRights: []admin.AccessRight{admin.AccessRightSend}})
	}
	_, err = ac.CreateQueue(ctx, "q", &admin.CreateQueueOptions{Properties: &admin.QueueProperties{AuthorizationRules: rules}})
	wantStatus(t, "13 authorization rules", err, http.StatusBadRequest)
	_, err = ac.CreateQueue(ctx, "q", &admin.CreateQueueOptions{Properties: &admin.QueueProperties{AuthorizationRules: []admin.AuthorizationRule{
		{KeyName: to.Ptr("k"), PrimaryKey: to.Ptr(strings.Repeat("a", 257)), AccessRights: []admin.AccessRight{admin.AccessRightSend}}}}})
	wantStatus(t, "a key of 257 characters", err, http.StatusBadRequest)
	if _, ok := w.srv.Namespace().Entity("q"); ok {
		t.Fatal("a refused queue was created")
	}
	ok := to.Ptr(strings.Repeat("m", 1024))
	if _, err := ac.CreateQueue(ctx, "q", &admin.CreateQueueOptions{Properties: &admin.QueueProperties{UserMetadata: ok, AuthorizationRules: rules[:12]}}); err != nil {
		t.Fatalf("UserMetadata of 1024 characters and 12 rules: %v", err)
	}
}

// The admin API creates at most the service's 10,000 queues and topics per namespace
// and 2,000 subscriptions per topic (Service Bus quotas), refusing more with 403.
func TestAdminQuotas(t *testing.T) {
	w, ac := adminWire(t)
	ctx := wireCtx(t)
	ns := w.srv.Namespace()
	top, _ := ns.NewTopic("t", nil)
	for i := range adminapi.MaxSubscriptions {
		if _, err := top.NewSubscription(fmt.Sprint("s", i), nil); err != nil {
			t.Fatal(err)
		}
	}
	_, err := ac.CreateSubscription(ctx, "t", "one-more", nil)
	wantStatus(t, "subscription 2,001", err, http.StatusForbidden)
	for i := range adminapi.MaxEntities - 1 {
		if _, err := ns.NewQueue(fmt.Sprint("q", i), nil); err != nil {
			t.Fatal(err)
		}
	}
	_, err = ac.CreateQueue(ctx, "one-more", nil)
	wantStatus(t, "queue 10,001", err, http.StatusForbidden)
	_, err = ac.CreateTopic(ctx, "one-more", nil)
	wantStatus(t, "topic 10,001", err, http.StatusForbidden)
	if err := ns.DeleteQueue("q0"); err != nil {
		t.Fatal(err)
	}
	if _, err := ac.CreateQueue(ctx, "one-more", nil); err != nil {
		t.Fatalf("a queue under the quota again: %v", err)
	}
}
