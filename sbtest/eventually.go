package sbtest

import (
	"testing"
	"time"
)

// EventuallyPoll is how often [Eventually] checks its condition.
const EventuallyPoll = 5 * time.Millisecond

// Eventually checks cond every [EventuallyPoll] until it holds, and fails tb (Fatalf,
// naming what) when timeout passes first. It is for what nothing waits on: a hook's
// counter, a processor's Stats, a relay's outcome. The broker's counts have waits of
// their own that poll nothing ([Entity.WaitUntil], [Entity.WaitDrained]). Call it from
// the test's goroutine, as Fatalf requires; inside a testing/synctest bubble its
// timeout and polls are the bubble's time.
func Eventually(tb testing.TB, timeout time.Duration, what string, cond func() bool) {
	tb.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			tb.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(EventuallyPoll)
	}
}
