package pgoutbox

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"
	"weak"
)

// TestFinishedClaimsAreFreed: a claim is garbage once its transaction ended and its rows
// were settled, even while the orders it made live on in later claims (a session's rows
// spread over several claims, as under steady ordered traffic). Each claim here joins
// the row of an order the previous claim made and a row of a new order; before, every
// order kept the claim that made it, that claim its rows, their orders the claims before:
// 0 of 1,999 finished claims were collected, with their messages.
func TestFinishedClaimsAreFreed(t *testing.T) {
	u := &run{r: &Relay{}, orders: map[string]*order{}, contended: map[string]time.Time{}}
	u.r.o.ClaimBatch = 100
	const n = 2000
	finished := make([]weak.Pointer[claim], 0, n)
	var prev *claim
	id := int64(0)
	for i := range n {
		c := &claim{orderCtx: map[*order]context.Context{}}
		c.ctx, c.cancel = context.WithCancel(context.Background())
		for _, k := range []int{i - 1, i} {
			id++
			c.rows = append(c.rows, &row{id: id, destination: "q", orderKey: fmt.Sprintf("s:%d", k), claim: c})
		}
		u.join(c, c.rows)
		if prev != nil {
			u.settle(prev)
			prev.cancel()
			finished = append(finished, weak.Make(prev))
		}
		prev = c
	}
	runtime.GC()
	runtime.GC()
	kept := 0
	for _, p := range finished {
		if p.Value() != nil {
			kept++
		}
	}
	if kept > 0 {
		t.Fatalf("%d of %d finished claims are still reachable (with their rows and messages)", kept, len(finished))
	}
	runtime.KeepAlive(prev)
}
