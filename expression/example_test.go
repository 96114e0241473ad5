package expression_test

import (
	"fmt"

	"github.com/piperun/piperun/expression"
	"github.com/piperun/piperun/sample"
	"github.com/piperun/piperun/tensor"
)

// ExampleRegistry_Compile compiles an expression once against a schema, then
// runs it on a sample's fields.
func ExampleRegistry_Compile() {
	in := sample.Schema{Fields: []sample.Field{{Name: "label", Type: sample.TInt}}}
	p, err := expression.Default().Compile("one_hot(label, 4)", in, sample.Any)
	if err != nil {
		panic(err)
	}
	fmt.Println(p.Type)
	v, err := p.Run(nil, map[string]any{"label": int64(2)})
	if err != nil {
		panic(err)
	}
	fmt.Println(v.(*tensor.Tensor).Float32())
	// Output:
	// tensor<float32>[4]
	// [0 0 1 0]
}
