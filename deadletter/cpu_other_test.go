//go:build !unix

package deadletter_test

import "time"

// cpuTime is the CPU time the process used so far; ok is false where it cannot be read.
func cpuTime() (time.Duration, bool) { return 0, false }
