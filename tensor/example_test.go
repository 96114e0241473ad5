package tensor_test

import (
	"fmt"

	"github.com/piperun/piperun/tensor"
)

// ExampleNew makes a tensor, writes through a typed view and casts it.
func ExampleNew() {
	t := tensor.New(tensor.Uint8, 2, 2)
	copy(t.Uint8(), []uint8{0, 64, 128, 255})
	f := t.Cast(tensor.Float32)
	fmt.Println(t, f, f.Float32())
	// Output: uint8[2 2] float32[2 2] [0 64 128 255]
}
