package pgoutbox

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/sbkit/sbkit"
	"github.com/sbkit/sbkit/dedupe/pgdedupe/pgtest"
)

// TestClaimNotJITCompiled: the statements of a claim's transaction are never compiled
// by PostgreSQL's JIT. A claim's custom plan over a backlog of 100,000 rows is
// estimated above jit_above_cost (it reads the primary key in order, and the planner
// prices the whole range), and compiling it took 0.5 to 0.7 s where running it takes
// 3 ms. The session here sets the JIT thresholds to 0, so that any plan would be
// compiled, and runs the claim statement as a claim does, after beginSQL.
func TestClaimNotJITCompiled(t *testing.T) {
	pool, schema := pgtest.NewPool(t)
	ctx := context.Background()
	var available bool
	if err := pool.QueryRow(ctx, `SELECT pg_jit_available()`).Scan(&available); err != nil {
		t.Fatal(err)
	}
	if !available {
		t.Skip("this PostgreSQL has no JIT")
	}
	ob, err := New(pool, &Options{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	if err := ob.CreateSchema(ctx); err != nil {
		t.Fatal(err)
	}
	r, err := NewRelay(ob, func(string) (sbkit.MessageSender, error) { return nopSender{}, nil }, nil)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	for _, set := range []string{`SET jit = on`, `SET jit_above_cost = 0`, `SET jit_inline_above_cost = 0`, `SET jit_optimize_above_cost = 0`} {
		if _, err := conn.Exec(ctx, set); err != nil {
			t.Fatal(err)
		}
	}
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, r.beginSQL); err != nil {
		t.Fatal(err)
	}
	var plan []map[string]any
	err = tx.QueryRow(ctx, `EXPLAIN (ANALYZE, FORMAT JSON) `+r.claimSQL,
		500, []int64{}, []string{}, []string{}, int64(0), int64(1<<26)).Scan(&plan)
	if err != nil {
		t.Fatal(err)
	}
	if len(plan) != 1 {
		t.Fatalf("plan %v", plan)
	}
	if jit, ok := plan[0]["JIT"]; ok {
		out, _ := json.Marshal(jit)
		t.Fatalf("the claim statement was JIT-compiled: %s", out)
	}
}
