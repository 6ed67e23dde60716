package atom

import (
	"encoding/xml"
	"reflect"
	"strings"
	"testing"
	"time"
)

// Durations as the SDK's live tests send them and expect them back.
func TestDurations(t *testing.T) {
	for _, tc := range []struct {
		s      string
		d      time.Duration
		capped bool
		back   string
	}{
		{"PT45S", 45 * time.Second, false, "PT45S"},
		{"PT1M", time.Minute, false, "PT1M"},
		{"PT4H", 4 * time.Hour, false, "PT4H"},
		{"P14D", 14 * 24 * time.Hour, false, "P14D"},
		{"P1DT2H3M4.5S", 26*time.Hour + 3*time.Minute + 4500*time.Millisecond, false, "P1DT2H3M4.5S"},
		{"PT0.0000001S", 100, false, "PT0.0000001S"},
		{"PT0S", 0, false, "PT0S"},
		{"P1W", 7 * 24 * time.Hour, false, "P7D"},
		{MaxTimeSpan, time.Duration(1<<63 - 1), true, ""},
	} {
		d, capped, err := ParseDuration(tc.s)
		if err != nil || d != tc.d || capped != tc.capped {
			t.Errorf("ParseDuration(%q) = %v, %v, %v; want %v, %v", tc.s, d, capped, err, tc.d, tc.capped)
		}
		if tc.back != "" && FormatDuration(d) != tc.back {
			t.Errorf("FormatDuration(%v) = %q, want %q", d, FormatDuration(d), tc.back)
		}
	}
	for _, bad := range []string{"", "P", "PT", "45S", "PT45", "PTS", "P1H", "PT1D", "PT1.5M", "P1DT", "PT1S2", "PTT1S", "Pxyz"} {
		if _, _, err := ParseDuration(bad); err == nil {
			t.Errorf("ParseDuration(%q) accepted", bad)
		}
	}
}

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
	f.Add("P1DT2H3M4.5S")
	f.Fuzz(func(t *testing.T, s string) {
		var e Entry
		if xml.Unmarshal([]byte(s), &e) == nil && e.Content.Rule != nil && e.Content.Rule.Filter != nil {
			_, _ = DecodeValues(e.Content.Rule.Filter.Parameters)
		}
		if d, capped, err := ParseDuration(s); err == nil && !capped && d >= 0 {
			if d2, _, err := ParseDuration(FormatDuration(d)); err != nil || (d2-d) > 100 || (d-d2) > 100 {
				t.Fatalf("%q: %v formats as %q, parses back as %v, %v", s, d, FormatDuration(d), d2, err)
			}
		}
	})
}
