package main

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/sbkit/sbkit/dedupe/pgdedupe/pgtest"
	"github.com/sbkit/sbkit/examples/internal/leaktest"
)

// env is the test's environment: the default broker (in memory) and SBKIT_PG_DSN.
func env(key string) string {
	if key == DSNEnv {
		return pgtest.DSN()
	}
	return ""
}

// TestOutboxExample runs the example in memory: every order is shipped once although one
// Complete fails after its commit, and every follow-up reaches the broker once.
func TestOutboxExample(t *testing.T) {
	pgtest.Require(t)
	leaktest.Check(t)
	schema := fmt.Sprintf("sbkit_example_test_%d", time.Now().UnixNano())
	t.Cleanup(func() {
		ctx := context.Background()
		if c, err := pgx.Connect(ctx, pgtest.DSN()); err == nil {
			_, _ = c.Exec(ctx, "DROP SCHEMA "+pgx.Identifier{schema}.Sanitize()+" CASCADE")
			_ = c.Close(ctx)
		}
	})
	var out bytes.Buffer
	if err := run(t.Context(), []string{"-n", "5", "-schema", schema}, &out, env); err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	for _, want := range []string{
		"6 deliveries: handled 5, skipped as duplicates 1; shipments written this run 5; follow-ups sent 5",
		`queue "shipped" holds 5 follow-ups, duplicates dropped by the broker 0`,
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}
