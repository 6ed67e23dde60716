package main

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus/admin"
	"github.com/sbkit/sbkit"
	"github.com/sbkit/sbkit/sbtest"
)

func TestParseISODuration(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		in   string
		want time.Duration
	}{
		{"", 0},
		{"PT1M", time.Minute},
		{"PT5S", 5 * time.Second},
		{"PT0.5S", 500 * time.Millisecond},
		{"PT1H30M", 90 * time.Minute},
		{"P1D", 24 * time.Hour},
		{"P1DT2H3M4S", 26*time.Hour + 3*time.Minute + 4*time.Second},
		{"pt20s", 20 * time.Second},
		// Beyond time.Duration's range: the longest one, not an overflowed value.
		{"P10675199DT2H48M5.4775807S", sbkit.MaxTTL},
		{"P200000D", sbkit.MaxTTL},
		{"P106751DT23H47M16.855S", sbkit.MaxTTL},
	} {
		got, err := parseISODuration(tt.in)
		if err != nil || got != tt.want {
			t.Errorf("parseISODuration(%q) = %v, %v; want %v", tt.in, got, err, tt.want)
		}
	}
	for _, bad := range []string{"P", "PT", "1M", "P1Y", "P1M", "PT1.5M", "PTS", "P1DT", "PT-1S", "1 minute"} {
		if d, err := parseISODuration(bad); err == nil {
			t.Errorf("parseISODuration(%q) = %v, want an error", bad, d)
		}
	}
}

// sampleConfig is in the format of Microsoft's emulator (its Config-schema.json): one
// namespace, queues and topics with Properties, subscriptions with Rules.
const sampleConfig = `{
  "UserConfig": {
    "Namespaces": [{
      "Name": "sbemulatorns",
      "Queues": [
        {"Name": "orders", "Properties": {
          "DeadLetteringOnMessageExpiration": true, "DefaultMessageTimeToLive": "PT1H",
          "DuplicateDetectionHistoryTimeWindow": "PT20S", "LockDuration": "PT1M",
          "MaxDeliveryCount": 3, "RequiresDuplicateDetection": true, "RequiresSession": false,
          "ForwardDeadLetteredMessagesTo": "plain", "ForwardTo": ""}},
        {"Name": "plain"},
        {"Name": "dedupe-default", "Properties": {"RequiresDuplicateDetection": true}},
        {"Name": "sessions", "Properties": {"RequiresSession": true}}
      ],
      "Topics": [{
        "Name": "events",
        "Properties": {"DefaultMessageTimeToLive": "PT10M"},
        "Subscriptions": [
          {"Name": "all", "Properties": {"LockDuration": "PT30S", "MaxDeliveryCount": 5, "ForwardTo": "plain"}},
          {"Name": "created", "Rules": [
            {"Name": "by-label", "Properties": {"FilterType": "Correlation",
              "CorrelationFilter": {"Label": "created", "Properties": {"tenant": "a"}}}},
            {"Name": "by-sql", "Properties": {"FilterType": "Sql",
              "SqlFilter": {"SqlExpression": "amount > 10"}, "Action": {"SqlExpression": "SET big = 1"}}}
          ]}
        ]
      }]
    }],
    "Logging": {"Type": "File,Console"}
  }
}`

