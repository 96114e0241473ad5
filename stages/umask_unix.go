//go:build unix

package stages

import "syscall"

// umask is the process's file-mode creation mask, read once: outputs are
// written aside (CreateTemp makes them 0600) and take the mode a shell's
// > would give them.
var umask = func() uint32 {
	m := syscall.Umask(0)
	syscall.Umask(m)
	return uint32(m)
}()
