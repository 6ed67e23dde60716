package sbtest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus/admin"
	"github.com/sbkit/sbkit"
	"github.com/sbkit/sbkit/sbtest/internal/explorer"
	"github.com/sbkit/sbkit/sbtest/internal/wire"
)

// explorerAPI is a test client of the explorer's JSON API over a Namespace.
type explorerAPI struct {
	t   *testing.T
	url string
	ns  *Namespace
}

func newExplorerAPI(t *testing.T, ns *Namespace) *explorerAPI {
	t.Helper()
	srv := httptest.NewServer(explorer.New(explorerModel{adminModel{ns}}))
	t.Cleanup(srv.Close)
	return &explorerAPI{t: t, url: srv.URL, ns: ns}
}

// get GETs the API name with params into out and returns the status.
func (x *explorerAPI) get(name string, params url.Values, out any) int {
	x.t.Helper()
	resp, err := http.Get(x.url + "/$explorer/api/" + name + "?" + params.Encode())
	if err != nil {
		x.t.Fatal(err)
	}
	return decodeExplorer(x.t, resp, out)
}

// post runs the action name with body into out and returns the status.
func (x *explorerAPI) post(name string, body any, out any) int {
	x.t.Helper()
	b, err := json.Marshal(body)
	if err != nil {
		x.t.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodPost, x.url+"/$explorer/api/"+name, bytes.NewReader(b))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(explorer.HeaderName, "1")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		x.t.Fatal(err)
	}
	return decodeExplorer(x.t, resp, out)
}

func decodeExplorer(t *testing.T, resp *http.Response, out any) int {
	t.Helper()
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode == http.StatusOK && out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("%s: %v", b, err)
		}
	}
	if resp.StatusCode != http.StatusOK {
		t.Logf("status %d: %s", resp.StatusCode, bytes.TrimSpace(b))
	}
	return resp.StatusCode
}

// The JSON shapes the tests read.
type (
	xCounts struct{ Active, Locked, Deferred, Scheduled, DeadLetter int }
	xRow    struct {
		Kind, Path, Name, Status string
		Counts                   *xCounts
		Subscriptions            *int
	}
	xNamespace struct {
		Total, Matched, Skip int
		Rows                 []xRow
	}
	xProp    struct{ Name, Type, Value string }
	xMessage struct {
		SequenceNumber                               int64
		MessageID, State                             string
		DeliveryCount                                uint32
		ContentType, SessionID, Subject              *string
		DeadLetterReason, DeadLetterErrorDescription *string
		Properties                                   []xProp
		Body                                         []byte
		BodySize                                     int
		BodyTruncated                                bool
	}
	xMessages struct {
		Messages []xMessage
		Next     *int64
		Scanned  int
	}
)

