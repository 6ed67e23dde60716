package sbtest

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus/admin"
	adminapi "github.com/sbkit/sbkit/sbtest/internal/admin"
)

// adminWire is a server with no entities, an AMQP client and an admin client built
// from the same connection string.
func adminWire(t *testing.T) (*wired, *admin.Client) {
	t.Helper()
	w := newWire(t, nil)
	ac, err := admin.NewClientFromConnectionString(w.srv.ConnectionString(), w.srv.AdminClientOptions())
	if err != nil {
		t.Fatal(err)
	}
	return w, ac
}

func wantStatus(t *testing.T, what string, err error, status int) {
	t.Helper()
	var re *azcore.ResponseError
	if !errors.As(err, &re) || re.StatusCode != status {
		t.Fatalf("%s: %v, want HTTP %d", what, err, status)
	}
}

// The SDK live tests TestAdminClient_QueueWithMaxValues and TestAdminClient_UpdateQueue:
// every property comes back as sent, the modelled ones take effect, RequiresSession cannot
// change, and the errors are the service's statuses.
func TestAdminQueueRoundTrip(t *testing.T) {
	w, ac := adminWire(t)
	ctx := wireCtx(t)
	es := admin.EntityStatusReceiveDisabled
	props := admin.QueueProperties{
		LockDuration:                        to.Ptr("PT45S"),
		MaxSizeInMegabytes:                  to.Ptr(int32(4096)),
		RequiresDuplicateDetection:          to.Ptr(true),
		RequiresSession:                     to.Ptr(false),
		DefaultMessageTimeToLive:            to.Ptr("P10675199DT2H48M5.4775807S"),
		DeadLetteringOnMessageExpiration:    to.Ptr(true),
		DuplicateDetectionHistoryTimeWindow: to.Ptr("PT4H"),
		MaxDeliveryCount:                    to.Ptr(int32(100)),
		EnableBatchedOperations:             to.Ptr(false),
		Status:                              &es,
		AutoDeleteOnIdle:                    to.Ptr("PT10M"),
		EnablePartitioning:                  to.Ptr(false),
		UserMetadata:                        to.Ptr("some metadata"),
		MaxMessageSizeInKilobytes:           to.Ptr(int64(256)),
		AuthorizationRules: []admin.AuthorizationRule{{
			AccessRights: []admin.AccessRight{admin.AccessRightListen, admin.AccessRightSend},
			KeyName:      to.Ptr("k"), PrimaryKey: to.Ptr("p"), SecondaryKey: to.Ptr("s"),
		}},
	}
	created, err := ac.CreateQueue(ctx, "q", &admin.CreateQueueOptions{Properties: &props})
	if err != nil {
		t.Fatal(err)
	}
	got, err := ac.GetQueue(ctx, "q", nil)
	if err != nil || got == nil {
		t.Fatalf("GetQueue: %v %v", got, err)
	}
	if !equalJSON(t, props, got.QueueProperties) || !equalJSON(t, props, created.QueueProperties) {
		t.Fatal("properties did not round-trip")
	}
	e, ok := w.srv.Namespace().Entity("q")
	if !ok {
		t.Fatal("no queue in the model")
	}
	if o := e.Options(); o.LockDuration != 45*time.Second || o.MaxDeliveryCount != 100 || !o.DeadLetterOnExpiration || o.DuplicateDetectionWindow != 4*time.Hour {
		t.Fatalf("model options %+v", o)
	}

	got.MaxDeliveryCount = to.Ptr(int32(3))
	got.LockDuration = to.Ptr("PT1M")
	if upd, err := ac.UpdateQueue(ctx, "q", got.QueueProperties, nil); err != nil || *upd.MaxDeliveryCount != 3 {
		t.Fatalf("UpdateQueue: %v", err)
	}
	if o := e.Options(); o.MaxDeliveryCount != 3 || o.LockDuration != time.Minute {
		t.Fatalf("update did not reach the model: %+v", o)
	}
	got.RequiresSession = to.Ptr(true)
	_, err = ac.UpdateQueue(ctx, "q", got.QueueProperties, nil)
	if err == nil || !strings.Contains(err.Error(), "The value for the RequiresSession property of an existing Queue cannot be changed") {
		t.Fatalf("RequiresSession change: %v", err)
	}
	got.RequiresSession = to.Ptr(false)
	// Itself in another letter case is itself: names are case-insensitive ("Naming rules
	// and restrictions for Azure resources").
	got.ForwardTo = to.Ptr("Q")
	_, err = ac.UpdateQueue(ctx, "q", got.QueueProperties, nil)
	wantStatus(t, "forward to itself as Q", err, http.StatusBadRequest)
	if o := e.Options(); o.ForwardTo != "" {
		t.Fatalf("a refused update forwards to %q", o.ForwardTo)
	}
	got.ForwardTo = nil
	_, err = ac.UpdateQueue(ctx, "missing", got.QueueProperties, nil)
	wantStatus(t, "update missing", err, http.StatusNotFound)
	_, err = ac.CreateQueue(ctx, "q", nil)
	wantStatus(t, "create existing", err, http.StatusConflict)
	for name, bad := range map[string]admin.QueueProperties{
		"lock too long":  {LockDuration: to.Ptr("PT6M")},
		"not a duration": {DefaultMessageTimeToLive: to.Ptr("six hours")},
		"zero mdc":       {MaxDeliveryCount: to.Ptr(int32(0))},
		"bad status":     {Status: to.Ptr(admin.EntityStatus("Sleeping"))},
		"bad size":       {MaxSizeInMegabytes: to.Ptr(int32(1000))},
		"dup window":     {RequiresDuplicateDetection: to.Ptr(true), DuplicateDetectionHistoryTimeWindow: to.Ptr("PT1S")},
		"forward nobody": {ForwardTo: to.Ptr("nowhere")},
		"forward self":   {ForwardTo: to.Ptr("sb://host/q2")},
		"auto delete":    {AutoDeleteOnIdle: to.Ptr("PT1M")},
	} {
		_, err := ac.CreateQueue(ctx, "q2", &admin.CreateQueueOptions{Properties: &bad})
		wantStatus(t, name, err, http.StatusBadRequest)
	}
	if _, ok := w.srv.Namespace().Entity("q2"); ok {
		t.Fatal("a refused create left a queue behind")
	}
	for _, name := range []string{"-q", "q-", "a b", "q%21", strings.Repeat("q", 261)} {
		_, err := ac.CreateQueue(ctx, name, nil)
		wantStatus(t, "queue name "+name, err, http.StatusBadRequest)
	}
	if _, err := ac.CreateQueue(ctx, "a.b_c-d/e", nil); err != nil {
		t.Fatalf("a valid name with every allowed character: %v", err)
	}

	// Not found is nil, nil (TestAdminClient_NotFound); delete twice is 404.
	if q, err := ac.GetQueue(ctx, "missing", nil); q != nil || err != nil {
		t.Fatalf("GetQueue(missing) = %v, %v", q, err)
	}
	if q, err := ac.GetQueueRuntimeProperties(ctx, "missing", nil); q != nil || err != nil {
		t.Fatalf("GetQueueRuntimeProperties(missing) = %v, %v", q, err)
	}
	if _, err := ac.DeleteQueue(ctx, "q", nil); err != nil {
		t.Fatal(err)
	}
	_, err = ac.DeleteQueue(ctx, "q", nil)
	wantStatus(t, "delete missing", err, http.StatusNotFound)
	if _, ok := w.srv.Namespace().Entity("q"); ok {
		t.Fatal("deleted queue still in the model")
	}
}

