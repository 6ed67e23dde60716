package scenario_test

import (
	"os"
	"runtime"
	"testing"
	"time"

	"github.com/sbkit/sbkit/internal/scenario"
)

// TestScenarios runs the whole suite against every backend: memory always, live only
// when SBKIT_CONNECTION_STRING is set. After each backend no goroutine may remain.
func TestScenarios(t *testing.T) {
	baseline := runtime.NumGoroutine()
	t.Run("memory", func(t *testing.T) {
		scenario.Run(t, scenario.NewMemory())
	})
	checkGoroutines(t, baseline, "memory")
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
// a backend's scenarios and cleanups finished.
func checkGoroutines(t *testing.T, baseline int, after string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > baseline {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			t.Fatalf("%d goroutines remain after %s (%d before):\n%s", runtime.NumGoroutine(), after, baseline, buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(10 * time.Millisecond)
	}
}
