package engine_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/piperun/piperun/sample"
	"github.com/piperun/piperun/spec"
	"github.com/piperun/piperun/stages"
)

// counting passes samples on after a millisecond each, as a slow map
// would, and counts them. Slow samples are what make the collector send
// them on one or two at a time, whenever no finished job is waiting: the
// queue to the stage below is then a few samples long.
type counting struct{ n *atomic.Int64 }

func (c counting) Process(_ context.Context, s *sample.Sample, emit stages.Emit) error {
	time.Sleep(time.Millisecond)
	c.n.Add(1)
	return emit(s)
}

// pausingSink holds its first sample until the stage above has processed
// want samples, or until a deadline, and records which came first.
type pausingSink struct {
	slowSink
	done    *atomic.Int64
	want    int64
	reached *bool
	first   *bool
	seen    *int64 // processed when the sink stopped waiting
}

func (p pausingSink) Write(context.Context, *sample.Sample) error {
	if !*p.first {
		return nil
	}
	*p.first = false
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		if *p.seen = p.done.Load(); *p.seen >= p.want {
			*p.reached = true
			return nil
		}
		time.Sleep(time.Millisecond)
	}
	return nil
}

// TestParallelStageWorksAheadOfAPause: while the stage below a parallel
// stage is busy with one sample (a batch writing its first 19 MiB of
// floats into fresh memory takes 15 ms), the workers go on with the
// samples after it, as far as the stage's window allows (a quarter of the
// budget), rather than stopping after a few jobs. Before, a queue of two
// jobs per worker between them and the collector was the bound, and both
// decoders of W1 sat idle for 6 ms at its first batch (bench/RESULTS.md,
// run AE).
func TestParallelStageWorksAheadOfAPause(t *testing.T) {
	reg := benchRegistry()
	var n atomic.Int64
	reached, first, seen := false, true, int64(0)
	reg.Register(&stages.Type{
		StageType: spec.StageType{Name: "count", Role: spec.RoleTransform, Parallel: true, NewConfig: func() any { return &passConfig{} }},
		Build:     func(*stages.Env, any) (any, error) { return counting{&n}, nil },
	})
	reg.Register(&stages.Type{
		StageType: spec.StageType{Name: "pause_sink", Role: spec.RoleSink, NewConfig: func() any { return &passConfig{} }},
		Build: func(*stages.Env, any) (any, error) {
			return pausingSink{done: &n, want: 150, reached: &reached, first: &first, seen: &seen}, nil
		},
	})
	rep, err := runSpecWith(context.Background(), t, reg, t.TempDir(),
		"version: 1\nname: ahead\nstages:\n  - {name: src, type: range, count: 200}\n  - {name: c, type: count, parallelism: 2}\n  - {name: out, type: pause_sink}\n")
	if err != nil {
		t.Fatal(err)
	}
	if got := rep.Sinks["out"].Samples; got != 200 {
		t.Fatalf("sink got %d samples, want 200", got)
	}
	if !reached {
		t.Errorf("while the sink held its first sample the parallel stage processed %d samples in 5 s, want 150 of 200: its workers stopped", seen)
	}
}
