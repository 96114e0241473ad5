package cli

import (
	"os"
	"runtime"
	"testing"
)

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

// TestSetProcsTwice: running the command twice in one process (as tests
// and BenchmarkApply do) sets the same GOMAXPROCS both times; it once
// added the spare P to what the previous run had set, so the third run of
// BenchmarkApply had 4 Ps on 2 cores.
func TestSetProcsTwice(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	want := procsFor(os.Getenv("GOMAXPROCS"), defaultProcs)
	for i := range 3 {
		setProcs()
		if got := runtime.GOMAXPROCS(0); got != want {
			t.Fatalf("after setProcs #%d GOMAXPROCS = %d, want %d (Go's default %d)", i+1, got, want, defaultProcs)
		}
	}
}
