package sbtest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus/admin"
	"github.com/sbkit/sbkit/sbtest/internal/sqlfilter"
)

func sqlSysNames() []string { return sqlfilter.SystemProperties() }

func ruleTopic(t *testing.T, subs ...string) (*Namespace, *Topic, map[string]*Entity) {
	t.Helper()
	ns := NewNamespace(nil)
	top, err := ns.NewTopic("t", nil)
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]*Entity{}
	for _, s := range subs {
		if m[s], err = top.NewSubscription(s, nil); err != nil {
			t.Fatal(err)
		}
	}
	return ns, top, m
}

func mustRule(t *testing.T, e *Entity, r admin.RuleProperties) {
	t.Helper()
	if err := e.CreateRule(r); err != nil {
		t.Fatal(err)
	}
}

// onlyRule replaces the $Default rule of e with r.
func onlyRule(t *testing.T, e *Entity, r admin.RuleProperties) {
	t.Helper()
	if err := e.DeleteRule(DefaultRuleName); err != nil {
		t.Fatal(err)
	}
	mustRule(t, e, r)
}

// "Topic filters and actions": a new subscription has the $Default rule with a true
// filter and no action.
func TestNewSubscriptionHasDefaultRule(t *testing.T) {
	_, _, subs := ruleTopic(t, "s")
	rules := subs["s"].Rules()
	if len(rules) != 1 || rules[0].Name != DefaultRuleName || rules[0].Action != nil {
		t.Fatalf("rules %+v", rules)
	}
	if _, ok := rules[0].Filter.(*admin.TrueFilter); !ok {
		t.Fatalf("filter %T", rules[0].Filter)
	}
}

// Each message lands exactly where the filters say: SQL, correlation, false, and no rule.
func TestRulesRouteMessages(t *testing.T) {
	ns, _, subs := ruleTopic(t, "all", "red", "big", "corr", "none", "falsy", "either")
	onlyRule(t, subs["red"], admin.RuleProperties{Name: "red", Filter: &admin.SQLFilter{Expression: "color = 'red'"}})
	onlyRule(t, subs["big"], admin.RuleProperties{Name: "big", Filter: &admin.SQLFilter{Expression: "quantity > @min", Parameters: map[string]any{"@min": 10}}})
	onlyRule(t, subs["corr"], admin.RuleProperties{Name: "c", Filter: &admin.CorrelationFilter{
		CorrelationID: sp("order-1"), Subject: sp("created"), ApplicationProperties: map[string]any{"region": "eu", "n": int64(2)}}})
	if err := subs["none"].DeleteRule(DefaultRuleName); err != nil {
		t.Fatal(err)
	}
	onlyRule(t, subs["falsy"], admin.RuleProperties{Name: "f", Filter: &admin.FalseFilter{}})
	onlyRule(t, subs["either"], admin.RuleProperties{Name: "a", Filter: &admin.SQLFilter{Expression: "color = 'blue'"}})
	mustRule(t, subs["either"], admin.RuleProperties{Name: "b", Filter: &admin.SQLFilter{Expression: "sys.Label = 'created'"}})

	s, _ := ns.NewSender("t", nil)
	send := func(body string, m *azservicebus.Message) {
		m.Body = []byte(body)
		if err := s.SendMessage(context.Background(), m, nil); err != nil {
			t.Fatal(err)
		}
	}
	send("red-small", &azservicebus.Message{ApplicationProperties: map[string]any{"color": "red", "quantity": 5}})
	send("blue-big", &azservicebus.Message{ApplicationProperties: map[string]any{"color": "blue", "quantity": int32(50)}})
	send("corr", &azservicebus.Message{CorrelationID: sp("order-1"), Subject: sp("created"), ApplicationProperties: map[string]any{"region": "eu", "n": 2}})
	send("corr-wrong", &azservicebus.Message{CorrelationID: sp("order-1"), Subject: sp("created"), ApplicationProperties: map[string]any{"region": "us", "n": 2}})
	send("plain", &azservicebus.Message{})

	want := map[string][]string{
		"all":    {"red-small", "blue-big", "corr", "corr-wrong", "plain"},
		"red":    {"red-small"},
		"big":    {"blue-big"},
		"corr":   {"corr"},
		"none":   nil,
		"falsy":  nil,
		"either": {"blue-big", "corr", "corr-wrong"}, // one copy even when both rules match
	}
	for name, w := range want {
		if got := bodies(subs[name].Active()); !slices.Equal(got, w) {
			t.Errorf("%s got %v, want %v", name, got, w)
		}
	}
}

