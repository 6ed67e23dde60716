package sqlfilter

import "testing"

// BenchmarkMatch measures one evaluation of a typical routing filter, the cost a topic
// pays per subscription rule per message.
func BenchmarkMatch(b *testing.B) {
	f, err := ParseFilter("color = 'red' AND quantity > 5 OR sys.Label LIKE 'Important%'", nil)
	if err != nil {
		b.Fatal(err)
	}
	m := msg()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := f.Match(m, NewBudget()); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkParse measures compiling a filter, paid once per rule created.
func BenchmarkParse(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ParseFilter("color = 'red' AND quantity > 5 OR sys.Label LIKE 'Important%'", nil); err != nil {
			b.Fatal(err)
		}
	}
}
