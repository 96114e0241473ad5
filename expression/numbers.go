package expression

import (
	"fmt"
	"math"
	"reflect"

	"github.com/expr-lang/expr/builtin"

	"github.com/piperun/piperun/sample"
)

// registerNumbers registers what the patcher puts in place of expr's int:
// a float that int64 cannot hold is an error, where expr's gave
// -9223372036854775808 for 1e30 (Go's conversion), a size or index
// silently wrong.
func registerNumbers(r *Registry) {
	r.Register(&Func{
		Name: "__int", Signature: "int(x)", MinArgs: 1, MaxArgs: 1,
		Check: func(a []Arg) (sample.Type, error) {
			// Patched in for a float or a value typed at run time only;
			// expr's checker refused other types before.
			return sample.TInt, nil
		},
		Returns: reflect.TypeOf(0),
		Impl: func(_ *Call, a []any) (v any, err error) {
			var f float64
			switch x := a[0].(type) {
			case float64:
				f = x
			case float32:
				f = float64(x)
			default:
				defer recovered(&err)
				return builtin.Int(a[0]), nil
			}
			switch {
			case math.IsNaN(f):
				return nil, fmt.Errorf("NaN is no integer")
			case f >= math.MaxInt64 || f < math.MinInt64:
				// MaxInt64 as a float64 is 2^63, one past it.
				return nil, fmt.Errorf("%g is beyond int64's range (±9.2e18): cast(x, \"int64\") saturates instead", f)
			}
			return int(f), nil
		},
	})
}
