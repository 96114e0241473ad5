package cli

import "testing"

// TestProcsFor: the command adds spareProcs to Go's default, unless the
// user set GOMAXPROCS.
func TestProcsFor(t *testing.T) {
	for _, tc := range []struct {
		set       bool
		def, want int
	}{
		{false, 2, 3},
		{false, 1, 2},
		{false, 64, 65},
		{true, 2, 2},
		{true, 7, 7},
	} {
		if got := procsFor(tc.set, tc.def); got != tc.want {
			t.Errorf("procsFor(%v, %d) = %d, want %d", tc.set, tc.def, got, tc.want)
		}
	}
}
