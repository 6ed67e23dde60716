package pgoutbox_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/sbkit/sbkit/dedupe/pgdedupe/pgtest"
	"github.com/sbkit/sbkit/outbox/pgoutbox"
)

// TestNewRefusesLongNames: names PostgreSQL would truncate (identifiers and channel
// names are at most 63 bytes) are refused by New: a channel "schema.table" of 64 bytes
// or more (pg_notify fails on it, LISTEN truncates it), and a table whose "_order",
// "_retry" or "_dead" names would be cut onto each other; the longest names that fit
// are accepted.
func TestNewRefusesLongNames(t *testing.T) {
	pool, _ := pgtest.NewPool(t)
	for _, tt := range []struct {
		schema, table string
		ok            bool
	}{
		{strings.Repeat("s", 51), "sbkit_outbox", false}, // channel of 64 bytes
		{strings.Repeat("s", 50), "sbkit_outbox", true},  // 63
		{"", strings.Repeat("t", 62), false},
		{"", strings.Repeat("t", 58), false}, // t..._order is 64 bytes
		{"", strings.Repeat("t", 57), true},
		{strings.Repeat("s", 64), "t", false},
	} {
		_, err := pgoutbox.New(pool, &pgoutbox.Options{Schema: tt.schema, Table: tt.table})
		if tt.ok != (err == nil) || (err != nil && !errors.Is(err, pgoutbox.ErrInvalidOptions)) {
			t.Errorf("New(schema of %d bytes, table of %d bytes) = %v; want ok %v, or ErrInvalidOptions",
				len(tt.schema), len(tt.table), err, tt.ok)
		}
	}
}
