//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package sbtest

import "net"

// bytesWaiting reports whether nc has received bytes nobody has read yet; where the
// platform offers no cheap way to ask (wire_pending_unix.go), it reports false, and a
// connection counts as started once its goroutine read its first byte.
func bytesWaiting(net.Conn) bool { return false }
