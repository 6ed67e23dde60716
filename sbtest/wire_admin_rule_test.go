package sbtest

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
)

// A subscription created with a default rule has that rule from its first instant
// ("Topic filters and actions": the rule given at creation replaces the true filter
// $Default): while the admin API creates it, a message sent to the topic is routed by
// that rule only, and nobody sees $Default among its rules.
func TestAdminDefaultRuleFromTheStart(t *testing.T) {
	srv := NewTestServer(t, nil)
	topic, err := srv.Namespace().NewTopic("t", nil)
	if err != nil {
		t.Fatal(err)
	}
	s, err := srv.Namespace().NewSender("t", nil)
	if err != nil {
		t.Fatal(err)
	}
	var stop atomic.Bool
	var sawDefault atomic.Int64
	var wg sync.WaitGroup
	wg.Go(func() { // sends to the topic without pause
		for !stop.Load() {
			_ = s.SendMessage(context.Background(), &azservicebus.Message{Body: []byte("x")}, nil)
		}
	})
	wg.Go(func() { // looks at the new subscription's rules without pause
		for !stop.Load() {
			if sub, ok := topic.Subscription("s"); ok {
				if _, ok := sub.Rule(DefaultRuleName); ok {
					sawDefault.Add(1)
				}
			}
		}
	})
	defer func() {
		stop.Store(true)
		wg.Wait()
	}()
	// The admin client's PUT of a subscription with DefaultRule: a false filter.
	const body = `<entry xmlns="http://www.w3.org/2005/Atom"><content type="application/xml">` +
		`<SubscriptionDescription xmlns="http://schemas.microsoft.com/netservices/2010/10/servicebus/connect">` +
		`<DefaultRuleDescription><Filter xmlns:i="http://www.w3.org/2001/XMLSchema-instance" i:type="FalseFilter"></Filter>` +
		`<Name>none</Name></DefaultRuleDescription></SubscriptionDescription></content></entry>`
	for i := range 300 {
		req := httptest.NewRequest(http.MethodPut, "https://sbtest/t/Subscriptions/s", strings.NewReader(body))
		rec := httptest.NewRecorder()
		srv.w.AdminAPI().ServeHTTP(rec, req)
		if rec.Code != http.StatusCreated {
			t.Fatalf("round %d: PUT: status %d: %s", i, rec.Code, rec.Body)
		}
		sub, _ := topic.Subscription("s")
		if c := sub.Counts(); c.Active != 0 {
			t.Fatalf("round %d: the subscription got %d messages before its rule applied", i, c.Active)
		}
		if n := sawDefault.Load(); n > 0 {
			t.Fatalf("round %d: the subscription had $Default %d times", i, n)
		}
		if err := topic.DeleteSubscription("s"); err != nil {
			t.Fatal(err)
		}
	}
}
