package leaktest

import (
	"testing"
	"time"
)

// fakeTB records errors and cleanups instead of acting on the real test.
type fakeTB struct {
	testing.TB
	cleanups []func()
	failed   bool
}

func (f *fakeTB) Helper()               {}
func (f *fakeTB) Cleanup(fn func())     { f.cleanups = append(f.cleanups, fn) }
func (f *fakeTB) Errorf(string, ...any) { f.failed = true }

func (f *fakeTB) finish() {
	for _, fn := range f.cleanups {
		fn()
	}
}

func TestCheck(t *testing.T) {
	defer func(p time.Duration) { patience = p }(patience)
	patience = 100 * time.Millisecond

	ended := &fakeTB{TB: t}
	Check(ended)
	done := make(chan struct{})
	go func() { <-done }()
	close(done)
	ended.finish()
	if ended.failed {
		t.Error("a goroutine that ended was reported as leaked")
	}

	leaked := &fakeTB{TB: t}
	Check(leaked)
	stop := make(chan struct{})
	go func() { <-stop }()
	leaked.finish()
	close(stop)
	if !leaked.failed {
		t.Error("a goroutine still running was not reported")
	}
}
