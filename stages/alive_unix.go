//go:build unix

package stages

import (
	"bytes"
	"errors"
	"os"
	"strconv"
	"syscall"
)

// processAlive reports whether a process with this ID exists (one of
// another user's counts: EPERM). A zombie does not: a writer killed with
// kill -9 whose parent died with it (timeout -s KILL kills its own group)
// waits for init to reap it, which may take seconds, and its temporary
// files are as stale as a reaped one's.
func processAlive(pid int) bool {
	if errors.Is(syscall.Kill(pid, 0), syscall.ESRCH) {
		return false
	}
	return !zombie(pid)
}

// zombie reports whether /proc says pid has exited and awaits its reaping
// (state Z or X); where there is no /proc, it cannot tell and says no.
func zombie(pid int) bool {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	// The state follows the command name, which may hold ") ".
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 || i+2 >= len(stat) {
		return false
	}
	return stat[i+2] == 'Z' || stat[i+2] == 'X'
}
