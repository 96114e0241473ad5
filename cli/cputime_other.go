//go:build !unix

package cli

import "time"

// cpuTime is 0 where the process's CPU time is not read (Windows): the
// bench report's cpu_s is then 0.
func cpuTime() time.Duration { return 0 }
