// Package leaktest checks, at the end of a test, that the goroutines the test started
// have ended: the example programs must stop everything they start.
package leaktest

import (
	"runtime"
	"testing"
	"time"
)

// Check records the number of goroutines now and registers a cleanup that fails t when,
// after t and its subtests finished, more remain for 5 seconds. Call it first in a test
// that is not parallel with others.
func Check(t testing.TB) {
	t.Helper()
	before := runtime.NumGoroutine()
	t.Cleanup(func() {
		deadline := time.Now().Add(patience)
		for {
			now := runtime.NumGoroutine()
			if now <= before {
				return
			}
			if time.Now().After(deadline) {
				buf := make([]byte, 1<<20)
				t.Errorf("%d goroutines still running after the test (%d before):\n%s",
					now, before, buf[:runtime.Stack(buf, true)])
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
	})
}

// patience is how long Check waits for goroutines to end.
var patience = 5 * time.Second
