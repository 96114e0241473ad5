//go:build unix

package stages

import (
	"errors"
	"os"
	"syscall"
)

// lockTemp holds a flock on the temporary file at path, through a
// descriptor of its own (the writer's is closed before the rename), for
// as long as the writer has the file: other runs tell a live writer's
// temporary from a dead one's by it. A process ID in the name could not:
// reused by an unrelated process (pid 1 in a container), it kept a dead
// run's file alive and refused every later run. nil where the
// file system takes no flock.
func lockTemp(path string) *os.File {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	if syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) != nil {
		f.Close()
		return nil
	}
	return f
}

// tempHeld reports whether a live writer holds the temporary file at path
// (lockTemp); pid, the ID in its name, decides where the file system
// takes no flock.
func tempHeld(path string, pid int) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	switch err := syscall.Flock(int(f.Fd()), syscall.LOCK_SH|syscall.LOCK_NB); {
	case errors.Is(err, syscall.EWOULDBLOCK):
		return true
	case err != nil:
		return processAlive(pid)
	}
	return false
}
