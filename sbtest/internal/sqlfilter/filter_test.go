package sqlfilter

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// msg is the message most filter tests read.
func msg() *Properties {
	return &Properties{
		Sys: map[string]any{
			"MessageId": "m-1", "Label": "Important service bus news", "To": "Store5",
			"CorrelationId": "abc-42", "SequenceNumber": int64(7), "ContentType": "application/json",
		},
		User: map[string]any{
			"MessageProperty": "A", "SuperHero": "SuperMan Returns", "color": "blue",
			"quantity": 10, "price": 2.5, "StoreId": "Store2", "message-property": "A",
			"My Property": "spaced", "flag": true, "pct": "50%off", "when": time.Date(2026, 1, 2, 0, 0, 0, 0, time.UTC),
			"nothing": nil, "big": uint64(1 << 63), "blob": []byte("x"), "Priority": int32(3),
		},
	}
}

// Examples from "Subscription Rule SQL Filter Syntax" and "Set subscription filters
// (examples)" in the Service Bus documentation, plus the edge cases of its remarks on
// unknown values and type promotion.
func TestFilterMatches(t *testing.T) {
	tests := []struct {
		expr string
		want bool
	}{
		{"MessageProperty = 'A'", true},
		{"MessageProperty = 'B'", false},
		{"user.MessageProperty = 'A'", true},
		{"SuperHero like 'SuperMan%'", true},
		{"user.SuperHero LIKE 'Super_an%'", true},
		{"SuperHero LIKE 'superman%'", false}, // case-sensitive, like C#'s ordinal string comparison
		{"sys.label LIKE '%bus%'", true},
		{"sys.Subject LIKE '%bus%'", true},
		{"sys.Label = 'Important'", false},
		{"sys.messageid = 'm-1'", true},
		{"sys.correlationid like 'abc-%'", true},
		{"sys.To IN ('Store5','Store6','Store7') OR StoreId = 'Store8'", true},
		{"StoreId IN('Store1','Store2','Store3')", true},
		{"StoreId NOT IN('Store1','Store2','Store3')", false},
		{"StoreId IN('Store1','Store3')", false},
		{"color = 'blue' AND quantity = 10", true},
		{"color = 'blue' AND quantity = 11", false},
		{"color = 'red' OR quantity = 10", true},
		{"NOT color = 'red'", true},
		{`"message-property" = 'A'`, true},
		{"[My Property] = 'spaced'", true},
		{"quantity > 5 AND quantity <= 10", true},
		{"quantity <> 10", false},
		{"quantity != 9", true},
		{"quantity * 2 + 1 = 21", true},
		{"quantity / 4 = 2", true},     // integer division
		{"quantity / 4.0 = 2.5", true}, // promoted to double
		{"quantity % 3 = 1", true},
		{"-quantity = -10", true},
		{"price > 2", true},
		{"price = 2.5", true},
		{"price * 4 = 1.0E1", true},
		{"Priority = 3", true}, // int32 widened
		{"quantity = 10.0", true},
		{"'a' + 'b' = 'ab'", true},
		{"color + '!' = 'blue!'", true},
		{"flag = TRUE", true},
		{"flag", true},
		{"flag <> FALSE", true},
		{"flag > FALSE", false}, // booleans have no order: unknown
		{"when > when", false},
		{"when = when", true},
		{"sys.SequenceNumber >= 7", true},
		{"pct LIKE '50!%%' ESCAPE '!'", true},
		{"pct LIKE '50!%' ESCAPE '!'", false},
		{"pct LIKE '5_\\%off' ESCAPE '\\'", true},
		{"pct NOT LIKE '%off'", false},
		{"missing IS NULL", true},
		{"missing IS NOT NULL", false},
		{"nothing IS NULL", true},
		{"color IS NOT NULL", true},
		{"EXISTS(color)", true},
		{"EXISTS(missing)", false},
		{"EXISTS(nothing)", true},
		{"NOT EXISTS(missing)", true},
		{"sys.ReplyTo IS NULL", true}, // a system property that is not set is unknown
		// Unknown values: comparisons, arithmetic, IN and LIKE on a missing property are
		// unknown, NOT unknown is unknown, and the filter does not match.
		{"missing = 1", false},
		{"NOT missing = 1", false},
		{"missing + 1 = 1", false},
		{"missing IN (1, 2)", false},
		{"missing NOT IN (1, 2)", false},
		{"missing LIKE '%'", false},
		{"missing = 1 OR color = 'blue'", true},
		{"missing = 1 AND color = 'red'", false},
		{"NOT (missing = 1 AND color = 'red')", true},
		{"quantity IN (1, missing)", false},
		{"quantity IN (10, missing)", true},
		// Type mismatch is unknown, not an error.
		{"color = 1", false},
		{"NOT color = 1", false},
		{"quantity = '10'", false},
		{"quantity / 0 = 1", false},
		{"quantity % 0 = 1", false},
		{"blob = blob", false},
		{"big > 1", true},
		{"1 = 1", true},
		{"1 = 0", false},
		{"TRUE", true},
		{"FALSE", false},
		{"NULL", false},
		{"((color = 'blue'))", true},
		{"quantity = @q", true},
		{"color LIKE @p ESCAPE @e", true},
		{"property('color') = 'blue'", true},
		{"property('sys.To') = 'Store5'", true},
		{"property('sys.Nope') IS NULL", true},
		{"newid() IS NOT NULL", true},
		{"newid() <> newid()", true},
		{"and_or = 1", false}, // keywords inside identifiers are identifiers
	}
	params := map[string]any{"@q": 10, "p": "bl%", "e": "!"}
	for _, tt := range tests {
		f, err := ParseFilter(tt.expr, params)
		if err != nil {
			t.Errorf("ParseFilter(%q): %v", tt.expr, err)
			continue
		}
		if got, err := f.Match(msg(), NewBudget()); got != tt.want || err != nil {
			t.Errorf("%q matched %v (%v), want %v", tt.expr, got, err, tt.want)
		}
	}
}