func TestParseConfig(t *testing.T) {
	t.Parallel()
	e := newEntities()
	if err := parseConfig([]byte(sampleConfig), e); err != nil {
		t.Fatal(err)
	}
	checkOpts := func(name string, got *sbtest.EntityOptions, want sbtest.EntityOptions) {
		t.Helper()
		if got == nil || *got != want {
			t.Errorf("%s: options %+v, want %+v", name, got, want)
		}
	}
	if len(e.Queues) != 4 || len(e.Topics) != 1 {
		t.Fatalf("%d queues, %d topics; want 4, 1", len(e.Queues), len(e.Topics))
	}
	checkOpts("orders", e.Queues["orders"], sbtest.EntityOptions{LockDuration: time.Minute, MaxDeliveryCount: 3,
		DefaultTTL: time.Hour, DeadLetterOnExpiration: true, DuplicateDetectionWindow: 20 * time.Second,
		ForwardDeadLetteredMessagesTo: "plain"})
	checkOpts("plain", e.Queues["plain"], sbtest.EntityOptions{})
	// The schema's default window when only RequiresDuplicateDetection is set.
	checkOpts("dedupe-default", e.Queues["dedupe-default"], sbtest.EntityOptions{DuplicateDetectionWindow: 20 * time.Second})
	checkOpts("sessions", e.Queues["sessions"], sbtest.EntityOptions{RequiresSession: true})
	topic := e.Topics["events"]
	checkOpts("events", topic.Options, sbtest.EntityOptions{DefaultTTL: 10 * time.Minute})
	checkOpts("events/all", topic.Subscriptions["all"], sbtest.EntityOptions{LockDuration: 30 * time.Second, MaxDeliveryCount: 5, ForwardTo: "plain"})
	checkOpts("events/created", topic.Subscriptions["created"], sbtest.EntityOptions{})

	rules := e.Rules["events/Subscriptions/created"]
	if len(rules) != 2 || len(e.Rules) != 1 {
		t.Fatalf("rules %+v, want two rules for events/created only", e.Rules)
	}
	cf, ok := rules[0].Filter.(*admin.CorrelationFilter)
	if rules[0].Name != "by-label" || !ok || cf.Subject == nil || *cf.Subject != "created" || cf.ApplicationProperties["tenant"] != "a" {
		t.Errorf("rule 0 = %+v (%+v), want a correlation filter on Label created and tenant a", rules[0], cf)
	}
	sf, ok := rules[1].Filter.(*admin.SQLFilter)
	sa, aok := rules[1].Action.(*admin.SQLAction)
	if !ok || sf.Expression != "amount > 10" || !aok || sa.Expression != "SET big = 1" {
		t.Errorf("rule 1 = %+v, want SQL filter amount > 10 with action SET big = 1", rules[1])
	}
}

func TestCreateEntities(t *testing.T) {
	t.Parallel()
	e := newEntities()
	if err := parseConfig([]byte(sampleConfig), e); err != nil {
		t.Fatal(err)
	}
	ns := sbtest.NewNamespace(nil)
	if err := e.create(ns); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"orders", "plain", "sessions", "events/Subscriptions/all", "events/Subscriptions/created"} {
		if _, ok := ns.Entity(p); !ok {
			t.Errorf("entity %q not created", p)
		}
	}
	if q, _ := ns.Entity("orders"); q.Options().MaxDeliveryCount != 3 || q.Options().ForwardDeadLetteredMessagesTo != "plain" {
		t.Errorf("orders options %+v, want MaxDeliveryCount 3, dead letters forwarded to plain", q.Options())
	}
	if sub, _ := ns.Entity("events/Subscriptions/all"); sub.Options().ForwardTo != "plain" {
		t.Errorf("events/all ForwardTo %q, want plain", sub.Options().ForwardTo)
	}
	names := func(p string) []string {
		sub, _ := ns.Entity(p)
		var out []string
		for _, r := range sub.Rules() {
			out = append(out, r.Name)
		}
		return out
	}
	if got := strings.Join(names("events/Subscriptions/created"), ","); got != "by-label,by-sql" {
		t.Errorf("rules of events/created = %s, want the file's (by-label,by-sql) instead of $Default", got)
	}
	if got := strings.Join(names("events/Subscriptions/all"), ","); got != "$Default" {
		t.Errorf("rules of events/all = %s, want $Default", got)
	}
}

