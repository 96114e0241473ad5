package engine

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/piperun/piperun/budget"
	"github.com/piperun/piperun/plan"
	"github.com/piperun/piperun/sample"
	"github.com/piperun/piperun/spec"
	"github.com/piperun/piperun/stages"
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

// interleaver is the least of an Expander: the stall message reads only
// its width.
type interleaver struct{ cycle int }

func (interleaver) Open(context.Context, *sample.Sample) (stages.Stream, error) { return nil, nil }
func (i interleaver) Interleave() (int, int)                                    { return i.cycle, 1 }

// TestStallErrorNamesReservedMemory: a stuck run's message counts memory
// a stage reserved for itself (an on-disk cache's 82MiB) apart from the
// samples, says what it leaves them, and names an interleave's width as
// something to lower ("83.13MiB inside other stages"
// hid the cache, and a 3MiB budget reading 8 files of 375KiB records
// named no cycle_length), and names parallel stages as something to lower
// (a tester's chains of parallel maps stalled at budgets of 5 to 20 samples
// that ran at parallelism 1).
func TestStallErrorNamesReservedMemory(t *testing.T) {
	b := budget.New(100 << 20)
	b.TryAcquire(82 << 20)
	b.TryAcquire(16 << 20)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go b.AcquireAs(ctx, 3<<20, "batch")
	for n, _ := b.Waiting(); n == 0; n, _ = b.Waiting() {
		time.Sleep(time.Millisecond)
	}
	r := &Run{budget: b, nodes: []*node{
		{pn: &plan.Node{}, st: &spec.Stage{Name: "records", Type: "tfrecord"}, impl: interleaver{cycle: 8}},
		{pn: &plan.Node{Reserved: 82 << 20, ReservedFor: "Badger's tables and caches"}, st: &spec.Stage{Name: "c", Type: "cache"}},
		{pn: &plan.Node{Parallelism: 2}, st: &spec.Stage{Name: "decode", Type: "map"}},
		{pn: &plan.Node{Parallelism: 1}, st: &spec.Stage{Name: "grow", Type: "map"}},
	}}
	want := ErrStalled.Error() + ` (memory budget 100MiB: 98MiB held: none queued between stages, 82MiB reserved by cache "c" for its own use (Badger's tables and caches), 16MiB inside other stages; waiting for more: batch (3MiB)): raise resources.memory to hold several of the largest samples at once (3MiB was asked for here), or make them smaller earlier (resize in the decode); or lower cycle_length of tfrecord "records" (8 files open at once, a record of each held); or lower the parallelism of map "decode" (2): each worker holds its samples in and out, and finished ones wait their turn; or count the 82MiB reserved in resources.memory: it leaves samples 18MiB`
	if got := r.stallError().Error(); got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
}