func TestFilterSyntaxErrors(t *testing.T) {
	for _, expr := range []string{
		"", "color =", "color = 'blue", "sys.Nope = 1", "color LIKE 5", "color LIKE 'a' ESCAPE 'ab'",
		"color LIKE 'a!' ESCAPE '!'", "(color = 'a'", "color = 'a')", "IN (1)", "color IS 5",
		"color NOT = 1", "9223372036854775808 = 1", "1e999 = 1", "1. = 1", "1e = 1", "1x = 1",
		"unknownfn(1)", "color = @missing", "@", "color # 1", "[open", `"open`, "-- comment",
		"EXISTS(1)", "EXISTS color", "color = 1 color = 2", "SET color = 1", "sys.",
		strings.Repeat("(", MaxDepth+1) + "1=1" + strings.Repeat(")", MaxDepth+1),
		strings.Repeat("NOT ", MaxDepth+1) + "TRUE",
		strings.Repeat("-", MaxDepth+1) + "1 = 1",
		"x = '" + strings.Repeat("a", MaxLength) + "'",
	} {
		_, err := ParseFilter(expr, nil)
		var se *SyntaxError
		if !errors.As(err, &se) {
			t.Errorf("ParseFilter(%q) = %v, want a *SyntaxError", expr, err)
		}
	}
}