// Defaults as the service reports them for a queue created with no properties
// (TestAdminClient_CreateQueue_Standard), and for one made in memory.
func TestAdminQueueDefaults(t *testing.T) {
	w, ac := adminWire(t)
	ctx := wireCtx(t)
	if _, err := ac.CreateQueue(ctx, "a", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := w.srv.Namespace().NewQueue("b", nil); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"a", "b"} {
		q, err := ac.GetQueue(ctx, name, nil)
		if err != nil || q == nil {
			t.Fatal(err)
		}
		p := q.QueueProperties
		if *p.LockDuration != "PT1M" || *p.MaxDeliveryCount != 10 || *p.DefaultMessageTimeToLive != "P10675199DT2H48M5.4775807S" ||
			*p.MaxSizeInMegabytes != 1024 || *p.RequiresSession || *p.RequiresDuplicateDetection || *p.Status != admin.EntityStatusActive ||
			*p.DuplicateDetectionHistoryTimeWindow != "PT10M" || !*p.EnableBatchedOperations || *p.MaxMessageSizeInKilobytes != 256 {
			t.Errorf("%s: %s", name, toJSON(t, p))
		}
	}
}

func TestAdminListPaging(t *testing.T) {
	_, ac := adminWire(t)
	ctx := wireCtx(t)
	var want []string
	for _, n := range []string{"q1", "q2", "q3", "q4", "q5"} {
		if _, err := ac.CreateQueue(ctx, n, nil); err != nil {
			t.Fatal(err)
		}
		want = append(want, n)
	}
	if _, err := ac.CreateTopic(ctx, "t", nil); err != nil {
		t.Fatal(err)
	}
	var got []string
	pager := ac.NewListQueuesPager(&admin.ListQueuesOptions{MaxPageSize: 2})
	pages := 0
	for pager.More() {
		page, err := pager.NextPage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		pages++
		for _, q := range page.Queues {
			got = append(got, q.QueueName)
		}
	}
	if !slices.Equal(got, want) || pages != 3 {
		t.Fatalf("queues %v in %d pages", got, pages)
	}
	rt := ac.NewListQueuesRuntimePropertiesPager(nil)
	page, err := rt.NextPage(ctx)
	if err != nil || len(page.QueueRuntimeProperties) != 5 {
		t.Fatalf("runtime list: %v", err)
	}
	tp := ac.NewListTopicsPager(nil)
	tpage, err := tp.NextPage(ctx)
	if err != nil || len(tpage.Topics) != 1 || tpage.Topics[0].TopicName != "t" {
		t.Fatalf("topics: %+v %v", tpage, err)
	}
}

