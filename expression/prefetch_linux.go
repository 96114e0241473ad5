package expression

import "golang.org/x/sys/unix"

// PrefetchFile asks the kernel to start reading the file at path into its
// page cache, so that a read_file of it a few milliseconds later finds it
// there rather than waiting for the disk. It does not wait for the read,
// and ignores errors: the read_file reports them.
func PrefetchFile(path string) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	if err != nil {
		return
	}
	_ = unix.Fadvise(fd, 0, 0, unix.FADV_WILLNEED)
	_ = unix.Close(fd)
}
