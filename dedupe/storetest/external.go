package storetest

import (
	"os"
	"sync"
	"testing"
)

// External is a server outside the test process that a store's tests need, such as
// Redis or PostgreSQL. Declare one per test binary as a package variable; Require is
// safe for concurrent use.
type External struct {
	// What names the server and where the tests look for it, for the skip message:
	// "Redis at 127.0.0.1:6379 (env SBKIT_REDIS_ADDR)".
	What string
	// Hint, when not empty, follows the skip message: how to start such a server.
	Hint string
	// Ping returns nil when the server answers; it must time out by itself. Require
	// calls it once per process.
	Ping func() error

	once sync.Once
	err  error
}

// Require returns when the server answered Ping. Otherwise it skips t with a message
// saying what is missing, or fails t when env CI=true: CI must not skip silently.
func (e *External) Require(t testing.TB) {
	t.Helper()
	e.once.Do(func() { e.err = e.Ping() })
	if e.err == nil {
		return
	}
	msg := e.What + " unreachable: " + e.err.Error()
	if e.Hint != "" {
		msg += "; " + e.Hint
	}
	if os.Getenv("CI") == "true" {
		t.Fatal(msg)
	}
	t.Skip(msg)
}
