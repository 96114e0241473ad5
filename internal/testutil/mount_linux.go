package testutil

import (
	"syscall"
	"testing"
)

// Tmpfs mounts a small tmpfs on a new temporary directory and returns it,
// unmounted when the test ends; it skips the test where it may not mount
// (not root, or no CAP_SYS_ADMIN, as in many containers). ReadOnly then
// makes it a read-only medium, as a cache mounted for every rank is.
func Tmpfs(t *testing.T) (dir string, readOnly func()) {
	t.Helper()
	dir = t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size=64m"); err != nil {
		t.Skipf("cannot mount a tmpfs here (%v): needs root with CAP_SYS_ADMIN", err)
	}
	// Registered after TempDir's removal, so it runs before it.
	t.Cleanup(func() { syscall.Unmount(dir, 0) })
	return dir, func() {
		t.Helper()
		if err := syscall.Mount("", dir, "", syscall.MS_REMOUNT|syscall.MS_RDONLY, ""); err != nil {
			t.Skipf("cannot remount read-only: %v", err)
		}
	}
}
