package scenario_test

import (
	"os"
	"runtime"
	"testing"
	"time"

	"github.com/sbkit/sbkit/internal/testing/scenario"
)

// TestScenarios runs the whole suite against every backend: memory and server always
// (at the same time), live only when SBKIT_CONNECTION_STRING is set. Once every backend
// is done and closed, no goroutine may remain.
func TestScenarios(t *testing.T) {
	baseline := runtime.NumGoroutine()
	t.Cleanup(func() { checkGoroutines(t, baseline) })
	t.Run("memory", func(t *testing.T) {
		t.Parallel()
		scenario.Run(t, scenario.NewMemory())
	})
	t.Run("server", func(t *testing.T) {
		t.Parallel()
		scenario.Run(t, scenario.NewServer(t))
	})
	t.Run("live", func(t *testing.T) {
		b, err := scenario.NewLive(t, os.Getenv)
		if err != nil {
			t.Fatal(err)
		}
		if b == nil {
			t.Skipf("%s is not set: no real namespace to run against (set it, and %s for a queue other than %q)",
				scenario.ConnectionStringEnv, scenario.QueueEnv, scenario.DefaultQueue)
		}
		scenario.Run(t, b)
	})
}

// checkGoroutines fails t when more than baseline goroutines remain a few seconds after
// the backends' scenarios and cleanups finished.
func checkGoroutines(t *testing.T, baseline int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > baseline {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			t.Fatalf("%d goroutines remain after the scenarios (%d before):\n%s", runtime.NumGoroutine(), baseline, buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(10 * time.Millisecond)
	}
}