// Examples from "Subscription Rule SQL Action Syntax" and the filter examples page.
func TestActionApply(t *testing.T) {
	tests := []struct {
		action string
		check  func(p *Properties) bool
	}{
		{"SET MyProperty = 'x'", func(p *Properties) bool { return p.User["MyProperty"] == "x" }},
		{"SET sys.Label = 'HelloWorld'", func(p *Properties) bool { return p.Sys["Label"] == "HelloWorld" }},
		{"SET sys.To = 'Entity'", func(p *Properties) bool { return p.Sys["To"] == "Entity" }},
		{"SET quantity = quantity / 2", func(p *Properties) bool { return p.User["quantity"] == int64(5) }},
		{"SET quantity = quantity * 1.5", func(p *Properties) bool { return p.User["quantity"] == 15.0 }},
		{"REMOVE color", func(p *Properties) bool { _, ok := p.User["color"]; return !ok }},
		{"SET a = 1; SET b = a + 1; REMOVE a", func(p *Properties) bool {
			_, ok := p.User["a"]
			return !ok && p.User["b"] == int64(2)
		}},
		{"SET a = 1 SET b = 2;", func(p *Properties) bool { return p.User["a"] == int64(1) && p.User["b"] == int64(2) }},
		{"SET copy = sys.MessageId", func(p *Properties) bool { return p.User["copy"] == "m-1" }},
		{"SET gone = missing", func(p *Properties) bool { v, ok := p.User["gone"]; return ok && v == nil }},
		{"SET sys.Label = 5", func(p *Properties) bool { return p.Sys["Label"] == "Important service bus news" }},
		{"SET isBlue = color = 'blue'", func(p *Properties) bool { return p.User["isBlue"] == true }},
		{"SET id = newid()", func(p *Properties) bool { s, _ := p.User["id"].(string); return len(s) == 36 }},
	}
	for _, tt := range tests {
		a, err := ParseAction(tt.action, nil)
		if err != nil {
			t.Errorf("ParseAction(%q): %v", tt.action, err)
			continue
		}
		p := msg()
		if err := a.Apply(p, NewBudget()); err != nil {
			t.Errorf("%q: %v", tt.action, err)
		}
		if !tt.check(p) {
			t.Errorf("%q gave user %v sys %v", tt.action, p.User, p.Sys)
		}
	}
}

func TestActionSyntaxErrors(t *testing.T) {
	for _, action := range []string{
		"", ";", "SET", "SET a", "SET a 1", "SET a = ", "REMOVE", "REMOVE 1", "DELETE a",
		"SET sys.SequenceNumber = 1", "REMOVE sys.Label", "SET sys.Nope = 'x'", "a = 1",
		strings.Repeat("SET a = 1;", MaxActionStatements+1),
	} {
		_, err := ParseAction(action, nil)
		var se *SyntaxError
		if !errors.As(err, &se) {
			t.Errorf("ParseAction(%q) = %v, want a *SyntaxError", action, err)
		}
	}
}

func TestLikeWorstCaseIsBounded(t *testing.T) {
	// A pattern of many %a segments against a long non-matching value would be
	// exponential with naive backtracking.
	f, err := ParseFilter("v LIKE '"+strings.Repeat("%a", 200)+"%b'", nil)
	if err != nil {
		t.Fatal(err)
	}
	p := &Properties{User: map[string]any{"v": strings.Repeat("a", 5000)}}
	if ok, err := f.Match(p, NewBudget()); ok || err != nil {
		t.Fatalf("matched %v, %v", ok, err)
	}
}

func TestStringConcatenationIsBounded(t *testing.T) {
	f, err := ParseFilter("v+v+v+v+v+v+v+v+v+v+v+v+v+v+v+v+v+v+v+v+v = ''", nil)
	if err != nil {
		t.Fatal(err)
	}
	p := &Properties{User: map[string]any{"v": strings.Repeat("a", maxString/16)}}
	if ok, err := f.Match(p, NewBudget()); ok || !errors.Is(err, ErrCostExceeded) {
		t.Fatalf("matched %v, %v; want ErrCostExceeded", ok, err)
	}
}

