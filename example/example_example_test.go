package example_test

import (
	"fmt"

	"github.com/piperun/piperun/example"
)

// Encode a tf.train.Example, then read back only the features a parse
// stage keeps, in wire order (keys sorted), without decoding the others.
func Example() {
	b := example.Marshal(&example.Example{Features: map[string]*example.Feature{
		"image/encoded":     {Kind: example.KindBytes, Bytes: [][]byte{[]byte("\xff\xd8...")}},
		"image/class/label": {Kind: example.KindInt64, Ints: []int64{7}},
		"image/bbox":        {Kind: example.KindFloat, Floats: []float32{0.1, 0.2, 0.9, 0.8}},
	}})
	fmt.Println(len(b), "bytes")

	want := map[string]int{"image/class/label": 0, "image/bbox": 1}
	err := example.ParseInto(b, want, func(idx int, f *example.Feature) error {
		fmt.Println(idx, f.Kind, f.Len(), f.Ints, f.Floats)
		return nil
	})
	fmt.Println(err)

	ex, err := example.Unmarshal(b)
	fmt.Println(len(ex.Features), err)
	// Output:
	// 94 bytes
	// 1 float_list 4 [] [0.1 0.2 0.9 0.8]
	// 0 int64_list 1 [7] []
	// <nil>
	// 3 <nil>
}
