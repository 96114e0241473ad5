package spec_test

import (
	"fmt"

	"github.com/piperun/piperun/spec"
	"github.com/piperun/piperun/stages"
)

// ExampleParse validates a spec held in memory and prints every problem
// with its position.
func ExampleParse() {
	src := `
version: 1
name: demo
stages:
  - {name: src, type: range, count: 10}
  - {name: m, type: map, set: {y: 'index + "x"'}, paralelism: 2}
  - {name: out, type: discard}
`
	_, diags := spec.Parse("demo.yaml", []byte(src), spec.Options{Catalog: stages.Default()})
	for _, d := range diags {
		fmt.Println(d)
	}
	// Output:
	// demo.yaml:6:42: stages[1].set.y: invalid operation: + (mismatched types int64 and string)
	// demo.yaml:6:51: stages[1].paralelism: unknown field "paralelism" (did you mean "parallelism"?)
}
