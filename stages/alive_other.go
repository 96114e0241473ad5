//go:build !unix

package stages

// processAlive cannot tell here, so it says yes: nothing is removed.
func processAlive(int) bool { return true }