func TestParseConfigErrors(t *testing.T) {
	t.Parallel()
	wrap := func(ns string) string { return `{"UserConfig":{"Namespaces":[` + ns + `]}}` }
	for _, tt := range []struct {
		name, in, want string
	}{
		{"not json", `{`, "line 1, column 2"},
		{"syntax error on line 3", "{\n  // a comment\n  \"UserConfig\": {,}\n}", "line 3, column 18"},
		{"wrong type", wrap("{\"Queues\":[{\"Name\":\"q\",\n\"Properties\":{\"MaxDeliveryCount\":\"3\"}}]}"), "line 2, column 34: UserConfig.Namespaces.Queues.Properties.MaxDeliveryCount is string, want an integer"},
		{"no namespaces", `{"UserConfig":{}}`, "no UserConfig.Namespaces"},
		{"bad duration", wrap(`{"Queues":[{"Name":"q","Properties":{"LockDuration":"1 minute"}}]}`), "LockDuration"},
		{"lock above 5m", wrap(`{"Queues":[{"Name":"q","Properties":{"LockDuration":"PT6M"}}]}`), "above"},
		{"negative delivery count", wrap(`{"Queues":[{"Name":"q","Properties":{"MaxDeliveryCount":-1}}]}`), "negative"},
		{"queue twice", wrap(`{"Queues":[{"Name":"q"},{"Name":"q"}]}`), "declared twice"},
		{"queue and topic", wrap(`{"Queues":[{"Name":"q"}],"Topics":[{"Name":"q","Subscriptions":[]}]}`), "as a queue and as a topic"},
		{"unknown filter", wrap(`{"Topics":[{"Name":"t","Subscriptions":[{"Name":"s","Rules":[{"Name":"r","Properties":{"FilterType":"True"}}]}]}]}`), "neither Correlation nor Sql"},
		{"nested too deep", "{\"UserConfig\":\n  " + strings.Repeat("[", 100_000) + strings.Repeat("]", 100_000) + "}", "line 2, column 66: objects and arrays nested more than 64 deep"},
		{"nested too deep past comments and strings", "{\"a\": \"{[\\\"{\", /* [[ */ // {{\n\"c\":" + strings.Repeat("{\"b\":", 70) + "1" + strings.Repeat("}", 70) + "}", "line 2, column 320: objects and arrays nested more than 64 deep"},
		{"sql without filter", wrap(`{"Topics":[{"Name":"t","Subscriptions":[{"Name":"s","Rules":[{"Name":"r","Properties":{"FilterType":"Sql"}}]}]}]}`), "without SqlFilter"},
	} {
		err := parseConfig([]byte(tt.in), newEntities())
		if !errors.Is(err, errConfig) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: error %v, want errConfig mentioning %q", tt.name, err, tt.want)
		}
	}
	// A forward to an entity the file does not declare fails at creation.
	e := newEntities()
	if err := parseConfig([]byte(wrap(`{"Queues":[{"Name":"q","Properties":{"ForwardTo":"nowhere"}}]}`)), e); err != nil {
		t.Fatal(err)
	}
	if err := e.create(sbtest.NewNamespace(nil)); !errors.Is(err, errConfig) || !strings.Contains(err.Error(), `forwards to "nowhere"`) {
		t.Errorf("create with a forward to a missing entity: %v, want errConfig naming it", err)
	}
	// A forward names its target in any letter case, a queue as a topic (Service Bus
	// entity names are case-insensitive, as the model resolves them).
	e = newEntities()
	if err := parseConfig([]byte(wrap(`{"Queues":[{"Name":"orders"},{"Name":"in","Properties":{"ForwardTo":"ORDERS"}}],
		"Topics":[{"Name":"events","Subscriptions":[{"Name":"s","Properties":{"ForwardTo":"Orders"}}]}]}`)), e); err != nil {
		t.Fatal(err)
	}
	ns := sbtest.NewNamespace(nil)
	if err := e.create(ns); err != nil {
		t.Fatalf("create with a forward to ORDERS for queue orders: %v", err)
	}
	snd, _ := ns.NewSender("in", nil)
	if err := snd.SendMessage(context.Background(), &azservicebus.Message{Body: []byte("x")}, nil); err != nil {
		t.Fatal(err)
	}
	if q, _ := ns.Entity("orders"); q.Counts().Active != 1 {
		t.Errorf("orders holds %+v after a send to in, which forwards to ORDERS", q.Counts())
	}
	// A SQL syntax error surfaces when the rule is created, naming the subscription.
	e = newEntities()
	bad := wrap(`{"Topics":[{"Name":"t","Subscriptions":[{"Name":"s","Rules":[{"Name":"r","Properties":{"FilterType":"Sql","SqlFilter":{"SqlExpression":"a = = 1"}}}]}]}]}`)
	if err := parseConfig([]byte(bad), e); err != nil {
		t.Fatal(err)
	}
	if err := e.create(sbtest.NewNamespace(nil)); err == nil || !strings.Contains(err.Error(), `t/Subscriptions/s: `) || !strings.Contains(err.Error(), `rule "r"`) {
		t.Errorf("create with a bad SQL filter: %v, want an error naming the rule", err)
	}
}

