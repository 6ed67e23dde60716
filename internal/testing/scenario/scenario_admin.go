package scenario

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus/admin"
)

// Administrator is a backend that offers the administration API. Admin returns an admin
// client and an AMQP client of the same namespace, or skips t (a real namespace whose
// connection string lacks Manage rights).
type Administrator interface {
	Admin(t *testing.T) (*admin.Client, *azservicebus.Client)
}

// Admin returns an admin client built from the server's connection string and the one
// option the server hands out.
func (s *Server) Admin(t *testing.T) (*admin.Client, *azservicebus.Client) {
	ac, err := admin.NewClientFromConnectionString(s.srv.ConnectionString(), s.srv.AdminClientOptions())
	if err != nil {
		t.Fatal(err)
	}
	return ac, s.client
}

// Admin returns an admin client of the live namespace, skipping t when the connection
// string has no Manage rights (the namespace answers 401).
func (l *Live) Admin(t *testing.T) (*admin.Client, *azservicebus.Client) {
	ac, err := admin.NewClientFromConnectionString(os.Getenv(ConnectionStringEnv), nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	pager := ac.NewListQueuesPager(&admin.ListQueuesOptions{MaxPageSize: 1})
	if _, err := pager.NextPage(ctx); err != nil {
		var re *azcore.ResponseError
		if errors.As(err, &re) && (re.StatusCode == http.StatusUnauthorized || re.StatusCode == http.StatusForbidden) {
			t.Skipf("the connection string has no Manage rights: %v", err)
		}
		t.Fatal(err)
	}
	return ac, l.client
}

// adminFor returns the backend's admin client or skips t.
func adminFor(t *testing.T, b Backend) (*admin.Client, *azservicebus.Client, func(string) string) {
	a, ok := b.(Administrator)
	if !ok {
		t.Skipf("backend %s has no administration API", b.Name())
	}
	ac, client := a.Admin(t)
	prefix := fmt.Sprintf("sbkit-adm-%x-", time.Now().UnixNano())
	return ac, client, func(s string) string { return prefix + s }
}

func mustAdmin(t *testing.T, what string, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// adminQueue creates a queue with p (nil: the defaults) through the admin API, failing
// t when it cannot, and deletes it when t ends.
func adminQueue(ctx context.Context, t *testing.T, ac *admin.Client, name string, p *admin.QueueProperties) {
	t.Helper()
	_, err := ac.CreateQueue(ctx, name, &admin.CreateQueueOptions{Properties: p})
	mustAdmin(t, "CreateQueue "+name, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), closeTimeout)
		defer cancel()
		_, _ = ac.DeleteQueue(ctx, name, nil)
	})
}

// adminTopic is adminQueue for a topic.
func adminTopic(ctx context.Context, t *testing.T, ac *admin.Client, name string, p *admin.TopicProperties) {
	t.Helper()
	_, err := ac.CreateTopic(ctx, name, &admin.CreateTopicOptions{Properties: p})
	mustAdmin(t, "CreateTopic "+name, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), closeTimeout)
		defer cancel()
		_, _ = ac.DeleteTopic(ctx, name, nil)
	})
}

