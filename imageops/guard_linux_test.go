package imageops

import (
	"syscall"
	"testing"
)

// endGuarded returns n bytes whose end abuts a page mapped PROT_NONE, so a
// read or write past them faults instead of landing in the slack an
// allocator leaves after a buffer.
func endGuarded(t *testing.T, n int) []byte {
	t.Helper()
	ps := syscall.Getpagesize()
	pages := (n+ps-1)/ps + 1
	m, err := syscall.Mmap(-1, 0, pages*ps, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Munmap(m) })
	end := (pages - 1) * ps
	if err := syscall.Mprotect(m[end:], syscall.PROT_NONE); err != nil {
		t.Fatal(err)
	}
	return m[end-n : end : end]
}
