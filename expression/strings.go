package expression

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"unicode/utf8"

	"github.com/expr-lang/expr/vm/runtime"
	"github.com/piperun/piperun/sample"
	"github.com/piperun/piperun/tensor"
)

// registerStrings registers what the patcher puts in place of the string
// operations expr's VM does not count against its limit: + between
// values that may be strings (__concat where both are known to be,
// __add where one is typed only at run time) and replace. Each refuses a
// result longer than the run's memory budget before making it: a reduce
// that doubled a string 40 times grew the process to 24 GB and the
// kernel's out-of-memory killer.
func registerStrings(r *Registry) {
	r.Register(&Func{
		Name: "__concat", Signature: "x + y", MinArgs: 2, MaxArgs: 2,
		Check: func(a []Arg) (sample.Type, error) {
			return sample.TString, plusCheck(a)
		},
		Returns: reflect.TypeOf(""),
		Impl: func(_ *Call, a []any) (any, error) {
			x, y := a[0].(string), a[1].(string)
			if err := stringFits(int64(len(x)) + int64(len(y))); err != nil {
				return nil, err
			}
			return x + y, nil
		},
	})
	r.Register(&Func{
		Name: "__add", Signature: "x + y", MinArgs: 2, MaxArgs: 2,
		Check: func(a []Arg) (sample.Type, error) {
			return sample.TAny, plusCheck(a)
		},
		Impl: func(_ *Call, a []any) (v any, err error) {
			if x, ok := a[0].(string); ok {
				if y, ok := a[1].(string); ok {
					if err := stringFits(int64(len(x)) + int64(len(y))); err != nil {
						return nil, err
					}
					return x + y, nil
				}
			}
			// expr's own +, which panics on operands it cannot add.
			defer recovered(&err)
			return runtime.Add(a[0], a[1]), nil
		},
	})
	r.Register(&Func{
		Name: "__replace", Signature: "replace(s, old, new[, n])", MinArgs: 3, MaxArgs: 4,
		Check: func(a []Arg) (sample.Type, error) {
			// What expr's own replace checked, before the patch took it.
			for i, x := range a {
				want, ok := sample.String, x.Type.Kind == sample.String || x.Type.Kind == sample.Any
				if i == 3 {
					want, ok = sample.Int, x.Type.Kind == sample.Int || x.Type.Kind == sample.Any
				}
				if !ok {
					return sample.TAny, argErrorf(i, "must be %s, got %s", sample.Type{Kind: want}, x.Type)
				}
			}
			return sample.TString, nil
		},
		Returns: reflect.TypeOf(""),
		Impl: func(_ *Call, a []any) (any, error) {
			s, ok1 := a[0].(string)
			old, ok2 := a[1].(string)
			repl, ok3 := a[2].(string)
			if !ok1 || !ok2 || !ok3 {
				return nil, fmt.Errorf("s, old and new must be strings, got %s, %s and %s", valueWord(a[0]), valueWord(a[1]), valueWord(a[2]))
			}
			n := -1
			if len(a) == 4 {
				n = runtime.ToInt(a[3])
			}
			// What strings.Replace makes: an empty old matches before
			// each rune and at the end.
			count := strings.Count(s, old)
			if old == "" {
				count = utf8.RuneCountInString(s) + 1
			}
			if n >= 0 && n < count {
				count = n
			}
			if err := stringFits(int64(len(s)) + int64(count)*(int64(len(repl))-int64(len(old)))); err != nil {
				return nil, err
			}
			return strings.Replace(s, old, repl, n), nil
		},
	})
	r.Register(&Func{
		Name: "__toBase64", Signature: "toBase64(s)", MinArgs: 1, MaxArgs: 1,
		Check: func(a []Arg) (sample.Type, error) {
			if k := a[0].Type.Kind; k != sample.String && k != sample.Any {
				return sample.TAny, argErrorf(0, "must be string, got %s", a[0].Type)
			}
			return sample.TString, nil
		},
		Returns: reflect.TypeOf(""),
		Impl: func(_ *Call, a []any) (any, error) {
			s, ok := a[0].(string)
			if !ok {
				return nil, fmt.Errorf("s must be a string, got %s", valueWord(a[0]))
			}
			if err := stringFits(int64(base64.StdEncoding.EncodedLen(len(s)))); err != nil {
				return nil, err
			}
			return base64.StdEncoding.EncodeToString([]byte(s)), nil
		},
	})
	r.Register(&Func{
		Name: "__toJSON", Signature: "toJSON(v)", MinArgs: 1, MaxArgs: 1,
		Check: func([]Arg) (sample.Type, error) {
			return sample.TString, nil
		},
		Returns: reflect.TypeOf(""),
		Impl: func(_ *Call, a []any) (any, error) {
			if n, ok := jsonBound(reflect.ValueOf(a[0]), 0); ok {
				if err := jsonFits(n); err != nil {
					return nil, err
				}
			}
			// As expr's own toJSON writes it.
			b, err := json.MarshalIndent(a[0], "", "  ")
			if err != nil {
				return nil, err
			}
			if err := stringFits(int64(len(b))); err != nil {
				return nil, err
			}
			return string(b), nil
		},
	})
}

