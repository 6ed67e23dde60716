package deadletter_test

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus/admin"
	"github.com/sbkit/sbkit/deadletter"
	"github.com/sbkit/sbkit/sbtest"
)

// guard rewrites every subscription's rules with GuardRules and adds RedriveRule to
// target, as `sbctl dlq redrive --subscription --apply-rules` does over the admin API.
func guard(t *testing.T, tp *sbtest.Topic, target string) {
	t.Helper()
	for _, s := range tp.Subscriptions() {
		rules, changed, err := deadletter.GuardRules(subName(s), s.Rules())
		if err != nil {
			t.Fatal(err)
		}
		if !changed {
			t.Fatalf("subscription %s: nothing to guard", s.Name())
		}
		if subName(s) == target {
			rules = append(rules, deadletter.RedriveRule(target))
		}
		if err := s.SetRules(rules); err != nil {
			t.Fatalf("subscription %s: %v", s.Name(), err)
		}
		// Guarding twice changes nothing.
		if _, changed, _ := deadletter.GuardRules(subName(s), s.Rules()); changed {
			t.Fatalf("subscription %s: guarded twice", s.Name())
		}
	}
}

func TestRedriveSubscriptionReachesOnlyIt(t *testing.T) {
	for _, guarded := range []bool{false, true} {
		name := "unguarded"
		if guarded {
			name = "guarded"
		}
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ns := sbtest.NewTestNamespace(t, nil)
				tp, _ := ns.NewTopic("orders", nil)
				a, _ := tp.NewSubscription("a", nil)
				// b routes by a correlation filter and c by SQL: all three match the messages.
				b, _ := tp.NewSubscription("b", &sbtest.EntityOptions{DefaultRule: &admin.RuleProperties{Filter: &admin.CorrelationFilter{Subject: new("subject"), ApplicationProperties: map[string]any{"kind": "1"}}}})
				c, _ := tp.NewSubscription("c", &sbtest.EntityOptions{DefaultRule: &admin.RuleProperties{Filter: &admin.SQLFilter{Expression: "i >= @min", Parameters: map[string]any{"@min": 0}}}})
				msgs := messages(30, nil)
				for _, m := range msgs {
					m.ApplicationProperties["kind"] = "1"
				}
				deadLetterAll(t, ns, "orders", a, msgs, func(int) string { return "x" })
				// The topic's other subscriptions got the messages too: drain them.
				drainQueue(t, ns, b)
				drainQueue(t, ns, c)
				if guarded {
					guard(t, tp, "a")
				}
				dst, _ := ns.NewSender("orders", nil)
				st, err := deadletter.Redrive(t.Context(), dlqReceiver(t, ns, a, azservicebus.ReceiveModePeekLock), dst, &deadletter.RedriveOptions{IdleTimeout: time.Second, Subscription: "a"})
				if err != nil || st.Moved != 30 {
					t.Fatalf("%+v %v", st, err)
				}
				want := 0
				if !guarded {
					want = 30 // without the rules, every matching subscription gets a copy
				}
				if got := a.Counts().Active; got != 30 {
					t.Fatalf("subscription a has %d messages, want 30", got)
				}
				if b.Counts().Active != want || c.Counts().Active != want {
					t.Fatalf("b %+v, c %+v, want %d each", b.Counts(), c.Counts(), want)
				}
				if guarded {
					// Ordinary traffic is routed as before.
					snd, _ := ns.NewSender("orders", nil)
					if err := snd.SendMessage(t.Context(), messages(1, nil)[0], nil); err != nil {
						t.Fatal(err)
					}
					m := messages(1, nil)[0]
					m.ApplicationProperties["kind"] = "1"
					if err := snd.SendMessage(t.Context(), m, nil); err != nil {
						t.Fatal(err)
					}
					if a.Counts().Active != 32 || b.Counts().Active != 1 || c.Counts().Active != 2 {
						t.Fatalf("ordinary traffic misrouted: a %+v b %+v c %+v", a.Counts(), b.Counts(), c.Counts())
					}
				}
			})
		})
	}
}

func TestGuardRulesRefusesUnknownFilter(t *testing.T) {
	_, _, err := deadletter.GuardRules("s", []admin.RuleProperties{{Name: "x", Filter: &admin.UnknownRuleFilter{Type: "Other"}}})
	if err == nil {
		t.Fatal("an unknown filter kind was guarded")
	}
}
