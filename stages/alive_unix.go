//go:build unix

package stages

import (
	"errors"
	"syscall"
)

// processAlive reports whether a process with this ID exists (one of
// another user's counts: EPERM).
func processAlive(pid int) bool {
	return !errors.Is(syscall.Kill(pid, 0), syscall.ESRCH)
}
