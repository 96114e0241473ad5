package engine_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/piperun/piperun/sample"
	"github.com/piperun/piperun/spec"
	"github.com/piperun/piperun/stages"
)

type nap struct{}

func (nap) Process(_ context.Context, s *sample.Sample, emit stages.Emit) error {
	time.Sleep(2 * time.Millisecond)
	return emit(s)
}

type slowSink struct{}

func (slowSink) Write(context.Context, *sample.Sample) error {
	time.Sleep(2 * time.Millisecond)
	return nil
}
func (slowSink) Commit() error { return nil }
func (slowSink) Abort() error  { return nil }

// gapSink is a sink whose consumer goes away for 400 ms at its second
// sample, as a serve sink's trainer may between two trainers.
type gapSink struct {
	slowSink
	n    *int
	idle *time.Duration
}

func (g gapSink) Write(context.Context, *sample.Sample) error {
	if *g.n++; *g.n == 2 {
		time.Sleep(400 * time.Millisecond)
		*g.idle = 400 * time.Millisecond
	}
	return nil
}

func (g gapSink) IdleTime() time.Duration { return *g.idle }
func (g gapSink) Idle() bool              { return false }

// stuckSink never gets its first sample out, as a serve sink whose
// trainer never connects.
type stuckSink struct{ slowSink }

func (stuckSink) Write(ctx context.Context, _ *sample.Sample) error {
	<-ctx.Done()
	return ctx.Err()
}

// TestSinkWaitSaysWhoHeldBack: a sink's waited_share is the share of its
// time (after its first sample) spent waiting for the next sample: nearly
// all of it behind a stage that naps 2 ms a sample, nearly none of it when
// the sink itself naps 2 ms a write. apply uses it to tell a starving GPU
// whose pipeline was too slow from one whose trainer was.
func TestSinkWaitSaysWhoHeldBack(t *testing.T) {
	reg := benchRegistry()
	reg.Register(&stages.Type{
		StageType: spec.StageType{Name: "nap", Role: spec.RoleTransform, NewConfig: func() any { return &passConfig{} }},
		Build:     func(*stages.Env, any) (any, error) { return nap{}, nil },
	})
	reg.Register(&stages.Type{
		StageType: spec.StageType{Name: "slow_sink", Role: spec.RoleSink, NewConfig: func() any { return &passConfig{} }},
		Build:     func(*stages.Env, any) (any, error) { return slowSink{}, nil },
	})
	for _, tc := range []struct {
		name, stages string
		pipelineSlow bool
	}{
		{"slow pipeline", "  - {name: n, type: nap}\n  - {name: out, type: discard}\n", true},
		{"slow sink", "  - {name: out, type: slow_sink}\n", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := "version: 1\nname: wait\nstages:\n  - {name: src, type: range, count: 100}\n" + tc.stages
			rep, err := runSpecWith(context.Background(), t, reg, t.TempDir(), src)
			if err != nil {
				t.Fatal(err)
			}
			out := rep.Sinks["out"]
			t.Logf("waited %.3fs, share %.3f of %.3fs active in a %.3fs run", out.WaitedS, out.WaitedShare, out.ActiveS, rep.ElapsedS)
			if out.Samples != 100 || out.WaitedS < 0 || out.WaitedS > out.ActiveS || out.ActiveS <= 0 || out.ActiveS > rep.ElapsedS ||
				out.WaitedShare < 0 || out.WaitedShare > 1 {
				t.Fatalf("sink report %+v in a %.3fs run", out, rep.ElapsedS)
			}
			// 99 waits of 2 ms against writes of microseconds, or the
			// reverse: the margins are wide enough for a loaded machine.
			if tc.pipelineSlow && (out.WaitedShare < 0.5 || out.WaitedS <= 0) {
				t.Errorf("behind a napping stage the sink waited %.3f of its time (%.3fs), want most of it", out.WaitedShare, out.WaitedS)
			}
			if !tc.pipelineSlow && out.WaitedShare > 0.5 {
				t.Errorf("a napping sink waited %.3f of its time, want little of it", out.WaitedShare)
			}
		})
	}
}

// TestSinkThatNeverWroteHasNoWait: a sink still stuck in its first Write
// when the run ends (a serve sink with no trainer) reports no sample (it
// sent none), no active time and no wait, so apply does not judge a
// trainer by it.
func TestSinkThatNeverWroteHasNoWait(t *testing.T) {
	reg := benchRegistry()
	reg.Register(&stages.Type{
		StageType: spec.StageType{Name: "stuck_sink", Role: spec.RoleSink, NewConfig: func() any { return &passConfig{} }},
		Build:     func(*stages.Env, any) (any, error) { return stuckSink{}, nil },
	})
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	rep, err := runSpecWith(ctx, t, reg, t.TempDir(), "version: 1\nname: stuck\nstages:\n  - {name: src, type: range, count: 10}\n  - {name: out, type: stuck_sink}\n")
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want the deadline", err)
	}
	if out := rep.Sinks["out"]; out.Samples != 0 || out.ActiveS != 0 || out.WaitedS != 0 || out.WaitedShare != 0 {
		t.Errorf("sink report %+v, want no sample, no active time and no wait", out)
	}
}

// TestSinkWaitLeavesOutTimeWithoutAConsumer: behind a stage that naps 2 ms
// a sample (0.8 s for 400), a sink left 400 ms without its consumer early
// on (stages.Idler) still waited for samples most of the rest of its time: the gap is not counted as time the pipeline
// kept up (a trainer reconnecting made a slow
// pipeline look fast).
func TestSinkWaitLeavesOutTimeWithoutAConsumer(t *testing.T) {
	reg := benchRegistry()
	var n int
	var idle time.Duration
	reg.Register(&stages.Type{
		StageType: spec.StageType{Name: "nap", Role: spec.RoleTransform, NewConfig: func() any { return &passConfig{} }},
		Build:     func(*stages.Env, any) (any, error) { return nap{}, nil },
	})
	reg.Register(&stages.Type{
		StageType: spec.StageType{Name: "gap_sink", Role: spec.RoleSink, NewConfig: func() any { return &passConfig{} }},
		Build:     func(*stages.Env, any) (any, error) { return gapSink{n: &n, idle: &idle}, nil },
	})
	rep, err := runSpecWith(context.Background(), t, reg, t.TempDir(),
		"version: 1\nname: gap\nstages:\n  - {name: src, type: range, count: 400}\n  - {name: n, type: nap}\n  - {name: out, type: gap_sink}\n")
	if err != nil {
		t.Fatal(err)
	}
	out := rep.Sinks["out"]
	t.Logf("waited %.3fs, share %.3f of %.3fs active in a %.3fs run", out.WaitedS, out.WaitedShare, out.ActiveS, rep.ElapsedS)
	if out.WaitedShare < 0.5 || out.ActiveS <= 0 || out.ActiveS > rep.ElapsedS-0.4 {
		t.Errorf("sink report %+v in a %.3fs run; want most of the time without the gap spent waiting", out, rep.ElapsedS)
	}
}