func mustSend(t *testing.T, ns *Namespace, to string, ms ...*azservicebus.Message) {
	t.Helper()
	s, err := ns.NewSender(to, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(context.Background())
	for _, m := range ms {
		if err := s.SendMessage(context.Background(), m, nil); err != nil {
			t.Fatal(err)
		}
	}
}

func textMessage(id, body string) *azservicebus.Message {
	return &azservicebus.Message{MessageID: &id, Body: []byte(body), ContentType: new("text/plain")}
}

// deadLetterN receives n messages of queue (or topic/Subscriptions/sub) and dead-letters
// them with a reason and description, as a consumer would.
func deadLetterN(t *testing.T, ns *Namespace, path string, n int) {
	t.Helper()
	e, ok := ns.Entity(path)
	if !ok {
		t.Fatalf("no entity %s", path)
	}
	r, err := explorerModel{adminModel{ns}}.receiverFor(e, false, azservicebus.ReceiveModePeekLock)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close(context.Background())
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for got := 0; got < n; {
		ms, err := r.ReceiveMessages(ctx, n-got, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range ms {
			if err := r.DeadLetterMessage(ctx, m, &azservicebus.DeadLetterOptions{Reason: new("BadOrder"), ErrorDescription: new("total is negative")}); err != nil {
				t.Fatal(err)
			}
		}
		got += len(ms)
	}
}

func TestExplorerNamespaceListsEntitiesWithCountsFilterAndPages(t *testing.T) {
	ns := NewTestNamespace(t, nil)
	for _, q := range []string{"orders", "billing", "audit-log"} {
		if _, err := ns.NewQueue(q, nil); err != nil {
			t.Fatal(err)
		}
	}
	topic, err := ns.NewTopic("events", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := topic.NewSubscription("orders-audit", nil); err != nil {
		t.Fatal(err)
	}
	mustSend(t, ns, "orders", textMessage("a", "1"), textMessage("b", "2"), textMessage("c", "3"))
	deadLetterN(t, ns, "orders", 1)
	x := newExplorerAPI(t, ns)

	var page xNamespace
	if st := x.get("namespace", nil, &page); st != http.StatusOK {
		t.Fatalf("status %d", st)
	}
	var paths []string
	for _, r := range page.Rows {
		paths = append(paths, r.Kind+":"+r.Path)
	}
	want := "queue:audit-log queue:billing queue:orders topic:events subscription:events/Subscriptions/orders-audit"
	if got := strings.Join(paths, " "); got != want || page.Total != 5 || page.Matched != 5 {
		t.Fatalf("rows %q (total %d, matched %d), want %q", got, page.Total, page.Matched, want)
	}
	orders := page.Rows[2]
	if c := orders.Counts; c == nil || c.Active != 2 || c.DeadLetter != 1 || c.Locked != 0 {
		t.Fatalf("orders counts %+v, want 2 active, 1 dead-lettered", orders.Counts)
	}
	if r := page.Rows[3]; r.Counts != nil || r.Subscriptions == nil || *r.Subscriptions != 1 {
		t.Fatalf("topic row %+v, want no counts and 1 subscription", r)
	}

	// The filter matches paths in any letter case; a page holds top rows from skip.
	if x.get("namespace", url.Values{"filter": {"ORDERS"}}, &page); page.Matched != 2 || page.Total != 5 {
		t.Fatalf("filter: matched %d of %d, want 2 of 5", page.Matched, page.Total)
	}
	if x.get("namespace", url.Values{"skip": {"1"}, "top": {"2"}}, &page); len(page.Rows) != 2 || page.Rows[0].Path != "billing" {
		t.Fatalf("page skip 1 top 2: %+v", page.Rows)
	}
	if st := x.get("namespace", url.Values{"top": {"0"}}, nil); st != http.StatusBadRequest {
		t.Fatalf("top=0: status %d, want 400", st)
	}
}

func TestExplorerEntityShowsPropertiesAndRules(t *testing.T) {
	ns := NewTestNamespace(t, nil)
	if _, err := ns.NewQueue("orders", &EntityOptions{LockDuration: 30 * time.Second, MaxDeliveryCount: 3, RequiresSession: true, DuplicateDetectionWindow: time.Minute}); err != nil {
		t.Fatal(err)
	}
	topic, err := ns.NewTopic("events", nil)
	if err != nil {
		t.Fatal(err)
	}
	sub, err := topic.NewSubscription("eu", &EntityOptions{DefaultRule: &admin.RuleProperties{
		Name:   "region",
		Filter: &admin.SQLFilter{Expression: "region = 'eu'"},
		Action: &admin.SQLAction{Expression: "SET routed = 1"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if err := sub.CreateRule(admin.RuleProperties{Name: "vip", Filter: &admin.CorrelationFilter{Subject: new("vip"), ApplicationProperties: map[string]any{"tier": "gold"}}}); err != nil {
		t.Fatal(err)
	}
	x := newExplorerAPI(t, ns)

	var q struct {
		Kind       string
		Properties map[string]any
	}
	if x.get("entity", url.Values{"path": {"orders"}}, &q); q.Kind != "queue" ||
		q.Properties["lockDurationMs"] != 30000.0 || q.Properties["maxDeliveryCount"] != 3.0 ||
		q.Properties["requiresSession"] != true || q.Properties["duplicateDetectionWindowMs"] != 60000.0 {
		t.Fatalf("queue view %+v", q)
	}
	var s struct {
		Kind, Topic, Name string
		Rules             []struct {
			Name, FilterType, SQLExpression, Action string
			Correlation                             *admin.CorrelationFilter
		}
	}
	if x.get("entity", url.Values{"path": {"events/Subscriptions/eu"}}, &s); s.Kind != "subscription" || s.Topic != "events" || s.Name != "eu" || len(s.Rules) != 2 {
		t.Fatalf("subscription view %+v", s)
	}
	r0, r1 := s.Rules[0], s.Rules[1]
	if r0.Name != "region" || r0.FilterType != "sql" || r0.SQLExpression != "region = 'eu'" || r0.Action != "SET routed = 1" {
		t.Fatalf("sql rule %+v", r0)
	}
	if r1.Name != "vip" || r1.FilterType != "correlation" || r1.Correlation == nil || *r1.Correlation.Subject != "vip" || r1.Correlation.ApplicationProperties["tier"] != "gold" {
		t.Fatalf("correlation rule %+v", r1)
	}
	if st := x.get("entity", url.Values{"path": {"nope"}}, nil); st != http.StatusNotFound {
		t.Fatalf("missing entity: status %d, want 404", st)
	}
}

// Browsing peeks: every state of the main queue, the dead-letter queue with its reason,
// page by page, and nothing is locked or counted as a delivery ("Message browsing").
func TestExplorerMessagesPeekPagesWithoutLockingOrCounting(t *testing.T) {
	ns := NewTestNamespace(t, nil)
	e, err := ns.NewQueue("orders", nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for i := range 7 {
		m := textMessage("m"+strconv.Itoa(i), strings.Repeat("x", 10+i))
		m.ApplicationProperties = map[string]any{"n": int64(i), "ok": true, "price": 1.5, "who": "ann", "at": time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
		mustSend(t, ns, "orders", m)
	}
	s, _ := ns.NewSender("orders", nil)
	if _, err := s.ScheduleMessages(ctx, []*azservicebus.Message{textMessage("later", "s")}, time.Now().Add(time.Hour), nil); err != nil {
		t.Fatal(err)
	}
	r, _ := ns.NewReceiverForQueue("orders", nil)
	got, err := r.ReceiveMessages(ctx, 1, nil) // m0
	if err != nil {
		t.Fatal(err)
	}
	if err := r.DeferMessage(ctx, got[0], nil); err != nil {
		t.Fatal(err)
	}
	deadLetterN(t, ns, "orders", 1) // m1
	before := e.Counts()
	x := newExplorerAPI(t, ns)

	var page xMessages
	x.get("messages", url.Values{"path": {"orders"}, "top": {"3"}}, &page)
	if len(page.Messages) != 3 || page.Next == nil || page.Messages[0].MessageID != "m0" || page.Messages[0].State != "deferred" || page.Messages[1].MessageID != "m2" {
		t.Fatalf("first page %+v next %v", page.Messages, page.Next)
	}
	m2 := page.Messages[1]
	wantProps := []xProp{{"at", "datetime", "2026-01-02T03:04:05Z"}, {"n", "long", "2"}, {"ok", "boolean", "true"}, {"price", "double", "1.5"}, {"who", "string", "ann"}}
	if len(m2.Properties) != len(wantProps) {
		t.Fatalf("properties %+v", m2.Properties)
	}
	for i, p := range wantProps {
		if m2.Properties[i] != p {
			t.Fatalf("property %d = %+v, want %+v", i, m2.Properties[i], p)
		}
	}
	if string(m2.Body) != "xxxxxxxxxxxx" || *m2.ContentType != "text/plain" || m2.DeliveryCount != 1 {
		t.Fatalf("m2 %+v", m2)
	}
	var rest xMessages
	x.get("messages", url.Values{"path": {"orders"}, "from": {strconv.FormatInt(*page.Next, 10)}, "top": {"50"}}, &rest)
	if len(rest.Messages) != 4 || rest.Next != nil || rest.Messages[3].State != "scheduled" {
		t.Fatalf("second page %+v next %v", rest.Messages, rest.Next)
	}
	var scheduled xMessages
	if x.get("messages", url.Values{"path": {"orders"}, "state": {"scheduled"}}, &scheduled); len(scheduled.Messages) != 1 || scheduled.Messages[0].MessageID != "later" || scheduled.Scanned != 7 {
		t.Fatalf("scheduled %+v", scheduled)
	}
	var dlq xMessages
	x.get("messages", url.Values{"path": {"orders"}, "queue": {"deadletter"}}, &dlq)
	if len(dlq.Messages) != 1 || dlq.Messages[0].MessageID != "m1" || *dlq.Messages[0].DeadLetterReason != "BadOrder" || *dlq.Messages[0].DeadLetterErrorDescription != "total is negative" {
		t.Fatalf("dead letters %+v", dlq.Messages)
	}
	if after := e.Counts(); after != before {
		t.Fatalf("counts changed by browsing: %+v, then %+v", before, after)
	}
	// The delivery count is the model's own (1 before and at the first delivery): the
	// peek counted none, so m2 comes to a receiver as its first delivery.
	ms, err := r.ReceiveMessages(ctx, 1, nil)
	if err != nil || ms[0].MessageID != "m2" || ms[0].DeliveryCount != 1 {
		t.Fatalf("received %+v, %v: want m2 at its first delivery", ms, err)
	}
	// A body beyond the preview is cut in a page, whole with body=full.
	mustSend(t, ns, "orders", textMessage("big", strings.Repeat("b", 5000)))
	var big xMessages
	x.get("messages", url.Values{"path": {"orders"}, "state": {"active"}, "from": {"9"}}, &big)
	if len(big.Messages) != 1 || !big.Messages[0].BodyTruncated || len(big.Messages[0].Body) != 1024 || big.Messages[0].BodySize != 5000 {
		t.Fatalf("preview %+v", big.Messages)
	}
	var whole xMessages
	x.get("messages", url.Values{"path": {"orders"}, "from": {"9"}, "body": {"full"}}, &whole)
	if len(whole.Messages[0].Body) != 5000 || whole.Messages[0].BodyTruncated {
		t.Fatalf("full body %d bytes", len(whole.Messages[0].Body))
	}
}

func TestExplorerSendStoresWhatThePageAsked(t *testing.T) {
	ns := NewTestNamespace(t, nil)
	e, err := ns.NewQueue("orders", &EntityOptions{RequiresSession: true})
	if err != nil {
		t.Fatal(err)
	}
	x := newExplorerAPI(t, ns)
	req := map[string]any{
		"path": "orders", "body": `{"total": 3}`, "contentType": "application/json", "messageId": "order-1",
		"sessionId": "s1", "subject": "created", "timeToLiveMs": 60000,
		"properties": []map[string]string{{"name": "n", "type": "long", "value": "42"}, {"name": "ok", "type": "boolean", "value": "true"}, {"name": "who", "value": "ann"}},
	}
	var out struct{ Sent int }
	if st := x.post("send", req, &out); st != http.StatusOK || out.Sent != 1 {
		t.Fatalf("send: status %d, %+v", st, out)
	}
	ms := e.Active()
	if len(ms) != 1 {
		t.Fatalf("%d active messages, want 1", len(ms))
	}
	m := ms[0]
	if m.MessageID != "order-1" || *m.SessionID != "s1" || *m.Subject != "created" || *m.ContentType != "application/json" ||
		string(m.Body) != `{"total": 3}` || *m.TimeToLive != time.Minute ||
		m.ApplicationProperties["n"] != int64(42) || m.ApplicationProperties["ok"] != true || m.ApplicationProperties["who"] != "ann" {
		t.Fatalf("stored %+v", m)
	}
	// Scheduled: the answer carries the sequence numbers.
	at := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	var sched struct {
		Sent            int
		SequenceNumbers []int64
	}
	if st := x.post("send", map[string]any{"path": "orders", "body": "x", "sessionId": "s1", "scheduledEnqueueTime": at, "count": 2}, &sched); st != http.StatusOK || sched.Sent != 2 || len(sched.SequenceNumbers) != 2 {
		t.Fatalf("schedule: status %d, %+v", st, sched)
	}
	if c := e.Counts(); c.Scheduled != 2 || c.Active != 1 {
		t.Fatalf("counts %+v", c)
	}
	// To a topic: every subscription whose rules match gets it.
	topic, _ := ns.NewTopic("events", nil)
	sub, _ := topic.NewSubscription("audit", nil)
	if st := x.post("send", map[string]any{"path": "events", "body": "e"}, &out); st != http.StatusOK || sub.Counts().Active != 1 {
		t.Fatalf("send to a topic: status %d, subscription counts %+v", st, sub.Counts())
	}
	// Bad input is refused with 400 and sends nothing; the model's refusal too.
	for name, bad := range map[string]map[string]any{
		"property type":     {"path": "orders", "sessionId": "s1", "properties": []map[string]string{{"name": "n", "type": "long", "value": "x"}}},
		"unknown field":     {"path": "orders", "sessionId": "s1", "colour": "red"},
		"bad time":          {"path": "orders", "sessionId": "s1", "scheduledEnqueueTime": "tomorrow"},
		"no session id":     {"path": "orders", "body": "x"},
		"to a subscription": {"path": "events/Subscriptions/x"},
	} {
		if st := x.post("send", bad, nil); st != http.StatusBadRequest && st != http.StatusNotFound {
			t.Errorf("%s: status %d, want 400 or 404", name, st)
		}
	}
	if c := e.Counts(); c.Scheduled != 2 || c.Active != 1 {
		t.Fatalf("refused sends stored something: %+v", c)
	}
}

// Actions are refused unless they are same-origin POSTs of JSON with the custom header,
// and the API answers no CORS preflight.
func TestExplorerActionsRefuseCrossSiteRequests(t *testing.T) {
	ns := NewTestNamespace(t, nil)
	e, _ := ns.NewQueue("orders", nil)
	x := newExplorerAPI(t, ns)
	body := `{"path":"orders","body":"x"}`
	for name, c := range map[string]struct {
		method string
		header map[string]string
		want   int
	}{
		"form post":           {http.MethodPost, map[string]string{"Content-Type": "application/x-www-form-urlencoded", explorer.HeaderName: "1"}, http.StatusForbidden},
		"text/plain post":     {http.MethodPost, map[string]string{"Content-Type": "text/plain"}, http.StatusForbidden},
		"no custom header":    {http.MethodPost, map[string]string{"Content-Type": "application/json"}, http.StatusForbidden},
		"cross-site fetch":    {http.MethodPost, map[string]string{"Content-Type": "application/json", explorer.HeaderName: "1", "Sec-Fetch-Site": "cross-site"}, http.StatusForbidden},
		"other origin":        {http.MethodPost, map[string]string{"Content-Type": "application/json", explorer.HeaderName: "1", "Origin": "http://evil.example"}, http.StatusForbidden},
		"get":                 {http.MethodGet, map[string]string{explorer.HeaderName: "1"}, http.StatusMethodNotAllowed},
		"same-origin browser": {http.MethodPost, map[string]string{"Content-Type": "application/json", explorer.HeaderName: "1", "Sec-Fetch-Site": "same-origin"}, http.StatusOK},
	} {
		req, _ := http.NewRequest(c.method, x.url+"/$explorer/api/send", strings.NewReader(body))
		for k, v := range c.header {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != c.want {
			t.Errorf("%s: status %d, want %d", name, resp.StatusCode, c.want)
		}
	}
	if n := e.Counts().Active; n != 1 {
		t.Fatalf("%d messages stored, want only the same-origin one", n)
	}
	req, _ := http.NewRequest(http.MethodOptions, x.url+"/$explorer/api/send", nil)
	req.Header.Set("Origin", "http://evil.example")
	req.Header.Set("Access-Control-Request-Method", "POST")
	req.Header.Set("Access-Control-Request-Headers", explorer.HeaderName)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.Header.Get("Access-Control-Allow-Origin") != "" || resp.StatusCode == http.StatusOK || resp.StatusCode == http.StatusNoContent {
		t.Fatalf("preflight answered %d with %v", resp.StatusCode, resp.Header)
	}
}

func TestExplorerRedriveCopiesThenCompletes(t *testing.T) {
	ns := NewTestNamespace(t, nil)
	e, _ := ns.NewQueue("orders", nil)
	for i := range 4 {
		m := textMessage("m"+strconv.Itoa(i), "body"+strconv.Itoa(i))
		// A copy a processor's delayed redelivery made, dead-lettered once its
		// redeliveries were spent: its re-driven copy starts them again.
		m.ApplicationProperties = map[string]any{"tenant": "t1", sbkit.RedeliveryAttemptProperty: int64(3),
			sbkit.RedeliveryFirstFailureProperty: time.Unix(0, 0).UTC(), sbkit.RedeliveryOriginalIDProperty: "o" + strconv.Itoa(i)}
		m.CorrelationID = new("c" + strconv.Itoa(i))
		mustSend(t, ns, "orders", m)
	}
	deadLetterN(t, ns, "orders", 4) // seq 1..4
	x := newExplorerAPI(t, ns)

	var out struct {
		Target     string
		Redriven   int
		PassedOver int
		NotFound   []int64
		Failed     []struct{ Error string }
	}
	if st := x.post("redrive", map[string]any{"path": "orders", "sequenceNumbers": []int64{3, 99}}, &out); st != http.StatusOK {
		t.Fatalf("status %d", st)
	}
	if out.Target != "orders" || out.Redriven != 1 || len(out.NotFound) != 1 || out.NotFound[0] != 99 || out.PassedOver != 3 {
		t.Fatalf("redrive %+v", out)
	}
	active := e.Active()
	if len(active) != 1 {
		t.Fatalf("%d active, want the copy", len(active))
	}
	c := active[0]
	if c.MessageID != "m2" || string(c.Body) != "body2" || *c.CorrelationID != "c2" || c.ApplicationProperties["tenant"] != "t1" ||
		c.DeadLetterReason != nil || c.DeliveryCount != 1 || len(c.ApplicationProperties) != 2 || c.ApplicationProperties["sbkit_redrive_count"] != int64(1) {
		t.Fatalf("copy %+v", c)
	}
	dl := e.DeadLetters()
	if len(dl) != 3 {
		t.Fatalf("%d dead letters, want 3", len(dl))
	}
	if e.Counts().Locked != 0 {
		t.Fatal("re-drive left locks behind")
	}

	// A copy that cannot be stored leaves its dead letter where it was.
	e.InjectFault(Fault{Op: OpSend, Count: 1, Err: errors.New("store unavailable")})
	if x.post("redrive", map[string]any{"path": "orders", "sequenceNumbers": []int64{1}}, &out); out.Redriven != 0 || len(out.Failed) != 1 || !strings.Contains(out.Failed[0].Error, "store unavailable") {
		t.Fatalf("redrive under a send fault %+v", out)
	}
	if n := len(e.DeadLetters()); n != 3 {
		t.Fatalf("%d dead letters after a failed copy, want 3", n)
	}
	// A completion that fails after the copy was stored leaves both, and says so.
	e.InjectFault(Fault{Op: OpComplete, Count: 1, Err: errors.New("link detached")})
	if x.post("redrive", map[string]any{"path": "orders", "sequenceNumbers": []int64{1}}, &out); out.Redriven != 0 || len(out.Failed) != 1 || !strings.Contains(out.Failed[0].Error, "copy was stored") {
		t.Fatalf("redrive under a completion fault %+v", out)
	}
	if c := e.Counts(); c.DeadLetter != 3 || c.Active != 2 {
		t.Fatalf("counts after a failed completion %+v, want the dead letter and its copy", c)
	}
	// The dead letter was given back, not left locked: re-driving all reaches it.
	if x.post("redrive", map[string]any{"path": "orders", "all": true}, &out); out.Redriven != 3 || len(out.Failed) != 0 {
		t.Fatalf("redrive all %+v", out)
	}
	if c := e.Counts(); c.DeadLetter != 0 || c.Active != 5 || c.Locked != 0 {
		t.Fatalf("counts after re-driving all %+v", c)
	}
	if st := x.post("redrive", map[string]any{"path": "orders"}, nil); st != http.StatusBadRequest {
		t.Fatalf("neither numbers nor all: status %d", st)
	}
}

// A subscription's dead letters go back to its topic; duplicate detection that would drop
// the copy keeps the dead letter.
func TestExplorerRedriveToTopicAndDuplicateDetection(t *testing.T) {
	ns := NewTestNamespace(t, nil)
	topic, _ := ns.NewTopic("events", &EntityOptions{DuplicateDetectionWindow: time.Hour})
	sub, _ := topic.NewSubscription("audit", nil)
	mustSend(t, ns, "events", textMessage("e1", "x"))
	deadLetterN(t, ns, "events/Subscriptions/audit", 1)
	x := newExplorerAPI(t, ns)
	var out struct {
		Target   string
		Redriven int
		Failed   []struct{ Error string }
	}
	x.post("redrive", map[string]any{"path": "events/Subscriptions/audit", "all": true}, &out)
	if out.Target != "events" || out.Redriven != 0 || len(out.Failed) != 1 || !strings.Contains(out.Failed[0].Error, "duplicates") {
		t.Fatalf("redrive into duplicate detection %+v", out)
	}
	if c := sub.Counts(); c.DeadLetter != 1 || c.Locked != 0 || c.Active != 0 {
		t.Fatalf("counts %+v: the dead letter must stay", c)
	}
	if err := topic.SetOptions(&EntityOptions{}); err != nil {
		t.Fatal(err)
	}
	x.post("redrive", map[string]any{"path": "events/Subscriptions/audit", "all": true}, &out)
	if out.Redriven != 1 {
		t.Fatalf("redrive %+v", out)
	}
	if c := sub.Counts(); c.DeadLetter != 0 || c.Active != 1 {
		t.Fatalf("counts %+v", c)
	}
}

func TestExplorerPurgeRemovesWhatAClientCan(t *testing.T) {
	ns := NewTestNamespace(t, nil)
	e, _ := ns.NewQueue("orders", nil)
	ctx := context.Background()
	for i := range 6 {
		mustSend(t, ns, "orders", textMessage("m"+strconv.Itoa(i), "x"))
	}
	s, _ := ns.NewSender("orders", nil)
	if _, err := s.ScheduleMessages(ctx, []*azservicebus.Message{textMessage("later", "s")}, time.Now().Add(time.Hour), nil); err != nil {
		t.Fatal(err)
	}
	r, _ := ns.NewReceiverForQueue("orders", nil)
	ms, _ := r.ReceiveMessages(ctx, 2, nil)
	if err := r.DeferMessage(ctx, ms[0], nil); err != nil { // m0 deferred, m1 stays locked
		t.Fatal(err)
	}
	deadLetterN(t, ns, "orders", 1)
	x := newExplorerAPI(t, ns)
	var out struct {
		Removed, Deferred, Cancelled int
		Left                         xCounts
	}
	if st := x.post("purge", map[string]any{"path": "orders"}, &out); st != http.StatusOK {
		t.Fatalf("status %d", st)
	}
	if out.Removed != 4 || out.Deferred != 1 || out.Cancelled != 1 || out.Left != (xCounts{Locked: 1, DeadLetter: 1}) {
		t.Fatalf("purge %+v", out)
	}
	// The locked message is still its receiver's.
	if err := r.CompleteMessage(ctx, ms[1], nil); err != nil {
		t.Fatalf("completing the message locked before the purge: %v", err)
	}
	if x.post("purge", map[string]any{"path": "orders", "queue": "deadletter"}, &out); out.Removed != 1 || out.Left != (xCounts{}) {
		t.Fatalf("purge dead letters %+v", out)
	}
	if c := e.Counts(); c != (Counts{}) {
		t.Fatalf("counts %+v", c)
	}
}

func TestExplorerDeleteOneMessage(t *testing.T) {
	ns := NewTestNamespace(t, nil)
	e, _ := ns.NewQueue("orders", nil)
	ctx := context.Background()
	for i := range 5 {
		mustSend(t, ns, "orders", textMessage("m"+strconv.Itoa(i), "x")) // seq 1..5
	}
	s, _ := ns.NewSender("orders", nil)
	seqs, _ := s.ScheduleMessages(ctx, []*azservicebus.Message{textMessage("later", "s")}, time.Now().Add(time.Hour), nil)
	x := newExplorerAPI(t, ns)
	var out struct {
		Deleted    bool
		How        string
		PassedOver int
	}
	if st := x.post("delete", map[string]any{"path": "orders", "sequenceNumber": 3}, &out); st != http.StatusOK || !out.Deleted || out.PassedOver != 4 {
		t.Fatalf("delete 3: status %d %+v", st, out)
	}
	var ids []string
	for _, m := range e.Active() {
		ids = append(ids, m.MessageID+":"+strconv.Itoa(int(m.DeliveryCount)))
	}
	// The messages received on the way were abandoned: their delivery is counted (the
	// model's count starts at 1), as for any client that receives past them.
	if got := strings.Join(ids, " "); got != "m0:2 m1:2 m3:2 m4:2" {
		t.Fatalf("left %s", got)
	}
	if x.post("delete", map[string]any{"path": "orders", "sequenceNumber": seqs[0]}, &out); !out.Deleted || out.How != "cancelled" {
		t.Fatalf("delete scheduled %+v", out)
	}
	r, _ := ns.NewReceiverForQueue("orders", nil)
	ms, _ := r.ReceiveMessages(ctx, 2, nil) // m0 deferred, m1 locked
	if err := r.DeferMessage(ctx, ms[0], nil); err != nil {
		t.Fatal(err)
	}
	if x.post("delete", map[string]any{"path": "orders", "sequenceNumber": 1}, &out); !out.Deleted || !strings.Contains(out.How, "sequence number") {
		t.Fatalf("delete deferred %+v", out)
	}
	if st := x.post("delete", map[string]any{"path": "orders", "sequenceNumber": 2}, nil); st != http.StatusConflict {
		t.Fatalf("delete locked: status %d, want 409", st)
	}
	if st := x.post("delete", map[string]any{"path": "orders", "sequenceNumber": 77}, nil); st != http.StatusNotFound {
		t.Fatalf("delete missing: status %d, want 404", st)
	}
	if c := e.Counts(); c != (Counts{Active: 2, Locked: 1, Size: c.Size}) {
		t.Fatalf("counts %+v", c)
	}
}

// An entity that requires sessions is browsed without accepting a session, and its
// messages are deleted and purged through session receivers.
func TestExplorerSessionEntity(t *testing.T) {
	ns := NewTestNamespace(t, nil)
	e, _ := ns.NewQueue("orders", &EntityOptions{RequiresSession: true})
	for i := range 4 {
		m := textMessage("m"+strconv.Itoa(i), "x")
		m.SessionID = new("s" + strconv.Itoa(i%2))
		mustSend(t, ns, "orders", m)
	}
	x := newExplorerAPI(t, ns)
	var page xMessages
	if x.get("messages", url.Values{"path": {"orders"}, "from": {"2"}, "top": {"2"}}, &page); len(page.Messages) != 2 || page.Messages[0].SequenceNumber != 2 || *page.Messages[0].SessionID != "s1" {
		t.Fatalf("session page %+v", page)
	}
	var out struct{ Deleted bool }
	if x.post("delete", map[string]any{"path": "orders", "sequenceNumber": 4}, &out); !out.Deleted {
		t.Fatal("delete in a session failed")
	}
	var purged struct{ Removed int }
	if x.post("purge", map[string]any{"path": "orders"}, &purged); purged.Removed != 3 {
		t.Fatalf("purge removed %d, want 3", purged.Removed)
	}
	if c := e.Counts(); c != (Counts{}) {
		t.Fatalf("counts %+v", c)
	}
	for _, s := range e.Sessions() {
		if s.Locked {
			t.Fatalf("session %s left locked", s.ID)
		}
	}
}

// The Server serves the page and its API on the plain-HTTP administration listener only;
// requests of the SDK's administration client (with api-version) and the TLS port are
// the administration API's.
func TestExplorerServedOnThePlainHTTPListener(t *testing.T) {
	srv, err := NewServer(&ServerOptions{AdminHTTPAddr: "127.0.0.1:0", Queues: map[string]*EntityOptions{"orders": nil}})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close(context.Background())
	get := func(c *http.Client, u string) (int, string, string) {
		t.Helper()
		resp, err := c.Get(u)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header.Get("Content-Type"), string(b)
	}
	base := srv.AdminHTTPURL()
	if st, ct, body := get(http.DefaultClient, base+"/"); st != http.StatusOK || !strings.HasPrefix(ct, "text/html") || !strings.Contains(body, "sbemulator explorer") {
		t.Fatalf("GET /: %d %s", st, ct)
	}
	if st, ct, _ := get(http.DefaultClient, base+"/$explorer/static/app.js"); st != http.StatusOK || !strings.Contains(ct, "javascript") {
		t.Fatalf("app.js: %d %s", st, ct)
	}
	if st, _, body := get(http.DefaultClient, base+"/$explorer/api/namespace"); st != http.StatusOK || !strings.Contains(body, `"path":"orders"`) {
		t.Fatalf("namespace: %d %s", st, body)
	}
	if st, _, _ := get(http.DefaultClient, base+"/health"); st != http.StatusOK {
		t.Fatalf("health: %d", st)
	}
	if st, ct, _ := get(http.DefaultClient, base+"/orders?api-version=2021-05"); st != http.StatusOK || !strings.Contains(ct, "atom+xml") {
		t.Fatalf("admin API on the plain port: %d %s", st, ct)
	}
	if st, ct, _ := get(http.DefaultClient, base+"/?api-version=2021-05"); st == http.StatusOK && strings.HasPrefix(ct, "text/html") {
		t.Fatal("the SDK's request of / got the page")
	}
	if st, ct, _ := get(srv.AdminHTTPClient(), "https://"+srv.Addr().String()+"/"); strings.HasPrefix(ct, "text/html") {
		t.Fatalf("the TLS port served the page (%d)", st)
	}
}

// DisableExplorer leaves the page out: the plain-HTTP listener serves the administration
// API and the health check only.
func TestExplorerDisabled(t *testing.T) {
	srv, err := NewServer(&ServerOptions{AdminHTTPAddr: "127.0.0.1:0", DisableExplorer: true})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close(context.Background())
	for path, want := range map[string]int{"/": http.StatusNotFound, "/$explorer/api/namespace": http.StatusNotFound, "/health": http.StatusOK} {
		resp, err := http.Get(srv.AdminHTTPURL() + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want || strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") {
			t.Errorf("GET %s: %d %s, want %d", path, resp.StatusCode, resp.Header.Get("Content-Type"), want)
		}
	}
}

// With ServerOptions.SASKeys the explorer's API asks for the administration API's
// authorization (a namespace-wide token), while the page and its files, which hold no
// data, load without one so that the page can ask for it.
func TestExplorerFollowsSASAuthorization(t *testing.T) {
	srv, err := NewServer(&ServerOptions{AdminHTTPAddr: "127.0.0.1:0", SASKeys: map[string]string{"admin": "secret"}, Queues: map[string]*EntityOptions{"orders": nil}})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close(context.Background())
	base := srv.AdminHTTPURL()
	status := func(path, token string) int {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, base+path, nil)
		if token != "" {
			req.Header.Set("Authorization", token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	exp := time.Now().Add(time.Hour).Unix()
	for _, c := range []struct {
		path, token string
		want        int
	}{
		{"/", "", http.StatusOK},
		{"/$explorer/static/app.js", "", http.StatusOK},
		{"/$explorer/api/namespace", "", http.StatusUnauthorized},
		{"/$explorer/api/namespace", wire.SignSAS("admin", "wrong", base+"/", exp), http.StatusUnauthorized},
		{"/$explorer/api/namespace", wire.SignSAS("admin", "secret", "sb://127.0.0.1/orders", exp), http.StatusUnauthorized},
		{"/$explorer/api/namespace", wire.SignSAS("admin", "secret", base+"/", exp), http.StatusOK},
		{"/$explorer/api/messages?path=orders", wire.SignSAS("admin", "secret", "sb://127.0.0.1/", exp), http.StatusOK},
	} {
		if got := status(c.path, c.token); got != c.want {
			t.Errorf("GET %s with token %.40q: %d, want %d", c.path, c.token, got, c.want)
		}
	}
}
