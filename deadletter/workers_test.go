package deadletter

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

func TestWorkersBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const max, n = 4, 50
		var running, peak, done atomic.Int32
		release := make(chan struct{})
		w := newWorkers(t.Context(), time.Second, max, n, func(dl *deadline, v int) {
			now := running.Add(1)
			for p := peak.Load(); now > p && !peak.CompareAndSwap(p, now); p = peak.Load() {
			}
			<-release
			running.Add(-1)
			done.Add(1)
		})
		for i := range n {
			w.put(i)
		}
		synctest.Wait()
		if got := running.Load(); got != max {
			t.Errorf("%d values run at once with %d waiting, want %d (the maximum)", got, n-max, max)
		}
		close(release)
		w.close()
		synctest.Wait() // every goroutine ended: the bubble would not end otherwise
		if done.Load() != n || peak.Load() != max {
			t.Errorf("done %d of %d, peak %d, want all and %d", done.Load(), n, peak.Load(), max)
		}
	})
}

func TestWorkersStartWhenNoneIsFree(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var started atomic.Int32
		var mu sync.Mutex
		goroutines := map[*deadline]bool{}
		w := newWorkers(t.Context(), time.Second, 100, 100, func(dl *deadline, v int) {
			mu.Lock()
			if !goroutines[dl] {
				goroutines[dl] = true
				started.Add(1)
			}
			mu.Unlock()
		})
		// One value at a time, each done before the next: one goroutine does them all.
		for i := range 10 {
			w.put(i)
			synctest.Wait()
		}
		w.close()
		synctest.Wait()
		if started.Load() != 1 {
			t.Errorf("%d goroutines for values put one after another, want 1", started.Load())
		}
	})
}

func TestDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		dl := &deadline{parent: t.Context(), d: time.Second}
		defer dl.close()

		// Quick calls share one context.
		ctx := dl.begin()
		if err := dl.end(nil); err != nil {
			t.Fatal(err)
		}
		time.Sleep(900 * time.Millisecond)
		if again := dl.begin(); again != ctx {
			t.Error("a call after a quick one got a new context")
		}
		time.Sleep(900 * time.Millisecond) // 1.8s since the first call began: its timer must not count
		if ctx.Err() != nil {
			t.Fatalf("the context ended 900ms into a call of 1s: %v", ctx.Err())
		}
		_ = dl.end(nil)

		// A call that takes longer ends by the deadline, with an error that says so.
		ctx = dl.begin()
		<-ctx.Done()
		err := dl.end(ctx.Err())
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("a call past its deadline returned %v, want an error wrapping context.DeadlineExceeded", err)
		}
		if next := dl.begin(); next == ctx || next.Err() != nil {
			t.Fatal("the call after a timeout did not get a new, live context")
		}
		_ = dl.end(nil)

		// The parent ending ends the call's context, with the parent's error.
		parent, cancel := context.WithCancel(t.Context())
		dl2 := &deadline{parent: parent, d: time.Second}
		defer dl2.close()
		ctx = dl2.begin()
		cancel()
		if err := dl2.end(ctx.Err()); !errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("a call whose parent ended returned %v, want context.Canceled", err)
		}
	})
}
