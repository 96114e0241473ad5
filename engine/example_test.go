package engine_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"go.uber.org/zap"

	"github.com/piperun/piperun/engine"
	"github.com/piperun/piperun/plan"
	"github.com/piperun/piperun/spec"
	"github.com/piperun/piperun/stages"
)

// ExampleStart runs a pipeline whose map fails on one sample, skipped
// under on_error: skip and counted in the report with its cause, and
// whose sink's file appears when the run succeeds.
func ExampleStart() {
	dir, err := os.MkdirTemp("", "example")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)
	reg := stages.Default()
	sp, diags := spec.Parse(filepath.Join(dir, "p.yaml"), []byte(`version: 1
name: p
stages:
  - {name: src, type: range, count: 5}
  - name: inv
    type: map
    on_error: skip
    set: {rest: '7 % (index - 2)'}
  - {name: batch, type: batch, size: 2}
  - {name: out, type: write_jsonl, path: out.jsonl}
`), spec.Options{Catalog: reg})
	if len(diags) > 0 {
		fmt.Println(diags)
		return
	}
	p, err := plan.Compile(sp, reg, plan.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	run, err := engine.Start(context.Background(), p, engine.Options{Registry: reg, Log: zap.NewNop()})
	if err != nil {
		fmt.Println(err)
		return
	}
	rep, err := run.Wait()
	fmt.Println("error:", err)
	fmt.Println("batches:", rep.Sinks["out"].Batches, "samples:", rep.Sinks["out"].Samples)
	fmt.Println("skipped:", rep.Skipped["inv"])
	for _, cause := range rep.SkipCauses["inv"] {
		fmt.Println(strings.ReplaceAll(cause, dir, "DIR"))
	}
	out, _ := os.ReadFile(filepath.Join(dir, "out.jsonl"))
	fmt.Print(string(out))
	// Output:
	// error: <nil>
	// batches: 2 samples: 4
	// skipped: 1
	// sample 2 (epoch 0): set rest (DIR/p.yaml:8:17): integer division or modulo by zero (1:3)
	// {"index":[0,1],"rest":[-1,0]}
	// {"index":[3,4],"rest":[0,1]}
}