// A SQL rule names application properties in any letter case ("Subscription Rule SQL
// Filter Syntax": "Property names are case-insensitive"), in its filter and its action.
func TestRulePropertyNamesIgnoreCase(t *testing.T) {
	ns, _, subs := ruleTopic(t, "s")
	onlyRule(t, subs["s"], admin.RuleProperties{Name: "r", Filter: &admin.SQLFilter{Expression: "Priority = 'high'"},
		Action: &admin.SQLAction{Expression: "SET ROUTED = 'yes'"}})
	s, _ := ns.NewSender("t", nil)
	for _, p := range []string{"high", "low"} {
		m := &azservicebus.Message{Body: []byte(p), ApplicationProperties: map[string]any{"priority": p, "routed": "no"}}
		if err := s.SendMessage(context.Background(), m, nil); err != nil {
			t.Fatal(err)
		}
	}
	got := subs["s"].Active()
	if len(got) != 1 || string(got[0].Body) != "high" {
		t.Fatalf("subscription holds %v, want the message whose priority is high", bodies(got))
	}
	if p := got[0].ApplicationProperties; p["routed"] != "yes" || p["ROUTED"] != nil {
		t.Fatalf("properties after SET ROUTED: %v, want routed set to yes", p)
	}
}

// "Topic filters and actions": rules without actions give one copy; each matching rule
// with an action gives a copy of its own with RuleName set and the action applied.
func TestRuleActionsMakeCopies(t *testing.T) {
	ns, _, subs := ruleTopic(t, "s")
	e := subs["s"]
	mustRule(t, e, admin.RuleProperties{Name: "plain2", Filter: &admin.SQLFilter{Expression: "1=1"}})
	mustRule(t, e, admin.RuleProperties{Name: "double", Filter: &admin.SQLFilter{Expression: "EXISTS(quantity)"},
		Action: &admin.SQLAction{Expression: "SET quantity = quantity * 2; SET sys.Label = 'doubled'; REMOVE secret"}})
	mustRule(t, e, admin.RuleProperties{Name: "tag", Filter: &admin.TrueFilter{}, Action: &admin.SQLAction{Expression: "SET tagged = TRUE"}})
	mustRule(t, e, admin.RuleProperties{Name: "never", Filter: &admin.FalseFilter{}, Action: &admin.SQLAction{Expression: "SET x = 1"}})

	s, _ := ns.NewSender("t", nil)
	if err := s.SendMessage(context.Background(), &azservicebus.Message{Body: []byte("m"), Subject: sp("orig"),
		ApplicationProperties: map[string]any{"quantity": 21, "secret": "s"}}, nil); err != nil {
		t.Fatal(err)
	}
	got := e.Active()
	if len(got) != 3 {
		t.Fatalf("%d copies, want 3", len(got))
	}
	plain, double, tag := got[0], got[1], got[2]
	if plain.ApplicationProperties[RuleNameProperty] != nil || *plain.Subject != "orig" || plain.ApplicationProperties["quantity"] != 21 {
		t.Errorf("plain copy %+v", plain.ApplicationProperties)
	}
	if p := double.ApplicationProperties; p[RuleNameProperty] != "double" || p["quantity"] != int64(42) || p["secret"] != nil || *double.Subject != "doubled" {
		t.Errorf("action copy %+v subject %q", p, *double.Subject)
	}
	if p := tag.ApplicationProperties; p[RuleNameProperty] != "tag" || p["tagged"] != true || p["quantity"] != 21 {
		t.Errorf("tag copy %+v", p)
	}
	seqs := []int64{*plain.SequenceNumber, *double.SequenceNumber, *tag.SequenceNumber}
	if seqs[0] != 1 || seqs[1] == seqs[0] || seqs[2] == seqs[1] {
		t.Errorf("sequence numbers %v are not distinct", seqs)
	}
}

