//go:build !unix

package stages

import "os"

// lockTemp takes no lock here: tempHeld goes by the process ID.
func lockTemp(string) *os.File { return nil }

// tempHeld reports whether the writer whose ID names the temporary file
// lives.
func tempHeld(_ string, pid int) bool { return processAlive(pid) }
