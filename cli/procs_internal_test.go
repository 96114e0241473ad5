package cli

import "testing"

// TestProcsFor: the command adds spareProcs to Go's default, unless the
// user set GOMAXPROCS.
func TestProcsFor(t *testing.T) {
	for _, tc := range []struct {
		env       string
		def, want int
	}{
		{"", 2, 3},
		{"", 1, 2},
		{"", 64, 65},
		{"2", 2, 2},
		{"7", 7, 7},
		// Values the runtime ignores leave its default, so the spare P
		// is added (found in review).
		{"0", 2, 3},
		{"-3", 2, 3},
		{"abc", 2, 3},
	} {
		if got := procsFor(tc.env, tc.def); got != tc.want {
			t.Errorf("procsFor(%q, %d) = %d, want %d", tc.env, tc.def, got, tc.want)
		}
	}
}
