//go:build unix && !linux

package cache

import "golang.org/x/sys/unix"

// freeBytes is the room left to this process on dir's file system.
var freeBytes = func(dir string) (int64, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return 0, err
	}
	return int64(st.Bavail) * int64(st.Bsize), nil
}
