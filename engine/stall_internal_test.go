package engine

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"
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
		// A stage parked in a select, but inside Badger's code, which its
		// own goroutines will wake: moving.
		{"waits_in_badger.txt", false},
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

// TestAllParkedLive reads a real dump: an inlet waiting on an empty queue
// is parked in the engine; once a chunk arrives it is not.
func TestAllParkedLive(t *testing.T) {
	l := newLink(1)
	in := &inlet{ctx: context.Background(), l: l}
	got := make(chan item)
	go func() {
		it, _ := in.next()
		got <- it
	}()
	others := func() []byte { // every goroutine but this test's, which is running
		d := stacks()
		if i := bytes.Index(d, []byte("\n\n")); i >= 0 {
			return d[i+2:]
		}
		return nil
	}
	deadline := time.Now().Add(10 * time.Second)
	for !allParked(others()) {
		if time.Now().After(deadline) {
			t.Fatalf("an inlet waiting on an empty queue is not seen as parked:\n%s", others())
		}
		time.Sleep(10 * time.Millisecond)
	}
	l.ch <- &chunk{eoe: true, epoch: 3}
	if it := <-got; !it.eoe || it.epoch != 3 {
		t.Fatalf("next gave %+v", it)
	}
}
