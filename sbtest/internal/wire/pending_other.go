//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package wire

import "net"

// bytesWaiting reports whether nc has received bytes nobody has read yet; where the
// platform offers no cheap way to ask (pending_unix.go), it reports false, and a
// connection counts as started once its goroutine read its first byte.
func bytesWaiting(net.Conn) bool { return false }