// Rules over the admin API: a subscription created with a default rule, SQL and
// correlation rules created, listed, read, updated and deleted
// (TestAdminClient_CreateRules, TestAdminClient_TopicAndSubscription_WithActionAndFilterDefaultSubscriptionRule),
// and messages sent over AMQP land where the rules say.
func TestAdminRulesRouteOverTheWire(t *testing.T) {
	w, ac := adminWire(t)
	ctx := wireCtx(t)
	if _, err := ac.CreateTopic(ctx, "orders", nil); err != nil {
		t.Fatal(err)
	}
	_, err := ac.CreateSubscription(ctx, "orders", "red", &admin.CreateSubscriptionOptions{Properties: &admin.SubscriptionProperties{
		DefaultRule: &admin.RuleProperties{Name: "onlyred", Filter: &admin.SQLFilter{Expression: "color = @c", Parameters: map[string]any{"@c": "red"}},
			Action: &admin.SQLAction{Expression: "SET seen = 'yes'"}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ac.CreateSubscription(ctx, "orders", "eu", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := ac.DeleteRule(ctx, "orders", "eu", "$Default", nil); err != nil {
		t.Fatal(err)
	}
	cr, err := ac.CreateRule(ctx, "orders", "eu", &admin.CreateRuleOptions{Name: to.Ptr("eu"),
		Filter: &admin.CorrelationFilter{Subject: to.Ptr("order"), ApplicationProperties: map[string]any{"region": "eu", "n": int64(1)}}})
	if err != nil {
		t.Fatal(err)
	}
	if f := cr.Filter.(*admin.CorrelationFilter); *f.Subject != "order" || f.ApplicationProperties["region"] != "eu" || f.ApplicationProperties["n"] != int64(1) {
		t.Fatalf("created correlation filter %+v", f)
	}
	_, err = ac.CreateRule(ctx, "orders", "eu", &admin.CreateRuleOptions{Name: to.Ptr("bad"), Filter: &admin.SQLFilter{Expression: "color = "}})
	wantStatus(t, "bad SQL", err, http.StatusBadRequest)
	_, err = ac.CreateRule(ctx, "orders", "eu", &admin.CreateRuleOptions{Name: to.Ptr("eu")})
	wantStatus(t, "duplicate rule", err, http.StatusConflict)
	if r, err := ac.GetRule(ctx, "orders", "red", "onlyred", nil); err != nil || r.Filter.(*admin.SQLFilter).Parameters["@c"] != "red" ||
		r.Action.(*admin.SQLAction).Expression != "SET seen = 'yes'" {
		t.Fatalf("GetRule: %+v %v", r, err)
	}
	var names []string
	rp := ac.NewListRulesPager("orders", "red", nil)
	for rp.More() {
		page, err := rp.NextPage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range page.Rules {
			names = append(names, r.Name)
		}
	}
	if !slices.Equal(names, []string{"onlyred"}) {
		t.Fatalf("rules of red: %v", names)
	}
	if _, err := ac.UpdateRule(ctx, "orders", "eu", admin.RuleProperties{Name: "eu",
		Filter: &admin.CorrelationFilter{Subject: to.Ptr("order"), ApplicationProperties: map[string]any{"region": "eu"}}}); err != nil {
		t.Fatal(err)
	}

	s, err := w.client.NewSender("orders", nil)
	if err != nil {
		t.Fatal(err)
	}
	send := func(body, color, region string) {
		m := &azservicebus.Message{Body: []byte(body), Subject: to.Ptr("order"), ApplicationProperties: map[string]any{"color": color, "region": region}}
		if err := s.SendMessage(ctx, m, nil); err != nil {
			t.Fatal(err)
		}
	}
	send("red-eu", "red", "eu")
	send("blue-eu", "blue", "eu")
	send("red-us", "red", "us")
	send("blue-us", "blue", "us")
	red, _ := w.srv.Namespace().Entity("orders/Subscriptions/red")
	eu, _ := w.srv.Namespace().Entity("orders/Subscriptions/eu")
	if got := bodies(red.Active()); !slices.Equal(got, []string{"red-eu", "red-us"}) {
		t.Errorf("red got %v", got)
	}
	if got := bodies(eu.Active()); !slices.Equal(got, []string{"red-eu", "blue-eu"}) {
		t.Errorf("eu got %v", got)
	}
	if m := red.Active()[0]; m.ApplicationProperties["seen"] != "yes" || m.ApplicationProperties[RuleNameProperty] != "onlyred" {
		t.Errorf("action not applied: %v", m.ApplicationProperties)
	}

	// Runtime properties count what the model holds.
	rt, err := ac.GetSubscriptionRuntimeProperties(ctx, "orders", "eu", nil)
	if err != nil || rt.ActiveMessageCount != 2 || rt.TotalMessageCount != 2 {
		t.Fatalf("eu runtime %+v %v", rt, err)
	}
	trt, err := ac.GetTopicRuntimeProperties(ctx, "orders", nil)
	if err != nil || trt.SubscriptionCount != 2 || trt.SQLFilterCount != 1 || trt.CorrelationFilterCount != 1 {
		t.Fatalf("topic runtime %+v %v", trt, err)
	}
	if _, err := ac.DeleteSubscription(ctx, "orders", "eu", nil); err != nil {
		t.Fatal(err)
	}
	if sub, err := ac.GetSubscription(ctx, "orders", "eu", nil); sub != nil || err != nil {
		t.Fatalf("deleted subscription: %v %v", sub, err)
	}
	if _, err := ac.DeleteTopic(ctx, "orders", nil); err != nil {
		t.Fatal(err)
	}
	if _, ok := w.srv.Namespace().Entity("orders/Subscriptions/red"); ok {
		t.Fatal("subscription outlived its topic")
	}
}

// The admin API shares the AMQP port, and closing the server closes its HTTPS
// connections too (no goroutine left behind).
func TestAdminSharesPortAndCloses(t *testing.T) {
	base := runtime.NumGoroutine()
	srv, err := NewServer(nil)
	if err != nil {
		t.Fatal(err)
	}
	ac, err := admin.NewClientFromConnectionString(srv.ConnectionString(), srv.AdminClientOptions())
	if err != nil {
		t.Fatal(err)
	}
	ctx := wireCtx(t)
	if _, err := ac.CreateQueue(ctx, "q", nil); err != nil {
		t.Fatal(err)
	}
	client, err := azservicebus.NewClientFromConnectionString(srv.ConnectionString(), nil)
	if err != nil {
		t.Fatal(err)
	}
	snd, err := client.NewSender("q", nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := snd.SendMessage(ctx, &azservicebus.Message{Body: []byte("x")}, nil); err != nil {
		t.Fatal(err)
	}
	rt, err := ac.GetQueueRuntimeProperties(ctx, "q", nil)
	if err != nil || rt.ActiveMessageCount != 1 || rt.SizeInBytes == 0 {
		t.Fatalf("runtime %+v %v", rt, err)
	}
	_ = client.Close(ctx)
	done := make(chan error, 1)
	go func() { done <- srv.Close(context.Background()) }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Close hangs with an admin connection open")
	}
	short, cancel := context.WithTimeout(ctx, 300*time.Millisecond) // the SDK retries a refused connection
	defer cancel()
	if _, err := ac.GetQueue(short, "q", nil); err == nil {
		t.Fatal("admin API still answers after Close")
	}
	noGoroutinesAbove(t, base)
}

func toJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func equalJSON(t *testing.T, want, got any) bool {
	t.Helper()
	w, g := toJSON(t, want), toJSON(t, got)
	if w != g {
		t.Errorf("want %s\n got %s", w, g)
	}
	return w == g
}

// Admin updates run while messages flow: the options change under the entity's lock
// (run with -race), and a malformed body is the service's 400, not a crash.
func TestAdminUpdatesWhileMessagesFlow(t *testing.T) {
	w, ac := adminWire(t)
	ctx := wireCtx(t)
	if _, err := ac.CreateQueue(ctx, "q", nil); err != nil {
		t.Fatal(err)
	}
	ns := w.srv.Namespace()
	done := make(chan struct{})
	go func() {
		defer close(done)
		s, _ := ns.NewSender("q", nil)
		r, _ := ns.NewReceiverForQueue("q", nil)
		for range 50 {
			_ = s.SendMessage(ctx, &azservicebus.Message{Body: []byte("x")}, nil)
			ms, _ := r.ReceiveMessages(ctx, 1, nil)
			for _, m := range ms {
				_ = r.AbandonMessage(ctx, m, nil)
			}
		}
	}()
	for i := range 20 {
		props := admin.QueueProperties{MaxDeliveryCount: to.Ptr(int32(5 + i)), LockDuration: to.Ptr("PT30S")}
		if _, err := ac.UpdateQueue(ctx, "q", props, nil); err != nil {
			t.Fatal(err)
		}
	}
	<-done
	if o, _ := ns.Entity("q"); o.Options().MaxDeliveryCount != 24 {
		t.Fatalf("MaxDeliveryCount %d", o.Options().MaxDeliveryCount)
	}

	hc := w.srv.AdminHTTPClient()
	defer hc.CloseIdleConnections()
	for _, body := range []string{"<entry", "<entry xmlns=\"http://www.w3.org/2005/Atom\"><content/></entry>", strings.Repeat("x", adminapi.MaxBody+10)} {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPut, "https://"+w.srv.Addr().String()+"/bad", strings.NewReader(body))
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest && resp.StatusCode != http.StatusRequestEntityTooLarge {
			t.Errorf("body %.20q: status %d", body, resp.StatusCode)
		}
	}
	if _, ok := ns.Entity("bad"); ok {
		t.Fatal("a malformed request created an entity")
	}
}

// BenchmarkAdminGetQueueRuntime measures one admin round trip over TLS (the SDK's admin
// client, kept-alive HTTPS) against a queue holding 1000 messages.
func BenchmarkAdminGetQueueRuntime(b *testing.B) {
	srv, err := NewServer(&ServerOptions{Queues: map[string]*EntityOptions{"q": nil}})
	if err != nil {
		b.Fatal(err)
	}
	defer srv.Close(context.Background())
	s, _ := srv.Namespace().NewSender("q", nil)
	ctx := context.Background()
	for range 1000 {
		if err := s.SendMessage(ctx, &azservicebus.Message{Body: []byte("x")}, nil); err != nil {
			b.Fatal(err)
		}
	}
	ac, err := admin.NewClientFromConnectionString(srv.ConnectionString(), srv.AdminClientOptions())
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		rt, err := ac.GetQueueRuntimeProperties(ctx, "q", nil)
		if err != nil || rt.ActiveMessageCount != 1000 {
			b.Fatalf("%+v %v", rt, err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "requests/s")
}

// The not-found answers of every getter are what the SDK turns into nil, nil
// (TestAdminClient_NotFound), and deleting what does not exist is a 404.
func TestAdminNotFound(t *testing.T) {
	_, ac := adminWire(t)
	ctx := wireCtx(t)
	if r, err := ac.GetTopic(ctx, "nope", nil); r != nil || err != nil {
		t.Fatalf("GetTopic: %v %v", r, err)
	}
	if r, err := ac.GetTopicRuntimeProperties(ctx, "nope", nil); r != nil || err != nil {
		t.Fatalf("GetTopicRuntimeProperties: %v %v", r, err)
	}
	if r, err := ac.GetSubscription(ctx, "nope", "s", nil); r != nil || err != nil {
		t.Fatalf("GetSubscription: %v %v", r, err)
	}
	if _, err := ac.CreateTopic(ctx, "t", nil); err != nil {
		t.Fatal(err)
	}
	if r, err := ac.GetSubscriptionRuntimeProperties(ctx, "t", "s", nil); r != nil || err != nil {
		t.Fatalf("GetSubscriptionRuntimeProperties: %v %v", r, err)
	}
	if _, err := ac.CreateSubscription(ctx, "t", "s", nil); err != nil {
		t.Fatal(err)
	}
	if r, err := ac.GetRule(ctx, "t", "s", "nope", nil); r != nil || err != nil {
		t.Fatalf("GetRule: %v %v", r, err)
	}
	_, err := ac.DeleteRule(ctx, "t", "s", "nope", nil)
	wantStatus(t, "DeleteRule", err, http.StatusNotFound)
	_, err = ac.DeleteTopic(ctx, "nope", nil)
	wantStatus(t, "DeleteTopic", err, http.StatusNotFound)
	_, err = ac.CreateSubscription(ctx, "nope", "s", nil)
	wantStatus(t, "CreateSubscription on a missing topic", err, http.StatusNotFound)
	_, err = ac.CreateTopic(ctx, "t", nil)
	wantStatus(t, "CreateTopic existing", err, http.StatusConflict)
	_, err = ac.CreateQueue(ctx, "t", nil)
	wantStatus(t, "CreateQueue named like a topic", err, http.StatusConflict)
	_, err = ac.UpdateTopic(ctx, "nope", admin.TopicProperties{}, nil)
	wantStatus(t, "UpdateTopic missing", err, http.StatusNotFound)
	_, err = ac.UpdateSubscription(ctx, "t", "nope", admin.SubscriptionProperties{}, nil)
	wantStatus(t, "UpdateSubscription missing", err, http.StatusNotFound)
	_, err = ac.UpdateSubscription(ctx, "t", "s", admin.SubscriptionProperties{RequiresSession: to.Ptr(true)}, nil)
	if err == nil || !strings.Contains(err.Error(), "The value for the RequiresSession property of an existing Subscription cannot be changed") {
		t.Fatalf("RequiresSession change: %v", err)
	}
	wantStatus(t, "RequiresSession change", err, http.StatusBadRequest)
}
