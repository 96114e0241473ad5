package expression

import "golang.org/x/sys/unix"

// PrefetchFile asks the kernel to start reading the regular file at path
// into its page cache (posix_fadvise WILLNEED), so that a read_file of it
// a few milliseconds later finds it there rather than waiting for the
// disk. The kernel reads in the background, and only up to its read-ahead
// limit of a large file (128 KiB to a few MiB, enough for a photo).
// Anything but a regular file is left alone: opening a FIFO or a device
// can have effects of its own. Errors are ignored: the read_file reports
// them.
func PrefetchFile(path string) {
	var st unix.Stat_t
	if unix.Stat(path, &st) != nil || st.Mode&unix.S_IFMT != unix.S_IFREG {
		return
	}
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	if err != nil {
		return
	}
	_ = unix.Fadvise(fd, 0, 0, unix.FADV_WILLNEED)
	_ = unix.Close(fd)
}
