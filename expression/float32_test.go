package expression_test

import (
	"math"
	"testing"

	"github.com/piperun/piperun/expression"
	"github.com/piperun/piperun/sample"
	"github.com/piperun/piperun/tensor"
)

// TestFloat32ValuesCompareAsWritten: a float32 reads as the number a spec
// writes for it, whether it comes as a scalar feature, a tensor's element
// or a cast: a scalar did (0.25454545), an element and a cast widened
// exactly (0.2916666567325592), so x[0] == 0.29166666 was false where
// TensorFlow's float32 comparison is true, and a filter on it passed
// nothing (found by a tf.data user's test).
func TestFloat32ValuesCompareAsWritten(t *testing.T) {
	x := tensor.New(tensor.Float32, 2)
	x.Float32()[0], x.Float32()[1] = 0.29166666, 17.65
	in := sample.Schema{Fields: []sample.Field{{Name: "x", Type: sample.TensorOf(tensor.Float32, 2)}, {Name: "any", Type: sample.TAny}}}
	for _, tc := range []struct {
		src  string
		want any
	}{
		{`x[0] == 0.29166666`, true},
		{`x[1] == 17.65`, true},
		{`x[-1]`, 17.65},
		{`any[0] == 0.29166666`, true},
		{`cast(0.25454545, "float32") == 0.25454545`, true},
		{`cast(0.25454545, "float32")`, 0.25454545},
		{`cast(1e39, "float32")`, math.Inf(1)},
		// A float64 stays as it is.
		{`cast(0.1, "float64") == 0.1`, true},
	} {
		p, err := expression.Default().Compile(tc.src, in, sample.Any)
		if err != nil {
			t.Fatalf("%s: %v", tc.src, err)
		}
		got, err := p.Run(nil, map[string]any{"x": x, "any": x})
		if err != nil || got != tc.want {
			t.Errorf("%s = %#v, %v; want %#v", tc.src, got, err, tc.want)
		}
	}
}