// An unknown key is refused, naming its path: a misspelt property would otherwise start
// an entity without it ("RequireSession" a plain queue, "LockDuraton" the default lock).
// Keys are those of Microsoft's emulator schema (Config-schema.json) for each level, so a
// property of another kind of entity is unknown too.
func TestParseConfigRefusesUnknownKeys(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ config, path, key string }{
		{`{"UserConfig": {"Namespaces": [{"Name": "n", "Queues": [{"Name": "q", "Properties": {"RequireSession": true}}]}]}}`,
			"UserConfig.Namespaces[0].Queues[0].Properties", "RequireSession"},
		{`{"UserConfig": {"Namespaces": [{"Name": "n", "Queues": [{"Name": "a"}, {"Name": "q", "Properties": {"LockDuraton": "PT5M"}}]}]}}`,
			"UserConfig.Namespaces[0].Queues[1].Properties", "LockDuraton"},
		{`{"UserConfig": {"Namespaces": [{"Name": "n", "Topics": [{"Name": "t", "Properties": {"RequiresSession": true}, "Subscriptions": []}]}]}}`,
			"UserConfig.Namespaces[0].Topics[0].Properties", "RequiresSession"},
		{`{"UserConfig": {"Namespaces": [{"Name": "n", "Topics": [{"Name": "t", "Subscriptions": [{"Name": "s", "Rules": [{"Name": "r", "Properties": {"FilterType": "Sql", "SqlFilter": {"SqlExpresion": "1=1"}}}]}]}]}]}}`,
			"UserConfig.Namespaces[0].Topics[0].Subscriptions[0].Rules[0].Properties.SqlFilter", "SqlExpresion"},
		{`{"UserConfig": {"Namespaces": [{"Name": "n", "Queue": [{"Name": "q"}]}]}}`,
			"UserConfig.Namespaces[0]", "Queue"},
		{`{"UserConfig": {"Namespaces": [{"Name": "n"}], "Loging": {"Type": "File"}}}`,
			"UserConfig", "Loging"},
		{`{"UserConfig": {"Namespaces": [{"Name": "n"}]}, "Extra": 1}`, "the top level", "Extra"},
	} {
		err := parseConfig([]byte(tt.config), newEntities())
		if !errors.Is(err, errConfig) || !strings.Contains(err.Error(), tt.path) || !strings.Contains(err.Error(), `"`+tt.key+`"`) {
			t.Errorf("%s: %v, want an error naming %q at %s", tt.config, err, tt.key, tt.path)
		}
	}
	// Every key of the schema is known, at every level (the sample has them all but a
	// few correlation fields, checked here), and values of user properties are free.
	if err := parseConfig([]byte(sampleConfig), newEntities()); err != nil {
		t.Fatal(err)
	}
	all := `{"UserConfig": {"Namespaces": [{"Name": "n", "Topics": [{"Name": "t", "Properties": {"DefaultMessageTimeToLive": "PT1H",
	  "DuplicateDetectionHistoryTimeWindow": "PT1M", "RequiresDuplicateDetection": true}, "Subscriptions": [{"Name": "s",
	  "Properties": {"DeadLetteringOnMessageExpiration": true, "DefaultMessageTimeToLive": "PT1H", "LockDuration": "PT1M",
	  "MaxDeliveryCount": 3, "ForwardDeadLetteredMessagesTo": "", "ForwardTo": "", "RequiresSession": false},
	  "Rules": [{"Name": "r", "Properties": {"FilterType": "Correlation", "CorrelationFilter": {"ContentType": "a",
	  "CorrelationId": "b", "Label": "c", "MessageId": "d", "ReplyTo": "e", "ReplyToSessionId": "f", "SessionId": "g",
	  "To": "h", "Properties": {"any key": {"nested": 1}}}}}]}]}]}], "Logging": {"Type": "Console"}}}`
	if err := parseConfig([]byte(all), newEntities()); err != nil {
		t.Fatalf("every key of the schema: %v", err)
	}
}

