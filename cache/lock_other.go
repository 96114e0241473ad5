//go:build !unix

package cache

import "os"

// dirLock is a no-op where flock is unavailable; Badger's own directory
// lock still keeps a second process out of an open cache, but Prune and
// Remove cannot tell that a cache is in use.
type dirLock struct{}

// errLocked is returned by lockDir when another process holds the lock.
type errLocked struct {
	pid     int
	readers bool
}

func (e errLocked) Error() string { return "locked" }

func lockDirShared(dir string) (*dirLock, error) { return lockDir(dir) }

func lockDir(dir string) (*dirLock, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	return &dirLock{}, nil
}

func (l *dirLock) unlock() error { return nil }

func (l *dirLock) share() error { return nil }

// lockManifest would make the processes sharing dir's cache take turns
// at rewriting its manifest; without flock they share nothing, each
// holding the cache alone.
func lockManifest(dir string) (unlock func()) { return func() {} }
