//go:build linux || darwin

package stages

import "syscall"

// openFileLimit is how many files this process may have open (ulimit -n,
// which Go raises to the hard limit as it starts), and whether it is
// known and finite.
func openFileLimit() (uint64, bool) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil || lim.Cur == ^uint64(0) {
		return 0, false
	}
	return uint64(lim.Cur), true
}