// jsonFits is nil, or an error saying that JSON text of up to n bytes may
// be more than the run's memory budget allows any value to be.
func jsonFits(n int64) error {
	if limit := maxValue.Load(); n > limit {
		return fmt.Errorf("its text may take up to %s, more than %s", byteWords(n), valueBound(limit))
	}
	return nil
}

// jsonBound bounds the bytes of v written as toJSON writes it, indented
// at depth, without writing it: each level of toJSON(toJSON(…)) doubles
// the backslashes, and ten of them made 4 GB. ok is false for a value
// whose text it cannot bound (a struct), which is measured once written.
func jsonBound(v reflect.Value, depth int) (n int64, ok bool) {
	const number = 32 // the longest float64, int64 or uint64, or a word
	indent := int64(2*depth + 4)
	switch v.Kind() {
	case reflect.Invalid, reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Float32, reflect.Float64:
		return number, true
	case reflect.String:
		return 6*int64(v.Len()) + 2, true // \u00XX for the worst byte
	case reflect.Interface, reflect.Pointer:
		if v.IsNil() {
			return number, true
		}
		if t, ok := v.Interface().(*tensor.Tensor); ok {
			// Its fields, Data in base64: the largest value an
			// expression holds.
			return 4*int64(len(t.Data))/3 + 32*int64(len(t.Shape)) + 128, true
		}
		if v.Kind() == reflect.Pointer {
			return 0, false
		}
		return jsonBound(v.Elem(), depth)
	case reflect.Slice, reflect.Array:
		if v.Type().Elem().Kind() == reflect.Uint8 {
			return 4*int64(v.Len())/3 + 8, true // base64
		}
		n = 2 + indent
		for i := range v.Len() {
			e, ok := jsonBound(v.Index(i), depth+1)
			if !ok {
				return 0, false
			}
			n += e + indent
		}
		return n, true
	case reflect.Map:
		n = 2 + indent
		for it := v.MapRange(); it.Next(); {
			k, ok := jsonBound(it.Key(), depth+1)
			e, ok2 := jsonBound(it.Value(), depth+1)
			if !ok || !ok2 {
				return 0, false
			}
			n += k + e + indent + 2
		}
		return n, true
	}
	return 0, false
}

// plusCheck refuses, at validate time, a + the patcher took from the
// inferrer where an operand is a tensor typed any for expr (cast's
// result, x[i]): it was a validate error before the patch.
func plusCheck(a []Arg) error {
	if a[0].Type.Kind == sample.Tensor || a[1].Type.Kind == sample.Tensor {
		return fmt.Errorf("operator + is not defined on tensors (got %s and %s); use tensor functions (to_float, normalize, cast)", a[0].Type, a[1].Type)
	}
	return nil
}

// stringFits is nil, or an error saying that a string of n bytes is more
// than the run's memory budget allows any value to be.
func stringFits(n int64) error {
	limit := maxValue.Load()
	if n <= limit {
		return nil
	}
	return fmt.Errorf("a string of %s would take more than %s", byteWords(n), valueBound(limit))
}

// valueBound names the bound on any value's bytes, limit, for messages.
func valueBound(limit int64) string {
	if limit == DefaultMaxValueBytes {
		return "the " + byteWords(limit) + " any value may take"
	}
	return "the run's memory budget (" + byteWords(limit) + ")"
}

// stringish reports whether a value of type t may be a string: a string,
// or a value typed only at run time.
func stringish(t reflect.Type) bool {
	return isAny(t) || t.Kind() == reflect.String
}