// adminCRUD: every property of a queue, topic, subscription and rule set through the
// admin API comes back as set; an update changes it; not found and already exists are
// the SDK's nil result and HTTP 409; deleted entities are gone (SDK live tests
// TestAdminClient_CreateQueue_Standard, TestAdminClient_TopicAndSubscription_Standard,
// TestAdminClient_UpdateQueue, TestAdminClient_NotFound).
func adminCRUD(t *testing.T, b Backend) {
	ac, _, name := adminFor(t, b)
	ctx := testContext(t)
	fwd := name("fwd")
	adminQueue(ctx, t, ac, fwd, nil)

	q := name("q")
	status := admin.EntityStatusActive
	qp := admin.QueueProperties{
		LockDuration: to.Ptr("PT45S"), MaxSizeInMegabytes: to.Ptr(int32(2048)), RequiresDuplicateDetection: to.Ptr(true),
		RequiresSession: to.Ptr(false), DefaultMessageTimeToLive: to.Ptr("PT6H"), DeadLetteringOnMessageExpiration: to.Ptr(true),
		DuplicateDetectionHistoryTimeWindow: to.Ptr("PT4H"), MaxDeliveryCount: to.Ptr(int32(7)), EnableBatchedOperations: to.Ptr(false),
		Status: &status, AutoDeleteOnIdle: to.Ptr("PT10M"), EnablePartitioning: to.Ptr(false), UserMetadata: to.Ptr("meta"),
		ForwardDeadLetteredMessagesTo: to.Ptr(fwd),
	}
	adminQueue(ctx, t, ac, q, &qp)
	got, err := ac.GetQueue(ctx, q, nil)
	mustAdmin(t, "GetQueue", err)
	p := got.QueueProperties
	if *p.LockDuration != "PT45S" || *p.MaxSizeInMegabytes != 2048 || !*p.RequiresDuplicateDetection || *p.RequiresSession ||
		*p.DefaultMessageTimeToLive != "PT6H" || !*p.DeadLetteringOnMessageExpiration || *p.DuplicateDetectionHistoryTimeWindow != "PT4H" ||
		*p.MaxDeliveryCount != 7 || *p.EnableBatchedOperations || *p.Status != status || *p.AutoDeleteOnIdle != "PT10M" ||
		*p.UserMetadata != "meta" || p.ForwardDeadLetteredMessagesTo == nil {
		t.Errorf("queue properties did not round-trip: %+v", p)
	}
	p.MaxDeliveryCount = to.Ptr(int32(3))
	upd, err := ac.UpdateQueue(ctx, q, p, nil)
	mustAdmin(t, "UpdateQueue", err)
	if *upd.MaxDeliveryCount != 3 {
		t.Errorf("update: MaxDeliveryCount %d", *upd.MaxDeliveryCount)
	}
	_, err = ac.CreateQueue(ctx, q, nil)
	var re *azcore.ResponseError
	if !errors.As(err, &re) || re.StatusCode != http.StatusConflict {
		t.Errorf("create existing queue: %v, want HTTP 409", err)
	}

	top := name("t")
	adminTopic(ctx, t, ac, top, &admin.TopicProperties{
		DefaultMessageTimeToLive: to.Ptr("PT12H"), MaxSizeInMegabytes: to.Ptr(int32(1024)), UserMetadata: to.Ptr("tm"),
	})
	tp, err := ac.GetTopic(ctx, top, nil)
	mustAdmin(t, "GetTopic", err)
	if *tp.DefaultMessageTimeToLive != "PT12H" || *tp.UserMetadata != "tm" {
		t.Errorf("topic properties: %+v", tp.TopicProperties)
	}
	_, err = ac.CreateSubscription(ctx, top, "s", &admin.CreateSubscriptionOptions{Properties: &admin.SubscriptionProperties{
		LockDuration: to.Ptr("PT30S"), MaxDeliveryCount: to.Ptr(int32(4)), DeadLetteringOnMessageExpiration: to.Ptr(true),
		DefaultMessageTimeToLive: to.Ptr("PT1H"), UserMetadata: to.Ptr("sm"), ForwardTo: to.Ptr(fwd),
	}})
	mustAdmin(t, "CreateSubscription", err)
	sp, err := ac.GetSubscription(ctx, top, "s", nil)
	mustAdmin(t, "GetSubscription", err)
	if *sp.LockDuration != "PT30S" || *sp.MaxDeliveryCount != 4 || !*sp.DeadLetteringOnMessageExpiration ||
		*sp.DefaultMessageTimeToLive != "PT1H" || *sp.UserMetadata != "sm" || sp.ForwardTo == nil {
		t.Errorf("subscription properties: %+v", sp.SubscriptionProperties)
	}
	_, err = ac.CreateRule(ctx, top, "s", &admin.CreateRuleOptions{Name: to.Ptr("r"),
		Filter: &admin.SQLFilter{Expression: "a = @p", Parameters: map[string]any{"@p": int64(1)}},
		Action: &admin.SQLAction{Expression: "SET b = 2"}})
	mustAdmin(t, "CreateRule", err)
	rp, err := ac.GetRule(ctx, top, "s", "r", nil)
	mustAdmin(t, "GetRule", err)
	if f, ok := rp.Filter.(*admin.SQLFilter); !ok || f.Expression != "a = @p" || f.Parameters["@p"] != int64(1) {
		t.Errorf("rule filter %+v", rp.Filter)
	}
	if a, ok := rp.Action.(*admin.SQLAction); !ok || a.Expression != "SET b = 2" {
		t.Errorf("rule action %+v", rp.Action)
	}
	_, err = ac.UpdateRule(ctx, top, "s", admin.RuleProperties{Name: "r", Filter: &admin.CorrelationFilter{CorrelationID: to.Ptr("c")}})
	mustAdmin(t, "UpdateRule", err)
	rp, err = ac.GetRule(ctx, top, "s", "r", nil)
	mustAdmin(t, "GetRule after update", err)
	if f, ok := rp.Filter.(*admin.CorrelationFilter); !ok || *f.CorrelationID != "c" || rp.Action != nil {
		t.Errorf("updated rule %+v", rp)
	}
	_, err = ac.DeleteRule(ctx, top, "s", "r", nil)
	mustAdmin(t, "DeleteRule", err)
	_, err = ac.DeleteSubscription(ctx, top, "s", nil)
	mustAdmin(t, "DeleteSubscription", err)
	if s, err := ac.GetSubscription(ctx, top, "s", nil); s != nil || err != nil {
		t.Errorf("deleted subscription: %v %v", s, err)
	}
	_, err = ac.DeleteQueue(ctx, q, nil)
	mustAdmin(t, "DeleteQueue", err)
	if g, err := ac.GetQueue(ctx, q, nil); g != nil || err != nil {
		t.Errorf("deleted queue: %v %v", g, err)
	}
}

