package cli

import (
	"os"
	"runtime"
	"testing"
)

// TestUserProcs: the command adds spareProcs to Go's default unless the
// user set GOMAXPROCS to a value the runtime applies.
func TestUserProcs(t *testing.T) {
	for _, tc := range []struct {
		env  string
		want bool
	}{
		{"", false},
		{"2", true},
		{"7", true},
		{"64", true},
		// Values the runtime ignores leave its default, so the spare P
		// is added.
		{"0", false},
		{"-3", false},
		{"abc", false},
	} {
		if got := userProcs(tc.env); got != tc.want {
			t.Errorf("userProcs(%q) = %v, want %v", tc.env, got, tc.want)
		}
	}
}

// TestSetProcsTwice: running the command twice in one process (as tests
// and BenchmarkApply do) sets the same GOMAXPROCS both times, Go's default
// plus the spare P; it once added the spare P to what the previous run
// had set, so the third run of BenchmarkApply had 4 Ps on 2 cores.
func TestSetProcsTwice(t *testing.T) {
	if os.Getenv("GOMAXPROCS") != "" {
		t.Skip("GOMAXPROCS is set: the command leaves it alone")
	}
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	runtime.SetDefaultGOMAXPROCS()
	def := runtime.GOMAXPROCS(0)
	for i := range 3 {
		setProcs()
		if got := runtime.GOMAXPROCS(0); got != def+spareProcs {
			t.Fatalf("after setProcs #%d GOMAXPROCS = %d, want Go's default %d + %d", i+1, got, def, spareProcs)
		}
	}
}
