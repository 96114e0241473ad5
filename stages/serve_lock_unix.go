//go:build unix

package stages

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// lockSocket takes an exclusive flock on a lock file beside the unix
// socket at addr (".NAME.lock"), which the sink holds while it serves:
// with it, whatever socket is at addr is a dead run's, and can be
// replaced. Checking that a socket is dead and then replacing it let two
// runs each remove the other's live socket. The kernel drops
// the lock when the process dies; the file stays, as a cache's lock file
// does, since removing it would let two processes lock two files of one
// name.
func lockSocket(addr string) (*os.File, error) {
	path := filepath.Join(filepath.Dir(addr), "."+filepath.Base(addr)+".lock")
	for attempt := 0; ; attempt++ {
		f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
		if err != nil {
			return nil, err
		}
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
			f.Close()
			if errors.Is(err, syscall.EWOULDBLOCK) {
				return nil, fmt.Errorf("another process serves at %s", addr)
			}
			return nil, fmt.Errorf("lock %s: %w", path, err)
		}
		// Removed and made again by hand between the open and the lock:
		// the lock is on a file no other process will open.
		a, aerr := f.Stat()
		b, berr := os.Stat(path)
		if aerr == nil && berr == nil && os.SameFile(a, b) {
			return f, nil
		}
		f.Close()
		if attempt == 3 {
			return nil, fmt.Errorf("lock %s: it keeps being replaced", path)
		}
	}
}