// drainSubscription receives (and deletes) what a subscription holds until it stays
// quiet, and returns the messages by MessageID.
func drainSubscription(t *testing.T, client *azservicebus.Client, topic, sub string, want int) map[string]*azservicebus.ReceivedMessage {
	t.Helper()
	r, err := client.NewReceiverForSubscription(topic, sub, &azservicebus.ReceiverOptions{ReceiveMode: azservicebus.ReceiveModeReceiveAndDelete})
	if err != nil {
		t.Errorf("receiver of %s: %v", sub, err)
		return nil
	}
	defer r.Close(context.Background())
	got := map[string]*azservicebus.ReceivedMessage{}
	deadline := time.Now().Add(waitTimeout)
	for len(got) < want && time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		ms, _ := r.ReceiveMessages(ctx, 10, nil)
		cancel()
		for _, m := range ms {
			got[m.MessageID] = m
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*quietWait)
	defer cancel()
	ms, _ := r.ReceiveMessages(ctx, 10, nil)
	for _, m := range ms {
		got[m.MessageID] = m
	}
	return got
}

// adminFilters: a topic whose subscriptions filter by SQL, by correlation, by nothing and
// by a false filter, one with an action; every message lands exactly where the filters
// say and nowhere else ("Topic filters and actions", "SQL filter syntax").
func adminFilters(t *testing.T, b Backend) {
	ac, client, name := adminFor(t, b)
	ctx := testContext(t)
	top := name("filters")
	adminTopic(ctx, t, ac, top, nil)
	subs := map[string]*admin.RuleProperties{
		"all":    nil,
		"sql":    {Name: "sql", Filter: &admin.SQLFilter{Expression: "color = 'red' AND quantity > 5"}},
		"corr":   {Name: "corr", Filter: &admin.CorrelationFilter{Subject: to.Ptr("order"), ApplicationProperties: map[string]any{"region": "eu"}}},
		"none":   {Name: "none", Filter: &admin.FalseFilter{}},
		"action": {Name: "double", Filter: &admin.SQLFilter{Expression: "EXISTS(quantity) AND sys.Label LIKE 'ord%'"}, Action: &admin.SQLAction{Expression: "SET doubled = quantity * 2"}},
	}
	for s, rule := range subs {
		_, err := ac.CreateSubscription(ctx, top, s, &admin.CreateSubscriptionOptions{Properties: &admin.SubscriptionProperties{DefaultRule: rule}})
		mustAdmin(t, "CreateSubscription "+s, err)
	}
	snd, err := client.NewSender(top, nil)
	mustAdmin(t, "sender", err)
	defer snd.Close(context.Background())
	for _, m := range []*azservicebus.Message{
		{MessageID: to.Ptr("red-big-eu"), Subject: to.Ptr("order"), ApplicationProperties: map[string]any{"color": "red", "quantity": 10, "region": "eu"}},
		{MessageID: to.Ptr("red-small-us"), Subject: to.Ptr("order"), ApplicationProperties: map[string]any{"color": "red", "quantity": 2, "region": "us"}},
		{MessageID: to.Ptr("blue-big-eu"), Subject: to.Ptr("invoice"), ApplicationProperties: map[string]any{"color": "blue", "quantity": 9, "region": "eu"}},
		{MessageID: to.Ptr("plain")},
	} {
		mustAdmin(t, "send", snd.SendMessage(ctx, m, nil))
	}
	want := map[string][]string{
		"all":    {"blue-big-eu", "plain", "red-big-eu", "red-small-us"},
		"sql":    {"red-big-eu"},
		"corr":   {"red-big-eu"},
		"none":   nil,
		"action": {"red-big-eu", "red-small-us"},
	}
	var wg sync.WaitGroup
	for s, w := range want {
		wg.Go(func() { // each drain ends with a quiet wait: run them at once
			got := drainSubscription(t, client, top, s, len(w))
			if names := slices.Sorted(maps.Keys(got)); !slices.Equal(names, w) {
				t.Errorf("subscription %s got %v, want %v", s, names, w)
			}
			if s == "action" {
				if m := got["red-big-eu"]; m == nil || fmt.Sprint(m.ApplicationProperties["doubled"]) != "20" {
					t.Errorf("action did not set doubled: %v", m)
				}
			}
		})
	}
	wg.Wait()
}

