//go:build !unix

package cli

import "os"

// raise ends the process: there is no signal to re-raise here.
func raise(os.Signal) { os.Exit(1) }
