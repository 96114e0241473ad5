package engine

import (
	"os"
	"path/filepath"
	"testing"
)

// TestAllParked reads goroutine dumps (runtime.Stack of all goroutines)
// kept in testdata/stacks: a run is parked only when every engine
// goroutine waits in the engine's own code.
func TestAllParked(t *testing.T) {
	for _, tc := range []struct {
		file string
		want bool
	}{
		// A map's workers and collector, a batch waiting for memory, the
		// sink waiting for input: the hang of the README's known limit.
		{"budget_deadlock.txt", true},
		// The same, but a worker is inside stage code (decoding): moving.
		{"worker_in_stage.txt", false},
		// A sink blocked writing to a pipe is in a syscall: moving.
		{"sink_in_syscall.txt", false},
		// A goroutine woken but not yet running.
		{"runnable.txt", false},
		// Nothing of the engine at all.
		{"no_engine.txt", false},
	} {
		b, err := os.ReadFile(filepath.Join("testdata", "stacks", tc.file))
		if err != nil {
			t.Fatal(err)
		}
		if got := allParked(b); got != tc.want {
			t.Errorf("%s: allParked = %v, want %v", tc.file, got, tc.want)
		}
	}
}
