package cache

import "golang.org/x/sys/unix"

// freeBytes is the room left to this process on dir's file system:
// statfs counts the blocks in units of f_frsize.
var freeBytes = func(dir string) (int64, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return 0, err
	}
	return int64(st.Bavail) * st.Frsize, nil
}
