package pgoutbox

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
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
	_, r := planRelay(t, pool, schema)
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

// TestClaimBlockedOrdersNotJoined: a claim whose rows' orders are all blocked (another
// transaction holds the row before each: 500 sessions whose first rows another relay
// holds) decides which rows are blocked without joining its rows with its blocked
// orders row by row. PostgreSQL's generic plan for the claim (the one a prepared
// statement gets after five executions) joined them by nested loop: 500 x 500 rows
// compared, 27 ms instead of 4. The plan here must filter no row in a join.
func TestClaimBlockedOrdersNotJoined(t *testing.T) {
	pool, schema := pgtest.NewPool(t)
	ctx := context.Background()
	ob, r := planRelay(t, pool, schema)
	if _, err := pool.Exec(ctx, `INSERT INTO `+ob.table+` (destination, order_key, message_id, body)
SELECT 'q', 's:' || (g % 500), 'm' || g, '\x00' FROM generate_series(0, 999) g`); err != nil {
		t.Fatal(err)
	}
	holder, err := pool.Begin(ctx) // another relay's claim of each session's first row
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Rollback(ctx)
	if _, err := holder.Exec(ctx, `SELECT id FROM `+ob.table+` ORDER BY id LIMIT 500 FOR UPDATE`); err != nil {
		t.Fatal(err)
	}
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	for _, q := range []string{r.beginSQL, `SET LOCAL plan_cache_mode = force_generic_plan`,
		`PREPARE claim_plan(int, bigint[], text[], text[], bigint, bigint) AS ` + r.claimSQL} {
		if _, err := tx.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	defer tx.Exec(ctx, `DEALLOCATE claim_plan`)
	var plan []map[string]any
	err = tx.QueryRow(ctx, `EXPLAIN (ANALYZE, FORMAT JSON) EXECUTE claim_plan(500, '{}', '{}', '{}', 0, 67108864)`).Scan(&plan)
	if err != nil {
		t.Fatal(err)
	}
	var removed float64
	var blocked bool
	var walk func(n map[string]any)
	walk = func(n map[string]any) {
		if v, ok := n["Rows Removed by Join Filter"].(float64); ok {
			removed += v
		}
		if n["Node Type"] == "CTE Scan" && n["CTE Name"] == "b" && n["Actual Rows"].(float64) == 500 {
			blocked = true
		}
		for _, c := range asNodes(n["Plans"]) {
			walk(c)
		}
	}
	walk(plan[0]["Plan"].(map[string]any))
	if !blocked {
		t.Fatalf("the claim did not find 500 blocked orders; plan %v", plan)
	}
	if removed > 0 {
		t.Fatalf("the claim's generic plan filtered %v rows in joins, want none", removed)
	}
}

// asNodes returns the child plans of an EXPLAIN (FORMAT JSON) node.
func asNodes(v any) []map[string]any {
	list, _ := v.([]any)
	out := make([]map[string]any, 0, len(list))
	for _, x := range list {
		if m, ok := x.(map[string]any); ok {
			out = append(out, m)
		}
	}
	return out
}

// planRelay makes an outbox in schema and a relay over it whose statements the plan
// tests run by hand; the relay never runs and sends nowhere.
func planRelay(t *testing.T, pool *pgxpool.Pool, schema string) (*Outbox, *Relay) {
	t.Helper()
	ob, err := New(pool, &Options{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	if err := ob.CreateSchema(context.Background()); err != nil {
		t.Fatal(err)
	}
	r, err := NewRelay(ob, func(string) (sbkit.MessageSender, error) { return nopSender{}, nil }, nil)
	if err != nil {
		t.Fatal(err)
	}
	return ob, r
}
