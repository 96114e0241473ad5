package engine_test

import (
	"context"
	"errors"
	"fmt"
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

// pausingSink holds its first sample until the stage above has stopped
// processing more (no change for 200 ms, or 5 s), and records how many it
// had processed by then.
type pausingSink struct {
	slowSink
	done  *atomic.Int64
	seen  *int64
	first *bool
}

func (p pausingSink) Write(context.Context, *sample.Sample) error {
	if !*p.first {
		return nil
	}
	*p.first = false
	last, since := p.done.Load(), time.Now()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline) && time.Since(since) < 200*time.Millisecond; {
		time.Sleep(time.Millisecond)
		if n := p.done.Load(); n != last {
			last, since = n, time.Now()
		}
	}
	*p.seen = last
	return nil
}

// TestParallelStageWorksAheadOfAPause: while the stage below a parallel
// stage is busy with one sample (a batch writing its first 18 MiB of
// floats into fresh memory takes 15 ms), the workers go on with the
// samples after it, 8 jobs a worker ahead of the collector, and then stop
// rather than fill the budget. With two jobs a worker, both of W1's
// decoders sat idle for 6 ms at its first batch (bench/RESULTS.md, run
// AE); with as many as the window allowed, a slow stage below left a
// quarter of the budget queued, and runs whose samples grew stalled.
// Here two workers process 11 samples with two jobs each queued, 23 with
// eight, and all 200 with no bound but the window.
func TestParallelStageWorksAheadOfAPause(t *testing.T) {
	for _, det := range []bool{true, false} {
		t.Run(fmt.Sprintf("deterministic=%v", det), func(t *testing.T) {
			reg := benchRegistry()
			var n atomic.Int64
			var seen int64
			first := true
			reg.Register(&stages.Type{
				StageType: spec.StageType{Name: "count", Role: spec.RoleTransform, Parallel: true, NewConfig: func() any { return &passConfig{} }},
				Build:     func(*stages.Env, any) (any, error) { return counting{&n}, nil },
			})
			reg.Register(&stages.Type{
				StageType: spec.StageType{Name: "pause_sink", Role: spec.RoleSink, NewConfig: func() any { return &passConfig{} }},
				Build: func(*stages.Env, any) (any, error) {
					return pausingSink{done: &n, seen: &seen, first: &first}, nil
				},
			})
			src := fmt.Sprintf("version: 1\nname: ahead\ndeterministic: %v\nresources: {memory: 64MiB}\nstages:\n"+
				"  - {name: src, type: range, count: 200}\n  - {name: c, type: count, parallelism: 2}\n  - {name: out, type: pause_sink}\n", det)
			rep, err := runSpecWith(context.Background(), t, reg, t.TempDir(), src)
			if err != nil {
				t.Fatal(err)
			}
			if got := rep.Sinks["out"].Samples; got != 200 {
				t.Fatalf("sink got %d samples, want 200", got)
			}
			t.Logf("processed %d samples while the sink held its first", seen)
			// 16 jobs queued, the two the workers hold, and what the
			// collector and the queue below it hold.
			if seen < 20 || seen > 40 {
				t.Errorf("while the sink held its first sample the parallel stage processed %d samples, want 20 to 40: 8 jobs a worker ahead, then a stop", seen)
			}
		})
	}
}

// cancelling cancels the run at the 200th sample it processes and counts
// the samples it processes after that.
type cancelling struct {
	cancel context.CancelFunc
	calls  *atomic.Int64
	after  *atomic.Int64
}

func (c cancelling) Process(ctx context.Context, s *sample.Sample, emit stages.Emit) error {
	if c.calls.Add(1) == 200 {
		c.cancel()
	} else if ctx.Err() != nil {
		c.after.Add(1)
	}
	time.Sleep(100 * time.Microsecond)
	return emit(s)
}

// TestParallelStageStopsBetweenSamples: once the run is cancelled a
// parallel stage's workers process no more samples than the ones in their
// hands: a worker whose job was not the collector's next took memory and
// went on to its job's next sample, and a Ctrl-C during 2 s decodes of
// large photos took 6 s to act. Without the engine's
// check it sees 2 or more in 18 runs of 20.
func TestParallelStageStopsBetweenSamples(t *testing.T) {
	reg := benchRegistry()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var calls, after atomic.Int64
	reg.Register(&stages.Type{
		StageType: spec.StageType{Name: "cancel", Role: spec.RoleTransform, Parallel: true, NewConfig: func() any { return &passConfig{} }},
		Build: func(*stages.Env, any) (any, error) {
			return cancelling{cancel: cancel, calls: &calls, after: &after}, nil
		},
	})
	const src = "version: 1\nname: stop\nresources: {memory: 64MiB}\nstages:\n" +
		"  - {name: src, type: range, count: 2000}\n  - {name: c, type: cancel, parallelism: 2}\n  - {name: out, type: discard}\n"
	if _, err := runSpecWith(ctx, t, reg, t.TempDir(), src); !errors.Is(err, context.Canceled) {
		t.Fatalf("run: %v, want it cancelled", err)
	}
	// The other worker may have passed the engine's check of ctx just
	// before the cancel, and see it cancelled in Process: one such sample
	// (a delay injected after the check made that 17 runs of 50).
	if n := after.Load(); n > 1 {
		t.Errorf("%d samples begun after the run was cancelled (of %d), want at most the other worker's one", n, calls.Load())
	}
}

// firstSink records how many samples the stage above had processed when
// its first sample arrived.
type firstSink struct {
	slowSink
	done *atomic.Int64
	seen *atomic.Int64
}

func (f firstSink) Write(context.Context, *sample.Sample) error {
	f.seen.CompareAndSwap(-1, f.done.Load())
	return nil
}

// TestSlowSamplesGoDownAtOnce: a stage of one worker whose samples are slow
// (a 7000×7000 photo's 2 s decode) hands each one down as it is done. They
// waited in its outlet until 64 had piled up, as its input (the files
// source) never blocked: a Ctrl-C after 10 s of decodes found none of them
// in the cache below, and the rerun did the work again.
func TestSlowSamplesGoDownAtOnce(t *testing.T) {
	reg := benchRegistry()
	var done, seen atomic.Int64
	seen.Store(-1)
	reg.Register(&stages.Type{
		StageType: spec.StageType{Name: "slow", Role: spec.RoleTransform, NewConfig: func() any { return &passConfig{} }},
		Build:     func(*stages.Env, any) (any, error) { return slowStage{&done}, nil },
	})
	reg.Register(&stages.Type{
		StageType: spec.StageType{Name: "first_sink", Role: spec.RoleSink, NewConfig: func() any { return &passConfig{} }},
		Build:     func(*stages.Env, any) (any, error) { return firstSink{done: &done, seen: &seen}, nil },
	})
	const src = "version: 1\nname: slow\nresources: {memory: 64MiB}\nstages:\n" +
		"  - {name: src, type: range, count: 8}\n  - {name: s, type: slow}\n  - {name: out, type: first_sink}\n"
	if _, err := runSpecWith(context.Background(), t, reg, t.TempDir(), src); err != nil {
		t.Fatal(err)
	}
	if n := seen.Load(); n < 1 || n > 3 {
		t.Errorf("the sink's first sample came once %d of 8 slow samples were done, want 1 to 3", n)
	}
}

// slowStage takes 60 ms a sample.
type slowStage struct{ n *atomic.Int64 }

func (c slowStage) Process(_ context.Context, s *sample.Sample, emit stages.Emit) error {
	time.Sleep(60 * time.Millisecond)
	c.n.Add(1)
	return emit(s)
}
