package expression_test

import (
	"math"
	"strings"
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

// TestIntOfAFloatBeyondInt64: int() of a float that int64 cannot hold is
// an error, where expr's own gave -9223372036854775808 for 1e30 (found by
// a tf.data user's test; cast(x, "int64") saturates, as TensorFlow's
// does). Within the range it truncates as expr's does, and reads strings.
func TestIntOfAFloatBeyondInt64(t *testing.T) {
	in := sample.Schema{Fields: []sample.Field{{Name: "f", Type: sample.TFloat}, {Name: "a", Type: sample.TAny}}}
	for _, tc := range []struct {
		src  string
		f    float64
		a    any
		want any // an error's start, or the value
	}{
		{`int(f)`, 2.9, nil, 2},
		{`int(f)`, -2.9, nil, -2},
		{`int(f)`, 9.2e18, nil, 9200000000000000000},
		{`int(f)`, 1e30, nil, "int: 1e+30 is beyond int64's range"},
		{`int(f)`, -1e19, nil, "int: -1e+19 is beyond int64's range"},
		{`int(f)`, math.NaN(), nil, "int: NaN is no integer"},
		{`int(a)`, 0, 1e30, "int: 1e+30 is beyond int64's range"},
		{`int(a)`, 0, "42", 42},
		{`int(a)`, 0, int64(7), 7},
		{`int(1e30)`, 0, nil, "int: 1e+30 is beyond int64's range"},
	} {
		p, err := expression.Default().Compile(tc.src, in, sample.Any)
		if err != nil {
			t.Fatalf("%s: %v", tc.src, err)
		}
		got, err := p.Run(nil, map[string]any{"f": tc.f, "a": tc.a})
		if msg, ok := tc.want.(string); ok {
			if err == nil || !strings.HasPrefix(err.Error(), msg) {
				t.Errorf("%s of %v, %v: %v, %v; want error %s", tc.src, tc.f, tc.a, got, err, msg)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%s of %v, %v = %#v, %v; want %#v", tc.src, tc.f, tc.a, got, err, tc.want)
		}
	}
}
