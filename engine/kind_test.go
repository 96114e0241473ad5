package engine_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"

	"github.com/piperun/piperun/engine"
	"github.com/piperun/piperun/plan"
	"github.com/piperun/piperun/sample"
	"github.com/piperun/piperun/spec"
	"github.com/piperun/piperun/stages"
)

type sinkOnly struct{ aborted *int }

func (sinkOnly) Write(context.Context, *sample.Sample) error { return nil }
func (sinkOnly) Commit() error                               { return nil }
func (s sinkOnly) Abort() error                              { *s.aborted++; return nil }

// TestStartRefusesAStageOfAnotherKind: a type whose Build returns nothing,
// or a kind its role does not take (a transform built as a sink), fails
// Start, naming the stage, the role and what was built, before any
// goroutine starts. An embedder's test saw the first fail only from Wait,
// and the second start, stall for two seconds and fail "stuck" with
// advice about a concat the spec did not have.
func TestStartRefusesAStageOfAnotherKind(t *testing.T) {
	aborted := 0
	for _, tc := range []struct {
		name  string
		built any
		want  string
	}{
		{"nothing", nil, `stage "x" (custom): type custom is a transform, but its Build returned nil and no error`},
		{"a sink", sinkOnly{aborted: &aborted}, `stage "x" (custom): type custom is a transform, but its Build returned engine_test.sinkOnly, a sink`},
		{"no kind", struct{}{}, `stage "x" (custom): type custom is a transform, but its Build returned struct {}, which is no stage kind (Source, Processor, Expander, Joiner or Sink)`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reg := rangeRegistry(&stages.Type{
				StageType: spec.StageType{Name: "custom", Role: spec.RoleTransform, NewConfig: func() any { return &passConfig{} }},
				Build:     func(*stages.Env, any) (any, error) { return tc.built, nil },
			})
			sp, diags := spec.Parse(filepath.Join(t.TempDir(), "s.yaml"), []byte(`
version: 1
name: kinds
stages:
  - {name: src, type: range, count: 10}
  - {name: x, type: custom}
  - {name: out, type: discard}
`), spec.Options{Catalog: reg})
			if diags.HasErrors() {
				t.Fatal(diags)
			}
			p, err := plan.Compile(sp, reg, plan.Options{})
			if err != nil {
				t.Fatal(err)
			}
			run, err := engine.Start(context.Background(), p, engine.Options{Registry: reg})
			if err == nil {
				run.Wait()
				t.Fatal("Start returned no error")
			}
			var se *engine.StageError
			if !errors.As(err, &se) || se.Stage != "x" || err.Error() != tc.want {
				t.Errorf("Start: %v\nwant %s", err, tc.want)
			}
		})
	}
	// The sink built and refused is aborted, as the stages built before
	// it are: it may have opened temporaries at Build.
	if aborted != 1 {
		t.Errorf("the refused sink was aborted %d times, want once", aborted)
	}
}
