package workpool

import (
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// Jobs that block on a round trip run at once up to the bound, the rest wait their turn,
// every job runs exactly once, and the pool's goroutines end after Close.
func TestBoundAndQueue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var running, most atomic.Int64
		var wg sync.WaitGroup
		ran := make([]atomic.Int32, 100)
		p := New(8, func(i int) {
			defer wg.Done()
			n := running.Add(1)
			for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
			}
			time.Sleep(10 * time.Millisecond)
			running.Add(-1)
			ran[i].Add(1)
		})
		begin := time.Now()
		wg.Add(100)
		for i := range 100 {
			p.Submit(i)
		}
		wg.Wait()
		if took := time.Since(begin); took != 13*10*time.Millisecond {
			t.Errorf("100 jobs of 10 ms on 8 goroutines took %v, want 130 ms", took)
		}
		if most.Load() != 8 || p.Peak() != 8 {
			t.Errorf("at most %d jobs ran at once on %d goroutines, want 8", most.Load(), p.Peak())
		}
		for i := range ran {
			if n := ran[i].Load(); n != 1 {
				t.Errorf("job %d ran %d times", i, n)
			}
		}
		p.Close()
		p.Wait()
	})
}

// Below the bound every job starts at once: 50 round trips of 100 ms take 100 ms.
func TestFollowsLoad(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var wg sync.WaitGroup
		p := New(1000, func(int) { time.Sleep(100 * time.Millisecond); wg.Done() })
		begin := time.Now()
		wg.Add(50)
		for i := range 50 {
			p.Submit(i)
		}
		wg.Wait()
		if took := time.Since(begin); took != 100*time.Millisecond {
			t.Errorf("50 jobs took %v, want 100 ms", took)
		}
		if p.Peak() != 50 {
			t.Errorf("%d goroutines, want 50", p.Peak())
		}
		p.Close()
		p.Wait()
	})
}

// Idle goroutines are reused while jobs keep coming, and end after lingering Linger
// without one; Close ends the idle ones at once and lets queued jobs finish.
func TestLingerAndClose(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		before := runtime.NumGoroutine()
		var done atomic.Int64
		p := New(4, func(int) { time.Sleep(time.Millisecond); done.Add(1) })
		for i := range 200 { // one job every 2 ms: one goroutine serves them all
			p.Submit(i)
			time.Sleep(2 * time.Millisecond)
		}
		if p.Peak() != 1 {
			t.Errorf("a job every 2 ms of 1 ms each ran on %d goroutines, want 1", p.Peak())
		}
		time.Sleep(Linger + time.Millisecond)
		synctest.Wait()
		if n := runtime.NumGoroutine(); n != before {
			t.Errorf("%d goroutines after lingering, want %d", n, before)
		}
		for i := range 4 {
			p.Submit(i)
		}
		time.Sleep(time.Millisecond)
		synctest.Wait()
		for i := range 8 { // 4 to the idle goroutines, 4 queued
			p.Submit(i)
		}
		p.Close()
		p.Wait()
		if done.Load() != 212 {
			t.Errorf("%d jobs ran, want 212", done.Load())
		}
		if n := runtime.NumGoroutine(); n != before {
			t.Errorf("%d goroutines after Close, want %d", n, before)
		}
	})
}
