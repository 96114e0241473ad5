//go:build unix

package cache

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// dirLock is a flock on DIR/<fp>/lock held for as long as a process uses
// the cache: exclusive for a process that writes it, shared among
// processes that only read a complete cache. The kernel drops it when the
// process dies, so a crashed run never leaves a stale lock behind.
type dirLock struct{ f *os.File }

// errLocked is returned by lockDir when another process holds the lock; pid
// is 0 when the lock file does not say, and readers is set when only
// processes reading a complete cache hold it.
type errLocked struct {
	pid     int
	readers bool
}

func (e errLocked) Error() string { return "locked" }

// lockDir takes the exclusive lock of the cache directory dir and records
// our pid in it. A directory removed by Prune between our open and our
// flock is detected by comparing inodes and retried, so two processes never
// both believe they own one directory.
func lockDir(dir string) (*dirLock, error) { return lockDirMode(dir, false) }

// lockDirShared takes dir's lock shared, as readers of a complete cache do.
// The lock file keeps the pid of the last writer.
func lockDirShared(dir string) (*dirLock, error) { return lockDirMode(dir, true) }

func lockDirMode(dir string, shared bool) (*dirLock, error) {
	how := syscall.LOCK_EX
	if shared {
		how = syscall.LOCK_SH
	}
	path := dir + string(os.PathSeparator) + lockName
	for attempt := 0; ; attempt++ {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, err
		}
		f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
		if err != nil && shared && readOnlyMedium(err) {
			// A reader of a complete cache on a read-only medium: a
			// shared flock needs no write access.
			f, err = os.Open(path)
		}
		if errors.Is(err, os.ErrNotExist) && attempt < 3 {
			continue // a pruner renamed the folder aside since MkdirAll
		}
		if err != nil {
			return nil, err
		}
		if err := syscall.Flock(int(f.Fd()), how|syscall.LOCK_NB); err != nil {
			if same, serr := sameFile(f, path); serr == nil && !same && attempt < 3 {
				// A pruner holds the folder it has just renamed aside
				// (remove): the cache is gone, and a fresh one can start.
				f.Close()
				continue
			}
			defer f.Close()
			if !errors.Is(err, syscall.EWOULDBLOCK) {
				return nil, fmt.Errorf("lock %s: %w", path, err)
			}
			// Readers record no pid, and the file names the last writer,
			// who may still live: if a shared lock can be had, only
			// readers hold the cache.
			if !shared && syscall.Flock(int(f.Fd()), syscall.LOCK_SH|syscall.LOCK_NB) == nil {
				return nil, errLocked{readers: true}
			}
			return nil, errLocked{pid: readPid(f)}
		}
		same, err := sameFile(f, path)
		if err != nil || !same {
			f.Close()
			if attempt < 3 {
				continue
			}
			if err == nil {
				err = errors.New("lock file keeps being replaced")
			}
			return nil, fmt.Errorf("lock %s: %w", path, err)
		}
		if shared {
			return &dirLock{f}, nil
		}
		// The pid is for the error message of the next process only;
		// failing to write it does not weaken the lock.
		if err := f.Truncate(0); err == nil {
			f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
		}
		return &dirLock{f}, nil
	}
}

func sameFile(f *os.File, path string) (bool, error) {
	a, err := f.Stat()
	if err != nil {
		return false, err
	}
	b, err := os.Stat(path)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return os.SameFile(a, b), nil
}

func readPid(f *os.File) int {
	buf := make([]byte, 32)
	n, _ := f.ReadAt(buf, 0)
	pid, err := strconv.Atoi(strings.TrimSpace(string(buf[:n])))
	if err != nil || pid <= 0 {
		return 0
	}
	// The file names the last writer, who may be gone (the lock is then
	// held by readers, or by a process that has not written its pid yet).
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return 0
	}
	return pid
}

// share turns an exclusive lock into a shared one. The kernel drops the
// lock for a moment in between: a pruner slipping in makes the read-only
// open that follows fail (with an error, never a wrong read), and another
// process's exclusive lock taken then makes share wait for it to end.
func (l *dirLock) share() error {
	return syscall.Flock(int(l.f.Fd()), syscall.LOCK_SH)
}

// unlock releases the lock. The file stays: deleting a lock file while
// another process may be opening it would let two processes lock
// different inodes of the same path.
func (l *dirLock) unlock() error {
	if l == nil || l.f == nil {
		return nil
	}
	err := l.f.Close() // closing the last descriptor drops the flock
	l.f = nil
	return err
}

// lockManifest makes the processes (and Caches) that share dir's cache
// take turns at reading and rewriting its manifest, with a flock on the
// directory itself, apart from the lock file's; it returns the unlock.
// Best effort: where the directory cannot be locked (a file system
// without flock), the update goes ahead unserialized, as it did before.
func lockManifest(dir string) (unlock func()) {
	f, err := os.Open(dir)
	if err != nil {
		return func() {}
	}
	if syscall.Flock(int(f.Fd()), syscall.LOCK_EX) != nil {
		f.Close()
		return func() {}
	}
	return func() { f.Close() } // closing it drops the flock
}
