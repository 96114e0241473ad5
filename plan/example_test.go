package plan_test

import (
	"fmt"

	"github.com/piperun/piperun/plan"
	"github.com/piperun/piperun/spec"
	"github.com/piperun/piperun/stages"
)

// ExamplePlan_Diagnostics checks what piperun validate checks beyond the
// spec itself: here a shuffle of 1000 samples of 3.8 MiB each, written as
// the spec asks (optimize: false), under a budget of 8 MiB. The spec has
// no problem of its own, but its buffers do not fit: apply refuses it,
// where engine.Start would run it into a stall.
func ExamplePlan_Diagnostics() {
	reg := stages.Default()
	sp, diags := spec.Parse("tight.yaml", []byte(`version: 1
name: tight
optimize: false
resources: {memory: 8MiB}
stages:
  - {name: src, type: range, count: 5000}
  - {name: big, type: map, set: {x: 'one_hot(index % 10, 1000000)'}}
  - {name: mix, type: shuffle, buffer: 1000}
  - {name: out, type: discard}
`), spec.Options{Catalog: reg})
	fmt.Println("spec problems:", len(diags.Errors()))
	p, err := plan.Compile(sp, reg, plan.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, d := range p.Diagnostics(false) {
		fmt.Println(d)
	}
	// Output:
	// spec problems: 0
	// tight.yaml:8:40: warning: stages[2].buffer: 1000 samples of about 3.82MiB each = 3.73GiB, more than 4MiB, the 1/2 of resources.memory (8MiB) a shuffle may fill: it will hold about 1 sample
	// tight.yaml:4:21: resources.memory: buffers need about 11.45MiB (src 205B, big 3.82MiB, mix 7.63MiB), more than resources.memory (8MiB); 11.45MiB fits
}
