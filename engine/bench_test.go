package engine_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/piperun/piperun/engine"
	"github.com/piperun/piperun/plan"
	"github.com/piperun/piperun/sample"
	"github.com/piperun/piperun/spec"
	"github.com/piperun/piperun/stages"
)

// passConfig configures the pass stage, which takes no options.
type passConfig struct{}

type pass struct{}

func (pass) Process(_ context.Context, s *sample.Sample, emit stages.Emit) error { return emit(s) }

// benchRegistry is an empty registry with only what the overhead benchmark
// needs, so it measures the engine rather than any stage's work.
func benchRegistry() *stages.Registry {
	return rangeRegistry(&stages.Type{
		StageType: spec.StageType{Name: "pass", Role: spec.RoleTransform, NewConfig: func() any { return &passConfig{} }},
		Build:     func(*stages.Env, any) (any, error) { return pass{}, nil },
	})
}

// BenchmarkEngineOverhead runs samples through a chain of five stages that
// do nothing but pass them on; the time per sample per stage is the
// engine's overhead (channels, chunking, budget accounting, counters).
func BenchmarkEngineOverhead(b *testing.B) {
	for _, deterministic := range []bool{true} {
		b.Run(fmt.Sprintf("chain5/deterministic=%v", deterministic), func(b *testing.B) {
			reg := benchRegistry()
			src := fmt.Sprintf(`
version: 1
name: overhead
stages:
  - {name: src, type: range, count: %d}
  - {name: s1, type: pass}
  - {name: s2, type: pass}
  - {name: s3, type: pass}
  - {name: s4, type: pass}
  - {name: s5, type: pass}
  - {name: out, type: discard}
`, b.N)
			sp, diags := spec.Parse(filepath.Join(b.TempDir(), "s.yaml"), []byte(src), spec.Options{Catalog: reg})
			if diags.HasErrors() {
				b.Fatal(diags)
			}
			p, err := plan.Compile(sp, reg, plan.Options{})
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			b.ResetTimer()
			run, err := engine.Start(context.Background(), p, engine.Options{Registry: reg})
			if err != nil {
				b.Fatal(err)
			}
			rep, err := run.Wait()
			if err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			if rep.Sinks["out"].Samples != int64(b.N) {
				b.Fatalf("got %d samples, want %d", rep.Sinks["out"].Samples, b.N)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/5, "ns/sample/stage")
		})
	}
}

// BenchmarkParallelMap measures a cheap expression map at parallelism 1
// and 2 with order preserved, the cost that a real map adds per sample.
func BenchmarkParallelMap(b *testing.B) {
	for _, par := range []int{1, 2} {
		b.Run(fmt.Sprintf("par=%d", par), func(b *testing.B) {
			reg := stages.Default()
			src := fmt.Sprintf(`
version: 1
name: mapbench
stages:
  - {name: src, type: range, count: %d}
  - {name: m, type: map, parallelism: %d, set: {y: 'index * 2 + 1'}}
  - {name: out, type: discard}
`, b.N, par)
			sp, diags := spec.Parse(filepath.Join(b.TempDir(), "s.yaml"), []byte(src), spec.Options{Catalog: reg})
			if diags.HasErrors() {
				b.Fatal(diags)
			}
			p, _ := plan.Compile(sp, reg, plan.Options{})
			b.ReportAllocs()
			b.ResetTimer()
			run, err := engine.Start(context.Background(), p, engine.Options{Registry: reg})
			if err != nil {
				b.Fatal(err)
			}
			if _, err := run.Wait(); err != nil {
				b.Fatal(err)
			}
		})
	}
}
