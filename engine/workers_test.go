package engine_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/piperun/piperun/sample"
	"github.com/piperun/piperun/spec"
	"github.com/piperun/piperun/stages"
)

// busyConfig configures the busy stage, which takes no options.
type busyConfig struct{}

// busy holds each sample for a while, counting how many of its kind (in
// every stage of the type) hold one at once.
type busy struct{ now, most *atomic.Int64 }

func (b busy) Process(_ context.Context, s *sample.Sample, emit stages.Emit) error {
	n := b.now.Add(1)
	for {
		m := b.most.Load()
		if n <= m || b.most.CompareAndSwap(m, n) {
			break
		}
	}
	time.Sleep(200 * time.Microsecond)
	b.now.Add(-1)
	return emit(s)
}

// TestWorkersIsOneBudgetForEveryStage: resources.workers bounds the
// workers of all parallel stages together, as DESIGN.md's "CPU worker
// budget shared by all stages" says, and as tf.data's shared thread pool
// does; each stage's parallelism is how many of them it may use. It was
// only each stage's default: two stages of parallelism 2 under workers 1
// computed four samples at once (a contract audit).
func TestWorkersIsOneBudgetForEveryStage(t *testing.T) {
	for _, tc := range []struct {
		workers, par int
		want         int64
	}{
		{1, 2, 1},
		{2, 2, 2},
		{3, 4, 3},
	} {
		t.Run(fmt.Sprintf("workers %d, parallelism %d", tc.workers, tc.par), func(t *testing.T) {
			var now, most atomic.Int64
			reg := rangeRegistry(&stages.Type{
				StageType: spec.StageType{Name: "busy", Role: spec.RoleTransform, Parallel: true, NewConfig: func() any { return &busyConfig{} }},
				Build:     func(*stages.Env, any) (any, error) { return busy{&now, &most}, nil },
			})
			rep, err := runSpecWith(context.Background(), t, reg, t.TempDir(), fmt.Sprintf(`
version: 1
name: workers
resources: {workers: %d}
stages:
  - {name: src, type: range, count: 400}
  - {name: a, type: busy, parallelism: %d}
  - {name: b, type: busy, parallelism: %d}
  - {name: out, type: discard}
`, tc.workers, tc.par, tc.par))
			if err != nil {
				t.Fatal(err)
			}
			if got := rep.Sinks["out"].Samples; got != 400 {
				t.Errorf("%d samples, want 400", got)
			}
			if got := most.Load(); got > tc.want {
				t.Errorf("%d samples were processed at once, want at most %d", got, tc.want)
			}
		})
	}
}

// growConfig configures the grow stage, which takes no options.
type growConfig struct{}

// grow replaces each sample's data with 200 KiB of its own.
type grow struct{}

func (grow) Process(_ context.Context, s *sample.Sample, emit stages.Emit) error {
	s.Fields["data"] = make([]byte, 200<<10)
	return emit(s)
}

// TestWorkersGiveTheirSlotWhileTheyWaitForMemory: under workers: 1, a
// worker of the first parallel stage that waits for memory gives its slot
// back, for only the stage below can free that memory, and it needs a
// slot to. Holding it, the run stalled (a review found no test failing
// without the gives).
func TestWorkersGiveTheirSlotWhileTheyWaitForMemory(t *testing.T) {
	reg := rangeRegistry(&stages.Type{
		StageType: spec.StageType{Name: "grow", Role: spec.RoleTransform, Parallel: true, NewConfig: func() any { return &growConfig{} }},
		Build:     func(*stages.Env, any) (any, error) { return grow{}, nil },
	})
	// Stuck, the run fails when its watchdog sees it; the minute is for
	// a watchdog that would not.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rep, err := runSpecWith(ctx, t, reg, t.TempDir(), `
version: 1
name: workers
resources: {workers: 1, memory: 1MiB}
stages:
  - {name: src, type: range, count: 300}
  - {name: a, type: grow, parallelism: 2}
  - {name: b, type: grow, parallelism: 2}
  - {name: out, type: discard}
`)
	if err != nil {
		t.Fatal(err)
	}
	if got := rep.Sinks["out"].Samples; got != 300 {
		t.Errorf("%d samples, want 300", got)
	}
}

// rangeRegistry is an empty registry with range, discard and the types
// given.
func rangeRegistry(types ...*stages.Type) *stages.Registry {
	full := stages.Default()
	reg := stages.NewRegistry()
	for _, n := range []string{"range", "discard"} {
		st, _ := full.Type(n)
		reg.Register(st)
	}
	for _, st := range types {
		reg.Register(st)
	}
	return reg
}
