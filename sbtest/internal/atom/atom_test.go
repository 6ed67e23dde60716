package atom

import (
	"encoding/xml"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestValuesRoundTrip(t *testing.T) {
	when := time.Date(2026, 11, 23, 10, 0, 0, 5, time.UTC)
	in := map[string]any{"s": "x", "b": true, "i": int64(-3), "f": 2.5, "t": when}
	l, err := EncodeValues(in)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := xml.Marshal(l)
	if err != nil {
		t.Fatal(err)
	}
	var back KeyValueList
	if err := xml.Unmarshal(raw, &back); err != nil {
		t.Fatal(err)
	}
	out, err := DecodeValues(&back)
	if err != nil || !reflect.DeepEqual(in, out) {
		t.Fatalf("round trip: %v %v\n%s", out, err, raw)
	}
	if _, err := EncodeValues(map[string]any{"x": []byte("no")}); err == nil {
		t.Fatal("[]byte encoded")
	}
	if _, err := DecodeValues(&KeyValueList{Items: []KeyValue{{Key: "k", Value: Value{Type: "x:int", Text: "nan"}}}}); err == nil {
		t.Fatal("bad int decoded")
	}
}

// A request body in the shape the SDK's admin client marshals (its atom.QueueEnvelope
// and RuleEnvelope) decodes into the descriptions.
func TestDecodeSDKShapedRequests(t *testing.T) {
	queue := `<entry xmlns="http://www.w3.org/2005/Atom"><content type="application/xml"><QueueDescription xmlns="http://schemas.microsoft.com/netservices/2010/10/servicebus/connect"><LockDuration>PT45S</LockDuration><MaxDeliveryCount>7</MaxDeliveryCount><Status>ReceiveDisabled</Status><AuthorizationRules><AuthorizationRule xmlns:XMLSchema-instance="http://www.w3.org/2001/XMLSchema-instance" XMLSchema-instance:type="SharedAccessAuthorizationRule"><ClaimType>SharedAccessKey</ClaimType><ClaimValue>None</ClaimValue><Rights><AccessRights>Listen</AccessRights></Rights><KeyName>k</KeyName></AuthorizationRule></AuthorizationRules><ForwardTo>sb://h/q2</ForwardTo></QueueDescription></content></entry>`
	var e Entry
	if err := xml.Unmarshal([]byte(queue), &e); err != nil {
		t.Fatal(err)
	}
	q := e.Content.Queue
	if q == nil || *q.LockDuration != "PT45S" || *q.MaxDeliveryCount != 7 || *q.Status != "ReceiveDisabled" || *q.ForwardTo != "sb://h/q2" ||
		q.AuthorizationRules == nil || len(*q.AuthorizationRules) != 1 || (*q.AuthorizationRules)[0].Rights[0] != "Listen" ||
		(*q.AuthorizationRules)[0].Type != "SharedAccessAuthorizationRule" {
		t.Fatalf("queue %+v", q)
	}
	rule := `<entry xmlns="http://www.w3.org/2005/Atom"><content type="application/xml"><RuleDescription xmlns="http://schemas.microsoft.com/netservices/2010/10/servicebus/connect" xmlns:i="http://www.w3.org/2001/XMLSchema-instance"><Filter xmlns:XMLSchema-instance="http://www.w3.org/2001/XMLSchema-instance" XMLSchema-instance:type="SqlFilter"><SqlExpression>a = @p</SqlExpression><Parameters><KeyValueOfstringanyType><Key>@p</Key><Value xmlns:XMLSchema-instance="http://www.w3.org/2001/XMLSchema-instance" XMLSchema-instance:type="l28:int" xmlns:l28="http://www.w3.org/2001/XMLSchema">5</Value></KeyValueOfstringanyType></Parameters></Filter><Action xmlns:XMLSchema-instance="http://www.w3.org/2001/XMLSchema-instance" XMLSchema-instance:type="SqlRuleAction"><SqlExpression>SET b = 1</SqlExpression></Action><Name>r</Name></RuleDescription></content></entry>`
	e = Entry{}
	if err := xml.Unmarshal([]byte(rule), &e); err != nil {
		t.Fatal(err)
	}
	r := e.Content.Rule
	if r == nil || r.Name != "r" || r.Filter.Type != "SqlFilter" || *r.Filter.SQLExpression != "a = @p" || r.Action.Type != "SqlRuleAction" {
		t.Fatalf("rule %+v", r)
	}
	if p, err := DecodeValues(r.Filter.Parameters); err != nil || p["@p"] != int64(5) {
		t.Fatalf("params %v %v", p, err)
	}
}

// Encoded entries carry the Atom and Service Bus namespaces and the i:type attributes.
func TestEncodeEntry(t *testing.T) {
	e := Entry{Title: &Title{Type: "text", Text: "r"}, Content: Content{Type: "application/xml", Rule: &RuleDescription{RuleBody: RuleBody{
		Name: "r", Filter: &Filter{Type: "TrueFilter", SQLExpression: ptr("1=1")}, Action: &Action{Type: "EmptyRuleAction"}}}}}
	raw, err := xml.Marshal(e)
	if err != nil {
		t.Fatal(err)
	}
	s := string(raw)
	for _, want := range []string{`<entry xmlns="` + NSAtom + `"`, `<RuleDescription xmlns="` + NSServiceBus + `"`, `type="TrueFilter"`, `<Name>r</Name>`} {
		if !strings.Contains(s, want) {
			t.Errorf("missing %s in %s", want, s)
		}
	}
	var back Entry
	if err := xml.Unmarshal(raw, &back); err != nil || back.Content.Rule.Filter.Type != "TrueFilter" || back.Title.Text != "r" {
		t.Fatalf("decode own output: %v %+v", err, back)
	}
}

func ptr[T any](v T) *T { return &v }

func FuzzDecodeEntry(f *testing.F) {
	f.Add(`<entry xmlns="http://www.w3.org/2005/Atom"><content type="application/xml"><QueueDescription xmlns="http://schemas.microsoft.com/netservices/2010/10/servicebus/connect"><LockDuration>PT1M</LockDuration></QueueDescription></content></entry>`)
	f.Fuzz(func(t *testing.T, s string) {
		var e Entry
		if xml.Unmarshal([]byte(s), &e) == nil && e.Content.Rule != nil && e.Content.Rule.Filter != nil {
			_, _ = DecodeValues(e.Content.Rule.Filter.Parameters)
		}
	})
}
