package deadletter

import (
	"runtime"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// TestWorkersNeverWaitBehindABusyOne: a value put while every started goroutine is busy
// (or has just taken a value and is about to be) starts another goroutine, below the
// maximum: it must not wait behind a settlement that may take SettleTimeout, while the
// lock of its message runs out. Before, a goroutine that had taken a value but not yet
// counted itself busy still counted as idle, and the second value waited.
func TestWorkersNeverWaitBehindABusyOne(t *testing.T) {
	for range 2000 {
		synctest.Test(t, func(t *testing.T) {
			var running atomic.Int32
			release := make(chan struct{})
			w := newWorkers(t.Context(), time.Second, 2, 2, func(dl *deadline, v int) {
				running.Add(1)
				<-release
			})
			w.put(1)
			for range 3 {
				runtime.Gosched()
			}
			w.put(2)
			synctest.Wait()
			got := running.Load()
			close(release)
			w.close()
			if got != 2 {
				t.Fatalf("%d of 2 values running with 2 goroutines allowed: a value waited behind a busy goroutine", got)
			}
		})
		if t.Failed() {
			return
		}
	}
}
