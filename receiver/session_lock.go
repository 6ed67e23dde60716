package receiver

import (
	"context"
	"sync"

	"github.com/sbkit/sbkit"
	"github.com/sbkit/sbkit/locks"
)

// sessionLock keeps one session's lock renewed by the lock engine. Tracking restarts at
// every message received, so that MaxAutoLockRenewalDuration bounds the time spent on one
// message, as it does for message locks, and not the life of a busy session. lost is
// called (on the engine's behalf, at most once per tracking) when the lock is lost.
type sessionLock struct {
	e    *locks.Engine
	ctx  context.Context
	sr   sbkit.SessionReceiver
	lost func(cause error)

	mu      sync.Mutex
	cur     *locks.Lock
	stopped bool
	watch   sync.WaitGroup
}

// track starts (or restarts) tracking the lock; it returns the engine's error.
func (l *sessionLock) track() error {
	l.mu.Lock()
	if l.stopped {
		l.mu.Unlock()
		return nil
	}
	lk, err := l.e.AddSession(l.ctx, l.sr)
	old := l.cur
	if err == nil {
		l.cur = lk
		l.watch.Add(1)
		go func() {
			defer l.watch.Done()
			<-lk.Done()
			if err := lk.Err(); err != nil {
				l.lost(err)
			}
		}()
	}
	l.mu.Unlock()
	if old != nil && err == nil {
		_ = old.Release() // a loss found meanwhile is reported by its watcher
	}
	return err
}

// stop ends the tracking and waits for the watchers.
func (l *sessionLock) stop() {
	l.mu.Lock()
	l.stopped = true
	cur := l.cur
	l.mu.Unlock()
	if cur != nil {
		_ = cur.Release()
	}
	l.watch.Wait()
}
