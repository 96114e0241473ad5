//go:build unix

package stages

import (
	"io"
	"net"
	"syscall"
	"time"
)

// readNow reads what c has received without waiting: n 0 and a nil error
// when nothing has come. It clears c's read deadline first: one that has
// passed would fail the read before it tried.
func readNow(c net.Conn, buf []byte) (n int, err error) {
	c.SetReadDeadline(time.Time{})
	sc, ok := c.(syscall.Conn)
	if !ok {
		return 0, nil
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return 0, err
	}
	var rerr error
	err = rc.Read(func(fd uintptr) bool {
		n, rerr = syscall.Read(int(fd), buf)
		return true // one try: the socket is non-blocking
	})
	switch {
	case err != nil:
		return 0, err
	case rerr == syscall.EAGAIN || rerr == syscall.EINTR:
		return 0, nil
	case rerr != nil:
		return 0, rerr
	case n == 0:
		return 0, io.EOF
	}
	return n, nil
}
