//go:build unix

package stages

import "golang.org/x/sys/unix"

// readable reports whether this process may read the file at path,
// without opening it: validate asks it of every file a pattern matches,
// and access(2) is a fraction of an open and close. A variable, so a test
// run as root, which reads any file, can stand in a refusal.
var readable = func(path string) error { return unix.Access(path, unix.R_OK) }
