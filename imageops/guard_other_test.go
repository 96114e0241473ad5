//go:build !linux

package imageops

import "testing"

// endGuarded returns n bytes; only Linux builds put a guard page after them.
func endGuarded(_ *testing.T, n int) []byte { return make([]byte, n) }
