//go:build !unix

package stages

import (
	"errors"
	"net"
	"os"
	"time"
)

// readNow reads what c has received, waiting at most a millisecond: n 0
// and a nil error when nothing has come. Without Unix's non-blocking
// read of the socket's descriptor (syscall.Read takes a Handle on
// Windows) it reads under a deadline, and clears the deadline after.
func readNow(c net.Conn, buf []byte) (n int, err error) {
	c.SetReadDeadline(time.Now().Add(time.Millisecond))
	n, err = c.Read(buf)
	c.SetReadDeadline(time.Time{})
	if n == 0 && errors.Is(err, os.ErrDeadlineExceeded) {
		return 0, nil
	}
	return n, err
}
