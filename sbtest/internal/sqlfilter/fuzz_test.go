package sqlfilter

import (
	"testing"
	"time"
)

// FuzzFilter checks that no input makes parsing or evaluation panic or take long, and
// that what parses can be evaluated and applied.
func FuzzFilter(f *testing.F) {
	for _, s := range []string{
		"MessageProperty = 'A'", "sys.To IN ('a','b') OR StoreId = 'c'", "x LIKE '%a_b!%' ESCAPE '!'",
		"NOT EXISTS(a) AND b IS NOT NULL", "(1 + 2) * -3 / 4 % 5 >= 1.5E2", "[a b] = \"c\"",
		"SET a = b + 1; REMOVE c", "property('sys.Label') = newid()",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		start := time.Now()
		m := msg()
		b := NewBudget()
		if flt, err := ParseFilter(s, map[string]any{"p": 1}); err == nil {
			_, _ = flt.Match(m, b)
		}
		if a, err := ParseAction(s, map[string]any{"p": 1}); err == nil {
			_ = a.Apply(m, b)
		}
		if d := time.Since(start); d > time.Second {
			t.Fatalf("%q took %v", s, d)
		}
	})
}
