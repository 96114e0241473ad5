package stages

import (
	"os"
	"path/filepath"
	"runtime"
	"syscall"
	"testing"
)

// asUser runs fn on a thread of its own whose user and group are id, and
// reports whether it could: root reads a file of mode 000, so a test of
// what a process cannot read runs its checks so when the suite runs as
// root (as CI does). Only that thread changes (the raw system calls act on
// the calling thread, where syscall.Setresuid would change every thread),
// and it ends with fn: a goroutine that exits locked to its thread takes
// the thread with it. fn should report with t.Error: a t.Fatal ends only
// fn's goroutine (the test goes on, failed).
func asUser(t *testing.T, id int, fn func()) bool {
	t.Helper()
	ok := make(chan bool)
	go func() {
		became := false
		defer func() { ok <- became }() // also when fn calls runtime.Goexit
		runtime.LockOSThread()          // never unlocked, so the thread ends here
		for _, call := range []uintptr{syscall.SYS_SETGROUPS, syscall.SYS_SETRESGID, syscall.SYS_SETRESUID} {
			var errno syscall.Errno
			if call == syscall.SYS_SETGROUPS {
				_, _, errno = syscall.RawSyscall(call, 0, 0, 0)
			} else {
				_, _, errno = syscall.RawSyscall(call, uintptr(id), uintptr(id), uintptr(id))
			}
			if errno != 0 {
				t.Logf("cannot become user %d: %v", id, errno)
				return
			}
		}
		became = true
		fn()
	}()
	return <-ok
}

// openTempDir is a new folder that another user (asUser) can reach, for
// tests that need root to make files of another user: t.TempDir and its
// parent are 0700. It skips the test where this process is not root.
func openTempDir(t *testing.T) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root, to make files of another user")
	}
	top := t.TempDir()
	for _, d := range []string{filepath.Dir(top), top} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return top
}
