//go:build unix

package cli

import (
	"os"
	"syscall"
	"time"
)

// raise ends the process by sig, its default action restored: a parent
// sees it killed by the signal, as it would be without a handler.
func raise(sig os.Signal) {
	if s, ok := sig.(syscall.Signal); ok {
		syscall.Kill(syscall.Getpid(), s)
		time.Sleep(time.Second) // the signal is delivered asynchronously
	}
	os.Exit(1)
}
