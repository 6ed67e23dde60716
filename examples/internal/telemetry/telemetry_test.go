package telemetry

import (
	"context"
	"errors"
	"io"
	"runtime"
	"strings"
	"testing"
	"time"
)

// TestSecondCloseKeepsItsDeadline: while a first Close holds the endpoint up for
// -metrics-hold (an hour here, its context without deadline), a second Close returns
// by its own deadline instead of waiting for the first.
func TestSecondCloseKeepsItsDeadline(t *testing.T) {
	s, err := Start(Flags{MetricsAddr: "127.0.0.1:0", Hold: time.Hour}, "test", io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	firstCtx, stopFirst := context.WithCancel(context.Background())
	first := make(chan error, 1)
	go func() { first <- s.Close(firstCtx) }()
	// The first Close is holding the endpoint (its goroutine waits in Close).
	for !inClose() {
		runtime.Gosched()
	}
	defer func() {
		stopFirst() // ends the first Close's hold
		<-first
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	second := make(chan error, 1)
	go func() { second <- s.Close(ctx) }()
	watchdog := time.NewTimer(5 * time.Second)
	defer watchdog.Stop()
	select {
	case err := <-second:
		if err != nil && !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("second Close = %v", err)
		}
	case <-watchdog.C:
		t.Fatal("the second Close(100ms) has not returned after 5 s: it waits for the first")
	}
}

// inClose reports whether a goroutine waits inside Setup.Close.
func inClose() bool {
	buf := make([]byte, 1<<20)
	for _, g := range strings.Split(string(buf[:runtime.Stack(buf, true)]), "\n\n") {
		if strings.Contains(g, "[select") && strings.Contains(g, "telemetry.(*Setup).Close") {
			return true
		}
	}
	return false
}
