//go:build !(linux || darwin)

package cache

// checkDescriptors does not count open descriptors where /dev/fd may not
// list them all.
func checkDescriptors(string) error { return nil }