// The work of one message is bounded (MaxEvalCost), whatever its filters do: string
// building, comparisons, LIKE and property() names are charged, filters and actions given
// one Budget share it, and what runs out is ErrCostExceeded rather than a result.
func TestEvaluationCostIsBounded(t *testing.T) {
	big := strings.Repeat("a", 64<<10)
	p := &Properties{User: map[string]any{"v": big, "w": big + "b"}}
	for _, tt := range []struct {
		expr string
		over bool
	}{
		{"v LIKE '%" + strings.Repeat("a", 400) + "b'", true}, // backtracks at every position: O(n·m)
		{"v LIKE '%b'", false},                                // one pass over 64 KiB
		{"v+v+v+v+v+v+v+v = w", true},                         // 35 × 64 KiB copied
		{"v+v = w", false},
		{"v = w AND v = w AND v = w", false},
		{"v IN (w, w, w, w, w, w, w, w, w, w, w, w, w, w, w, w, w)", true},
		{"property(v) IS NULL", false},
	} {
		f, err := ParseFilter(tt.expr, nil)
		if err != nil {
			t.Fatal(err)
		}
		_, err = f.Match(p, NewBudget())
		if got := errors.Is(err, ErrCostExceeded); got != tt.over {
			t.Errorf("%q: %v, want over the bound %v", tt.expr, err, tt.over)
		}
	}
	// A budget is shared: cheap filters that fit one by one do not fit together.
	f, _ := ParseFilter("v LIKE '%b'", nil)
	b := NewBudget()
	var err error
	for i := 0; i < 100 && err == nil; i++ {
		_, err = f.Match(p, b)
	}
	if !errors.Is(err, ErrCostExceeded) {
		t.Fatalf("100 evaluations from one budget: %v, want ErrCostExceeded", err)
	}
	a, _ := ParseAction("SET x = v; SET y = x + x; SET z = y + y; SET q = z + z + z + z", nil)
	if err := a.Apply(p, NewBudget()); !errors.Is(err, ErrCostExceeded) {
		t.Fatalf("an action copying megabytes: %v, want ErrCostExceeded", err)
	}
}

func TestSystemPropertiesAreParsable(t *testing.T) {
	for _, n := range SystemProperties() {
		if _, err := ParseFilter("sys."+n+" IS NULL", nil); err != nil {
			t.Errorf("sys.%s: %v", n, err)
		}
	}
}

// User property names are case-insensitive ("Subscription Rule SQL Filter Syntax",
// considerations: "Property names are case-insensitive"): a filter or action names a
// property in any case; an exact match wins over one that differs in case.
func TestUserPropertyNamesIgnoreCase(t *testing.T) {
	for _, tt := range []struct {
		expr string
		want bool
	}{
		{"COLOR = 'blue'", true},
		{"user.Color = 'blue'", true},
		{"messageproperty = 'A'", true},
		{"EXISTS(STOREID)", true},
		{"priority = 3", true},
		{"priority = 4", false},
		{"property('QUANTITY') = 10", true},
	} {
		f, err := ParseFilter(tt.expr, nil)
		if err != nil {
			t.Fatalf("ParseFilter(%q): %v", tt.expr, err)
		}
		if got, err := f.Match(msg(), NewBudget()); err != nil || got != tt.want {
			t.Errorf("%q = %v, %v; want %v", tt.expr, got, err, tt.want)
		}
	}
	exact := &Properties{User: map[string]any{"a": 1, "A": 2}}
	if f, _ := ParseFilter("A = 2 AND a = 1", nil); !mustMatch(t, f, exact) {
		t.Error("an exact name did not win over one that differs in case")
	}
	p := msg()
	a, err := ParseAction("SET QUANTITY = 11; REMOVE Color", nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Apply(p, NewBudget()); err != nil {
		t.Fatal(err)
	}
	if _, ok := p.User["QUANTITY"]; ok || p.User["quantity"] != int64(11) {
		t.Errorf("SET QUANTITY made %v; want quantity set to 11", p.User)
	}
	if _, ok := p.User["color"]; ok {
		t.Errorf("REMOVE Color left color: %v", p.User)
	}
}

func mustMatch(t *testing.T, f *Filter, m Message) bool {
	t.Helper()
	ok, err := f.Match(m, NewBudget())
	if err != nil {
		t.Fatal(err)
	}
	return ok
}
