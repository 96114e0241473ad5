package stages

import (
	"fmt"
	"testing"
	"time"

	"github.com/piperun/piperun/tensor"
)

// TestFeatureDefaults: a fixed-shape feature's default is a scalar that
// fills the shape or, as TensorFlow's default_value, a list of one value
// per element in row-major order (found by a data-path test: a list was
// refused); scalars and variable-length features take scalars only.
func TestFeatureDefaults(t *testing.T) {
	for _, tc := range []struct {
		dtype string
		shape []int
		def   any
		want  string
	}{
		{"int64", nil, 7, "7"},
		{"int64", []int{3}, 7, "[7 7 7]"},
		{"int64", []int{2, 2}, []any{1, 2, 3, 4}, "[1 2 3 4]"},
		{"float32", []int{2}, []any{1.5, 2}, "[1.5 2]"},
		{"float32", []int{2}, 0.25, "[0.25 0.25]"},
		{"string", []int{2}, []any{"a", "b"}, "[a b]"},
		{"bytes", []int{2}, "x", "[[120] [120]]"},
		{"int64", []int{-1}, 5, "[]"},
		{"string", []int{-1}, "z", "[]"},
		{"int64", []int{3}, []any{1, 2}, "error: default for shape [3] must be a scalar, a list of 3 values, or lists nested as the shape"},
		// Nested as the shape, as TensorFlow writes it.
		{"int64", []int{2, 2}, []any{[]any{1, 2}, []any{3, 4}}, "[1 2 3 4]"},
		{"float32", []int{2, 1, 2}, []any{[]any{[]any{1, 2}}, []any{[]any{3, 4}}}, "[1 2 3 4]"},
		{"int64", []int{2, 2}, []any{[]any{1, 2}, []any{3}}, "error: default for shape [2, 2] must be a scalar, a list of 4 values, or lists nested as the shape"},
		{"int64", []int{2, 2}, []any{[]any{1, 2}, 3, 4, 5}, "error: default for shape [2, 2] must be a scalar, a list of 4 values, or lists nested as the shape"},
		// A float32 scalar reads as the shortest decimal of its float32, as
		// a value from a record does (0.10000000149011612).
		{"float32", nil, 0.1, "0.1"},
		// A shape validate refuses is not sized (a panic).
		{"int64", []int{-2}, 1, "error: shape [-2] is not a valid shape"},
		{"int64", []int{2}, []any{1, 2.5}, "error: default for an int64 feature must be an integer, got number 2.5"},
		{"int64", nil, []any{1}, "error: default for a feature of shape [] must be a scalar, got a list"},
		{"float32", []int{-1}, []any{1.0}, "error: default for a feature of shape [-1] must be a scalar, got a list"},
		{"int64", []int{-1}, "x", `error: default for an int64 feature must be an integer, got string "x"`},
		// The value is named as YAML wrote it, not as Go prints it: 1.0
		// printed as "1" read as an integer refused for not being one.
		{"int64", nil, 1.0, "error: default for an int64 feature must be an integer, got number 1.0"},
		{"int64", nil, map[string]any{"k": 1}, "error: default for an int64 feature must be an integer, got a mapping"},
		{"float32", nil, true, "error: default for a float32 feature must be a number, got boolean true"},
		{"float32", []int{2}, []any{1.0, nil}, "error: default for a float32 feature must be a number, got null"},
		{"string", nil, 3, `error: default for a string feature must be a string, got integer 3: quote it ("3")`},
		{"bytes", nil, time.Date(2020, 1, 2, 0, 0, 0, 0, time.UTC), `error: default for a bytes feature must be a string, got date 2020-01-02: quote it ("2020-01-02")`},
		{"string", []int{2}, []any{"a", 2.5}, `error: default for a string feature must be a string, got number 2.5: quote it ("2.5")`},
	} {
		f := FeatureSpec{DType: tc.dtype, Shape: tc.shape, Default: tc.def}
		v, err := f.defaultValue()
		got := ""
		switch x := v.(type) {
		case *tensor.Tensor:
			if x.DType == tensor.Int64 {
				got = fmt.Sprint(x.Int64())
			} else {
				got = fmt.Sprint(x.Float32())
			}
		default:
			got = fmt.Sprint(x)
		}
		if err != nil {
			got = "error: " + err.Error()
		}
		if got != tc.want {
			t.Errorf("%s %v default %v: got %s, want %s", tc.dtype, tc.shape, tc.def, got, tc.want)
		}
	}
}