func TestRuleManagementErrors(t *testing.T) {
	ns, _, subs := ruleTopic(t, "s")
	e := subs["s"]
	q, _ := ns.NewQueue("q", nil)
	for _, tc := range []struct {
		name string
		err  error
		want error
	}{
		{"duplicate", e.CreateRule(admin.RuleProperties{Name: DefaultRuleName}), ErrExists},
		{"bad sql", e.CreateRule(admin.RuleProperties{Name: "x", Filter: &admin.SQLFilter{Expression: "color = "}}), ErrInvalidOptions},
		{"bad sys", e.CreateRule(admin.RuleProperties{Name: "x", Filter: &admin.SQLFilter{Expression: "sys.Nope = 1"}}), ErrInvalidOptions},
		{"bad action", e.CreateRule(admin.RuleProperties{Name: "x", Action: &admin.SQLAction{Expression: "SET sys.SequenceNumber = 1"}}), ErrInvalidOptions},
		{"empty correlation", e.CreateRule(admin.RuleProperties{Name: "x", Filter: &admin.CorrelationFilter{}}), ErrInvalidOptions},
		{"no name", e.CreateRule(admin.RuleProperties{}), ErrInvalidOptions},
		{"long name", e.CreateRule(admin.RuleProperties{Name: string(make([]byte, 51))}), ErrInvalidOptions},
		{"unknown filter", e.CreateRule(admin.RuleProperties{Name: "x", Filter: &admin.UnknownRuleFilter{Type: "Z"}}), ErrInvalidOptions},
		{"delete missing", e.DeleteRule("nope"), ErrNotFound},
		{"update missing", e.UpdateRule(admin.RuleProperties{Name: "nope"}), ErrNotFound},
		{"queue", q.CreateRule(admin.RuleProperties{Name: "x"}), ErrNotSubscription},
	} {
		if !errors.Is(tc.err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, tc.err, tc.want)
		}
	}
	if len(e.Rules()) != 1 || q.Rules() != nil {
		t.Fatal("a failed call changed the rules")
	}
	// Update replaces the filter; Rule returns a copy the caller cannot change.
	if err := e.UpdateRule(admin.RuleProperties{Name: DefaultRuleName, Filter: &admin.SQLFilter{Expression: "a = 1", Parameters: map[string]any{"p": 1}}}); err != nil {
		t.Fatal(err)
	}
	r, ok := e.Rule(DefaultRuleName)
	if !ok || r.Filter.(*admin.SQLFilter).Expression != "a = 1" {
		t.Fatalf("rule %+v", r)
	}
	r.Filter.(*admin.SQLFilter).Parameters["p"] = 2
	if r2, _ := e.Rule(DefaultRuleName); r2.Filter.(*admin.SQLFilter).Parameters["p"] != 1 {
		t.Fatal("Rule returned shared state")
	}
}

// payloadView (what filters read) and filterProps (what actions change) agree on every
// system property.
func TestPayloadViewMatchesFilterProps(t *testing.T) {
	ttl := time.Minute
	p := newPayload(&azservicebus.Message{MessageID: sp("m"), ContentType: sp("ct"), CorrelationID: sp("c"), PartitionKey: sp("pk"),
		ReplyTo: sp("rt"), ReplyToSessionID: sp("rts"), SessionID: sp("s"), Subject: sp("l"), To: sp("to"), TimeToLive: &ttl,
		ApplicationProperties: map[string]any{"u": 1}})
	fp := p.filterProps(7)
	v := payloadView{p: p, seq: 7}
	for _, name := range append(sqlSysNames(), "Nope") {
		a, aok := v.Property(true, name)
		b, bok := fp.Property(true, name)
		if aok != bok || a != b {
			t.Errorf("sys.%s: view %v,%v props %v,%v", name, a, aok, b, bok)
		}
	}
	if u, ok := v.Property(false, "u"); !ok || u != 1 {
		t.Errorf("user property %v %v", u, ok)
	}
	empty := payloadView{p: newPayload(&azservicebus.Message{}), seq: 1}
	for _, name := range []string{"Label", "To", "TimeToLive"} {
		if _, ok := empty.Property(true, name); ok {
			t.Errorf("unset sys.%s reported as set", name)
		}
	}
}

// Cancelling a scheduled message sent to a topic cancels the copies action rules made of
// it too, and counts the message once.
func TestCancelScheduledCancelsActionCopies(t *testing.T) {
	ns, top, subs := ruleTopic(t, "s")
	mustRule(t, subs["s"], admin.RuleProperties{Name: "tag", Action: &admin.SQLAction{Expression: "SET tagged = TRUE"}})
	s, _ := ns.NewSender("t", nil)
	ctx := context.Background()
	seqs, err := s.ScheduleMessages(ctx, []*azservicebus.Message{msg("later")}, time.Now().Add(time.Hour), nil)
	if err != nil {
		t.Fatal(err)
	}
	if n := subs["s"].Counts().Scheduled; n != 2 {
		t.Fatalf("%d scheduled copies, want 2", n)
	}
	if err := s.CancelScheduledMessages(ctx, seqs, nil); err != nil {
		t.Fatal(err)
	}
	if n := subs["s"].Counts().Scheduled; n != 0 {
		t.Fatalf("%d scheduled copies left after cancel", n)
	}
	if c := top.Stats().Cancelled; c != 1 {
		t.Fatalf("topic counted %d cancelled", c)
	}
}