// adminForwarding: a queue forwarding to another, and one forwarding its dead letters,
// created through the admin API ("Chaining Service Bus entities with autoforwarding";
// "Messages, payloads, and serialization" for DeadLetterSource).
func adminForwarding(t *testing.T, b Backend) {
	ac, client, name := adminFor(t, b)
	ctx := testContext(t)
	dst, src, sink, dl := name("dst"), name("src"), name("sink"), name("dl")
	for _, q := range []struct {
		name string
		p    *admin.QueueProperties
	}{{dst, nil}, {sink, nil}, {src, &admin.QueueProperties{ForwardTo: to.Ptr(dst)}}, {dl, &admin.QueueProperties{ForwardDeadLetteredMessagesTo: to.Ptr(sink)}}} {
		adminQueue(ctx, t, ac, q.name, q.p)
	}
	send := func(queue, id string) {
		s, err := client.NewSender(queue, nil)
		mustAdmin(t, "sender", err)
		defer s.Close(context.Background())
		mustAdmin(t, "send", s.SendMessage(ctx, &azservicebus.Message{MessageID: to.Ptr(id)}, nil))
	}
	recv := func(queue string, mode azservicebus.ReceiveMode) (*azservicebus.Receiver, *azservicebus.ReceivedMessage) {
		r, err := client.NewReceiverForQueue(queue, &azservicebus.ReceiverOptions{ReceiveMode: mode})
		mustAdmin(t, "receiver", err)
		t.Cleanup(func() { _ = r.Close(context.Background()) })
		return r, receiveN(t, r, 1)[0]
	}
	send(src, "forwarded")
	if _, m := recv(dst, azservicebus.ReceiveModeReceiveAndDelete); m.MessageID != "forwarded" {
		t.Errorf("dst got %q", m.MessageID)
	}
	send(dl, "doomed")
	r, m := recv(dl, azservicebus.ReceiveModePeekLock)
	mustAdmin(t, "dead-letter", r.DeadLetterMessage(ctx, m, &azservicebus.DeadLetterOptions{Reason: to.Ptr("bad")}))
	_, got := recv(sink, azservicebus.ReceiveModeReceiveAndDelete)
	if got.MessageID != "doomed" || got.DeadLetterSource == nil || *got.DeadLetterSource != dl || got.DeadLetterReason == nil || *got.DeadLetterReason != "bad" {
		t.Errorf("sink got %q, source %v, reason %v", got.MessageID, got.DeadLetterSource, got.DeadLetterReason)
	}
}

// adminRuntimeCounts: the runtime properties count what the broker holds: active,
// scheduled and dead-lettered messages, and their total.
func adminRuntimeCounts(t *testing.T, b Backend) {
	ac, client, name := adminFor(t, b)
	ctx := testContext(t)
	q := name("counts")
	adminQueue(ctx, t, ac, q, nil)
	s, err := client.NewSender(q, nil)
	mustAdmin(t, "sender", err)
	defer s.Close(context.Background())
	for _, id := range []string{"a", "b", "c"} {
		mustAdmin(t, "send", s.SendMessage(ctx, &azservicebus.Message{MessageID: to.Ptr(id)}, nil))
	}
	_, err = s.ScheduleMessages(ctx, []*azservicebus.Message{{MessageID: to.Ptr("later")}}, time.Now().Add(time.Hour), nil)
	mustAdmin(t, "schedule", err)
	r, err := client.NewReceiverForQueue(q, nil)
	mustAdmin(t, "receiver", err)
	defer r.Close(context.Background())
	m := receiveN(t, r, 1)[0]
	mustAdmin(t, "dead-letter", r.DeadLetterMessage(ctx, m, nil))
	var rt *admin.GetQueueRuntimePropertiesResponse
	waitFor(t, "runtime counts", func() bool { // a real namespace updates its counts a little later
		rt, err = ac.GetQueueRuntimeProperties(ctx, q, nil)
		return err == nil && rt.ActiveMessageCount == 2 && rt.DeadLetterMessageCount == 1 && rt.ScheduledMessageCount == 1 && rt.TotalMessageCount == 4
	})
}