// Microsoft ships Config.json with // comments: comments and trailing commas are read
// (HuJSON), and an error names the line and column of what it is about, counted in the
// file as written.
func TestParseConfigWithComments(t *testing.T) {
	t.Parallel()
	const withComments = `{
  // Microsoft's file has comments like this one
  "UserConfig": {
    "Namespaces": [{
      "Name": "sbemulatorns", /* and this */
      "Queues": [
        {"Name": "q", "Properties": {"LockDuration": "PT30S",}},
      ],
      "Topics": []
    }],
    "Logging": {"Type": "File"}
  }
}`
	e := newEntities()
	if err := parseConfig([]byte(withComments), e); err != nil {
		t.Fatal(err)
	}
	if o := e.Queues["q"]; o == nil || o.LockDuration != 30*time.Second {
		t.Fatalf("queue q options %+v, want a 30 s lock", o)
	}
	misspelt := strings.Replace(withComments, `"LockDuration"`, `"LockDuraton"`, 1)
	err := parseConfig([]byte(misspelt), newEntities())
	if !errors.Is(err, errConfig) || !strings.Contains(err.Error(), `line 7, column 38: UserConfig.Namespaces[0].Queues[0].Properties: unknown key "LockDuraton"`) {
		t.Errorf("misspelt key: %v, want its line and column (7, 38) and path", err)
	}
	// A value it cannot honour names its entity, at the entity's position.
	tooLong := strings.Replace(withComments, `"PT30S"`, `"PT10M"`, 1)
	err = parseConfig([]byte(tooLong), newEntities())
	if !errors.Is(err, errConfig) || !strings.Contains(err.Error(), "line 7, column 9: queue q: LockDuration 10m0s is above 5m0s") {
		t.Errorf("lock above 5 minutes: %v, want the queue's line and column (7, 9)", err)
	}
	badRule := strings.Replace(withComments, `"Topics": []`, `"Topics": [{"Name": "t", "Subscriptions": [{"Name": "s",
        "Rules": [{"Name": "ok", "Properties": {"FilterType": "Sql", "SqlFilter": {"SqlExpression": "1=1"}}},
                  {"Name": "r", "Properties": {"FilterType": "True"}}]}]}]`, 1)
	err = parseConfig([]byte(badRule), newEntities())
	if !errors.Is(err, errConfig) || !strings.Contains(err.Error(), `line 11, column 19: subscription t/s: rule "r": FilterType "True"`) {
		t.Errorf("unknown filter type: %v, want the rule's line and column (11, 19)", err)
	}
}
