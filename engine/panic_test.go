package engine_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/piperun/piperun/engine"
	"github.com/piperun/piperun/plan"
	"github.com/piperun/piperun/sample"
	"github.com/piperun/piperun/spec"
	"github.com/piperun/piperun/stages"
)

type boom struct{}

func (boom) Process(_ context.Context, s *sample.Sample, emit stages.Emit) error {
	if s.Fields["index"].(int64) == 3 {
		var m map[string]int
		//lint:ignore SA5000 the panic is what the test needs
		m["x"] = 1 // a nil-map write: a real runtime panic
	}
	return emit(s)
}

// TestPanicBecomesError: a stage that panics fails the run with an error
// naming the stage, instead of crashing the process, and nothing is
// committed.
func TestPanicBecomesError(t *testing.T) {
	reg := benchRegistry()
	reg.Register(&stages.Type{
		StageType: spec.StageType{Name: "boom", Role: spec.RoleTransform, NewConfig: func() any { return &passConfig{} }},
		Build:     func(*stages.Env, any) (any, error) { return boom{}, nil },
	})
	full := stages.Default()
	w, _ := full.Type("write_jsonl")
	reg.Register(w)
	dir := t.TempDir()
	sp, diags := spec.Parse(filepath.Join(dir, "s.yaml"), []byte(`
version: 1
name: panics
stages:
  - {name: src, type: range, count: 10}
  - {name: b, type: boom}
  - {name: out, type: write_jsonl, path: out.jsonl}
`), spec.Options{Catalog: reg})
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	p, _ := plan.Compile(sp, reg, plan.Options{})
	run, err := engine.Start(context.Background(), p, engine.Options{Registry: reg})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := run.Wait()
	var se *engine.StageError
	if !errors.As(err, &se) || se.Stage != "b" || !strings.Contains(err.Error(), "panic: assignment to entry in nil map") {
		t.Fatalf("err = %v", err)
	}
	if rep.OK {
		t.Error("report says ok")
	}
	if ents, _ := filepath.Glob(filepath.Join(dir, "*out.jsonl*")); len(ents) != 0 {
		t.Errorf("left %v", ents)
	}
}

// TestParallelPanicEndsTheRun: a panic in a parallel stage's worker fails
// the run naming the stage, in input order and in completion order. Found
// in review: the worker ended without finishing its job, and the collector
// (or, in completion order, the dispatcher) waited for it forever.
func TestParallelPanicEndsTheRun(t *testing.T) {
	for _, det := range []string{"true", "false"} {
		t.Run("deterministic "+det, func(t *testing.T) {
			reg := benchRegistry()
			reg.Register(&stages.Type{
				StageType: spec.StageType{Name: "boom", Role: spec.RoleTransform, Parallel: true, NewConfig: func() any { return &passConfig{} }},
				Build:     func(*stages.Env, any) (any, error) { return boom{}, nil },
			})
			sp, diags := spec.Parse(filepath.Join(t.TempDir(), "s.yaml"), []byte(`
version: 1
name: panics
deterministic: `+det+`
stages:
  - {name: src, type: range, count: 200}
  - {name: b, type: boom, parallelism: 4}
  - {name: out, type: discard}
`), spec.Options{Catalog: reg})
			if diags.HasErrors() {
				t.Fatal(diags)
			}
			p, _ := plan.Compile(sp, reg, plan.Options{})
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			run, err := engine.Start(ctx, p, engine.Options{Registry: reg})
			if err != nil {
				t.Fatal(err)
			}
			_, err = run.Wait()
			var se *engine.StageError
			if !errors.As(err, &se) || se.Stage != "b" || !strings.Contains(err.Error(), "panic: assignment to entry in nil map") {
				t.Fatalf("err = %v, want stage b's panic (a deadline means the run hung)", err)
			}
		})
	}
}