// hostileFilter is a 989-character filter that, on a message whose property p holds 4 KiB
// of "a", builds a 1 MiB string and matches it against a LIKE pattern that backtracks at
// every position: about 500 million steps.
func hostileFilter() string {
	return "p" + strings.Repeat("+p", 249) + " LIKE '%" + strings.Repeat("a", 480) + "b'"
}

// The evaluation of a message against a subscription's rules is bounded
// (sqlfilter.MaxEvalCost steps): a filter that would build megabytes and match them
// quadratically is stopped, and the message is dead-lettered in that subscription with
// RuleEvaluationFailedReason ("Service Bus dead-letter queues": errors while processing
// subscription rules are captured in the DLQ with the offending message), while other
// subscriptions route it as usual.
func TestRuleEvaluationCostBounded(t *testing.T) {
	ns, _, subs := ruleTopic(t, "hostile", "plain")
	if n := len(hostileFilter()); n > sqlfilter.MaxLength {
		t.Fatalf("the filter has %d characters", n)
	}
	for i := range 4 {
		mustRule(t, subs["hostile"], admin.RuleProperties{Name: fmt.Sprint("r", i), Filter: &admin.SQLFilter{Expression: hostileFilter()}})
	}
	if err := subs["hostile"].DeleteRule(DefaultRuleName); err != nil {
		t.Fatal(err)
	}
	s, _ := ns.NewSender("t", nil)
	msg := &azservicebus.Message{Body: []byte("m"), ApplicationProperties: map[string]any{"p": strings.Repeat("a", 4096)}}
	if err := s.SendMessage(context.Background(), msg, nil); err != nil {
		t.Fatal(err)
	}
	if n := subs["plain"].Counts().Active; n != 1 {
		t.Fatalf("the plain subscription holds %d messages, want 1", n)
	}
	dl := subs["hostile"].DeadLetters()
	if len(dl) != 1 || subs["hostile"].Counts().Active != 0 {
		t.Fatalf("the hostile subscription holds %d active and %d dead-lettered, want the message dead-lettered once", subs["hostile"].Counts().Active, len(dl))
	}
	if r := dl[0].DeadLetterReason; r == nil || *r != RuleEvaluationFailedReason {
		t.Fatalf("reason %v, want %s", r, RuleEvaluationFailedReason)
	}
	if d := dl[0].DeadLetterErrorDescription; d == nil || !strings.Contains(*d, "r0") {
		t.Fatalf("description %v, want one naming the rule r0", d)
	}
}

// An action cannot give a message properties of more than the service's 64 KiB
// ("Service Bus quotas", message property size), or than it had: a 478-character action
// that would give each one-byte message 16 MiB of properties dead-letters it with
// RuleEvaluationFailedReason instead, and the subscription retains kilobytes.
// Not parallel: it measures the process's heap.
func TestRuleActionPropertiesBounded(t *testing.T) {
	ns, _, subs := ruleTopic(t, "s")
	action := "SET a = 'xxxxxxxxxxxxxxx'" + strings.Repeat("; SET a = a+a", 16) // 960 KiB
	for i := range 15 {
		action += fmt.Sprintf("; SET b%d = a+'y'", i) // a copy each
	}
	onlyRule(t, subs["s"], admin.RuleProperties{Name: "grow", Filter: &admin.TrueFilter{}, Action: &admin.SQLAction{Expression: action}})
	s, _ := ns.NewSender("t", nil)
	base := liveHeap()
	for range 10 {
		if err := s.SendMessage(context.Background(), &azservicebus.Message{Body: []byte("m")}, nil); err != nil {
			t.Fatal(err)
		}
	}
	grown := int64(liveHeap()) - int64(base)
	dl := subs["s"].DeadLetters()
	if len(dl) != 10 || subs["s"].Counts().Active != 0 {
		t.Fatalf("%d active, %d dead-lettered (heap %+d MiB), want all 10 dead-lettered", subs["s"].Counts().Active, len(dl), grown>>20)
	}
	if r := dl[0].DeadLetterReason; r == nil || *r != RuleEvaluationFailedReason {
		t.Fatalf("reason %v, want %s", r, RuleEvaluationFailedReason)
	}
	if grown > 8<<20 {
		t.Fatalf("ten one-byte sends grew the live heap by %d MiB", grown>>20)
	}
}

