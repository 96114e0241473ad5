package sample_test

import (
	"fmt"

	"github.com/piperun/piperun/sample"
	"github.com/piperun/piperun/tensor"
)

// Build the static schema validate propagates through a pipeline, and
// normalize a value an expression returned to the field types samples
// hold.
func Example() {
	s := sample.Schema{}.
		With("image", sample.TensorOf(tensor.Uint8, -1, -1, 3)).
		With("label", sample.TInt)
	s = s.With("image", sample.TensorOf(tensor.Float32, 224, 224, 3)) // a map resized it
	fmt.Println(s)
	fmt.Println(s.EstimateBytes()) // 224×224×3 float32s and what the budget counts per sample and field

	v, err := sample.Normalize([]any{int32(1), float32(0.5)})
	fmt.Println(v, err)
	fmt.Println(sample.TypeOf(int32(7)))
	// Output:
	// {image: tensor<float32>[224 224 3], label: int64}
	// 602450
	// [1 0.5] <nil>
	// int64
}
