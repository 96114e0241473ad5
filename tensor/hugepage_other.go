//go:build !linux

package tensor

import "time"

// AdviseHuge is a no-op where transparent huge pages are not known.
func AdviseHuge([]byte) {}

// ProbeHugePages measures nothing where transparent huge pages are not
// known: ok is false.
func ProbeHugePages() (huge, small time.Duration, ok bool) { return 0, 0, false }
