//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package wire

import (
	"net"
	"syscall"
)

// bytesWaiting reports whether nc, a TCP connection, has received bytes that nobody has
// read yet: a receive with MSG_PEEK on its (non-blocking) socket, which takes nothing
// and does not wait (recv(2)). Control leaves the socket's read lock to the goroutine
// reading it.
func bytesWaiting(nc net.Conn) bool {
	sc, ok := nc.(syscall.Conn)
	if !ok {
		return false
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	waiting := false
	_ = rc.Control(func(fd uintptr) {
		var b [1]byte
		n, _, err := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK)
		waiting = err == nil && n > 0
	})
	return waiting
}
