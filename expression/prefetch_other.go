//go:build !linux

package expression

// PrefetchFile does nothing where posix_fadvise is not known to start a
// read in the background.
func PrefetchFile(string) {}
