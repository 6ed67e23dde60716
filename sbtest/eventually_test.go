package sbtest_test

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sbkit/sbkit/sbtest"
)

// fatalTB records a Fatalf and ends its goroutine, as testing.T does, without failing
// the test, so that Eventually's failure can be checked.
type fatalTB struct {
	testing.TB
	msg string
}

func (f *fatalTB) Helper() {}

func (f *fatalTB) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

// TestEventually: Eventually returns once its condition holds, checking it every
// EventuallyPoll, and fails the test, naming what it waited for, when the timeout
// passes first.
func TestEventually(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		calls := 0
		sbtest.Eventually(t, time.Minute, "the third check", func() bool { calls++; return calls == 3 })
		if calls != 3 || time.Since(start) != 2*sbtest.EventuallyPoll {
			t.Errorf("returned after %d checks and %v, want 3 checks and %v", calls, time.Since(start), 2*sbtest.EventuallyPoll)
		}

		f := &fatalTB{TB: t}
		start = time.Now()
		done := make(chan struct{})
		go func() {
			defer close(done)
			sbtest.Eventually(f, time.Second, "nothing", func() bool { return false })
		}()
		<-done
		if !strings.Contains(f.msg, "waiting for nothing") || time.Since(start) < time.Second {
			t.Errorf("after %v: Fatalf %q, want a failure naming what after 1s", time.Since(start), f.msg)
		}
	})
}
