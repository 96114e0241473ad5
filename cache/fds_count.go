//go:build linux || darwin

package cache

import (
	"fmt"
	"os"
	"syscall"
)

// fdSpare is how many descriptors beyond one per file of the store an
// open of it may take: the directory (synced on open), the lock, a new
// memtable and value log, and Badger's own.
const fdSpare = 8

// checkDescriptors refuses, with the system's "too many open files", to
// open the Badger store at path when fewer descriptors are free under the
// process's limit than the store has files, plus fdSpare. Badger holds a
// descriptor for every table and value log, and at two points of its open
// (reading the store's directory, creating its DISCARD file) running out
// ends the process with log.Fatal, which nothing can catch. The count is
// of this moment: another goroutine opening files meanwhile can still run
// the process out. (Where /dev/fd lists every open descriptor: Linux's
// does, and macOS's; FreeBSD's without fdescfs lists only 0 to 2.)
func checkDescriptors(path string) error {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil || lim.Cur == ^uint64(0) {
		return nil
	}
	files, err := os.ReadDir(path)
	if err != nil {
		return nil // a store not made yet; Badger says what else is wrong
	}
	open, err := os.ReadDir("/dev/fd")
	if err != nil {
		return nil
	}
	need := uint64(len(files) + fdSpare)
	inUse := uint64(len(open) - 1) // less the one that read /dev/fd
	if inUse+need <= lim.Cur {
		return nil
	}
	return fmt.Errorf("opening its Badger store takes about %d file descriptors (%d files and %d more), and %d of this process's %d are in use; "+
		"raise the limit (Go already raised the soft limit to the hard one, so the hard one: ulimit -Hn, limits.conf, docker run --ulimit nofile=N): %w",
		need, len(files), fdSpare, inUse, lim.Cur, syscall.EMFILE)
}