// "Topic filters and actions": a subscription created with a default rule has that rule
// and no other; a bad one creates nothing.
func TestNewSubscriptionWithDefaultRule(t *testing.T) {
	ns, top, _ := ruleTopic(t)
	red, err := top.NewSubscription("red", &EntityOptions{DefaultRule: &admin.RuleProperties{
		Filter: &admin.SQLFilter{Expression: "color = 'red'"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	rules := red.Rules()
	if len(rules) != 1 || rules[0].Name != DefaultRuleName || fmt.Sprint(rules[0].Filter) != fmt.Sprint(&admin.SQLFilter{Expression: "color = 'red'"}) {
		t.Fatalf("rules %+v, want only the default rule given", rules)
	}
	if red.Options().DefaultRule != nil {
		t.Fatal("Options reports DefaultRule")
	}
	s, _ := ns.NewSender("t", nil)
	for _, c := range []string{"red", "blue"} {
		if err := s.SendMessage(context.Background(), &azservicebus.Message{ApplicationProperties: map[string]any{"color": c}}, nil); err != nil {
			t.Fatal(err)
		}
	}
	if c := red.Counts(); c.Active != 1 {
		t.Fatalf("counts %+v, want the red message only", c)
	}
	_, err = top.NewSubscription("bad", &EntityOptions{DefaultRule: &admin.RuleProperties{Name: "r", Filter: &admin.SQLFilter{Expression: "a = = 1"}}})
	if !errors.Is(err, ErrInvalidOptions) || !strings.Contains(err.Error(), `rule "r"`) {
		t.Fatalf("bad default rule: %v, want ErrInvalidOptions naming the rule", err)
	}
	if _, ok := top.Subscription("bad"); ok {
		t.Fatal("a subscription with a bad default rule was created")
	}
}

// SetRules replaces every rule at once, or none when one is bad.
func TestSetRules(t *testing.T) {
	ns, _, subs := ruleTopic(t, "s")
	sub := subs["s"]
	s, _ := ns.NewSender("t", nil)
	send := func(color string) {
		t.Helper()
		if err := s.SendMessage(context.Background(), &azservicebus.Message{ApplicationProperties: map[string]any{"color": color}}, nil); err != nil {
			t.Fatal(err)
		}
	}
	red := admin.RuleProperties{Name: "red", Filter: &admin.SQLFilter{Expression: "color = 'red'"}}
	blue := admin.RuleProperties{Name: "blue", Filter: &admin.CorrelationFilter{ApplicationProperties: map[string]any{"color": "blue"}}}
	if err := sub.SetRules([]admin.RuleProperties{red, blue}); err != nil {
		t.Fatal(err)
	}
	names := func() []string {
		var out []string
		for _, r := range sub.Rules() {
			out = append(out, r.Name)
		}
		return out
	}
	if got := names(); !slices.Equal(got, []string{"red", "blue"}) {
		t.Fatalf("rules %v, want [red blue]", got)
	}
	send("red")
	send("green")
	send("blue")
	if c := sub.Counts(); c.Active != 2 {
		t.Fatalf("counts %+v, want red and blue", c)
	}
	for name, rules := range map[string][]admin.RuleProperties{
		"a name twice": {red, red},
		"a bad filter": {red, {Name: "bad", Filter: &admin.SQLFilter{Expression: "a = = 1"}}},
		"no name":      {{Filter: &admin.TrueFilter{}}},
	} {
		if err := sub.SetRules(rules); !errors.Is(err, ErrInvalidOptions) {
			t.Errorf("%s: %v, want ErrInvalidOptions", name, err)
		}
		if got := names(); !slices.Equal(got, []string{"red", "blue"}) {
			t.Fatalf("%s: rules %v, want them unchanged", name, got)
		}
	}
	if err := sub.SetRules(nil); err != nil {
		t.Fatal(err)
	}
	send("red")
	if c := sub.Counts(); c.Active != 2 || len(sub.Rules()) != 0 {
		t.Fatalf("without rules: counts %+v, rules %v; want nothing more", c, names())
	}
	q, _ := ns.NewQueue("q", nil)
	if err := q.SetRules([]admin.RuleProperties{red}); !errors.Is(err, ErrNotSubscription) {
		t.Fatalf("SetRules on a queue: %v, want ErrNotSubscription", err)
	}
}
