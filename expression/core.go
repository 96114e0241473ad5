package expression

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"reflect"
	"slices"
	"strings"
	"syscall"
	"unicode/utf8"

	"github.com/expr-lang/expr/vm/runtime"
	"github.com/piperun/piperun/imageops"
	"github.com/piperun/piperun/sample"
	"github.com/piperun/piperun/tensor"
)

// The core functions: tensors and files. Image functions live in image.go.
func init() {
	r := defaultRegistry
	r.Register(&Func{
		Name: "shape", Signature: "shape(x)", Doc: "Dimensions of a tensor as a list of ints; [n] for a list of n elements, or a string or bytes of n bytes; [] for anything else (a number, a bool, null).",
		MinArgs: 1, MaxArgs: 1,
		Check: func(a []Arg) (sample.Type, error) { return sample.ListOf(sample.Int), nil },
		// The list is []any, the one list type a field holds (package
		// sample), but its elements are always int64, so expr may type it
		// []int64 and shape(x)[0] is an int64 to validate and plan.
		Returns: reflect.TypeOf([]int64(nil)),
		Impl: func(_ *Call, a []any) (any, error) {
			switch x := a[0].(type) {
			case *tensor.Tensor:
				out := make([]any, len(x.Shape))
				for i, d := range x.Shape {
					out[i] = int64(d)
				}
				return out, nil
			case []byte, string, [][]byte, []string, []any:
				return []any{int64(lenOf(x))}, nil
			}
			return []any{}, nil
		},
	})
	r.Register(&Func{
		Name: "cast", Signature: "cast(x, dtype)", Doc: "Converts a tensor or number to dtype (uint8, int32, int64, float32, float64); a list of numbers (nested: rectangular) becomes a tensor of its shape.",
		MinArgs: 2, MaxArgs: 2,
		Check: func(a []Arg) (sample.Type, error) {
			dt, err := constDType(a[1])
			if err != nil {
				return sample.TAny, err
			}
			switch a[0].Type.Kind {
			case sample.Tensor:
				return sample.Type{Kind: sample.Tensor, DType: dt, Shape: a[0].Type.Shape}, nil
			case sample.List:
				if e := a[0].Type.Elem; e == sample.String || e == sample.Bytes {
					return sample.TAny, argErrorf(0, "must be a tensor, a number or a list of numbers, got %s", a[0].Type)
				}
				return sample.Type{Kind: sample.Tensor, DType: dt}, nil
			case sample.Any:
				// A list from jsonl makes a tensor, a number a number.
				return sample.TAny, nil
			case sample.Int, sample.Float, sample.Bool:
				if dt.IsFloat() {
					return sample.TFloat, nil
				}
				return sample.TInt, nil
			}
			return sample.TAny, argErrorf(0, "must be a tensor or a number, got %s", a[0].Type)
		},
		Impl: func(_ *Call, a []any) (any, error) {
			name, _ := a[1].(string)
			dt, err := tensor.ParseDType(name)
			if err != nil {
				return nil, err
			}
			switch x := a[0].(type) {
			case *tensor.Tensor:
				return x.Cast(dt), nil
			case []any:
				return listTensor(x, dt)
			case int64, int, int32:
				// Exactly, not through a float64, and as a field's int64
				// is: expr computes index * 5000000000 as a Go int, which
				// went through a float64 and saturated where the field's
				// value wrapped.
				if !dt.IsFloat() {
					n, _ := toInt(x)
					t := tensor.New(dt, 1)
					t.SetInt(0, n)
					return t.IntAt(0), nil
				}
			}
			f, ok := toFloat(a[0])
			if !ok {
				return nil, fmt.Errorf("cast: argument 1 must be a tensor, a number or a list of numbers, got %s", valueWord(a[0]))
			}
			if dt == tensor.Float32 {
				return tensor.Float32Decimal(float32(f)), nil // rounded, and read as a float32 tensor's element is
			}
			if dt.IsFloat() {
				return f, nil
			}
			t := tensor.New(dt, 1)
			t.Set(0, f)
			return t.IntAt(0), nil // not through a float64: 2^63-1 would come back as 2^63
		},
	})
	r.Register(&Func{
		Name: "decode_raw", Signature: "decode_raw(bytes, dtype[, shape])",
		Doc:     "Reads bytes as the little-endian elements of a dtype tensor, as tf.io.decode_raw does: 1-D, or of shape (a literal list; one entry may be -1, inferred from the length).",
		MinArgs: 2, MaxArgs: 3,
		Returns: tensorPtr,
		Check: func(a []Arg) (sample.Type, error) {
			switch k := a[0].Type.Kind; k {
			case sample.Bytes, sample.String, sample.Any:
			default:
				return sample.TAny, argErrorf(0, "must be bytes, got %s", a[0].Type)
			}
			dt, err := constDType(a[1])
			if err != nil {
				return sample.TAny, err
			}
			if len(a) < 3 {
				return sample.TensorOf(dt, -1), nil
			}
			if _, list := a[2].Const.([]any); !a[2].IsConst || !list {
				return sample.TAny, fmt.Errorf("shape must be a literal list of dimensions, e.g. [224, 224, 3]")
			}
			shape, ok := intList(a[2].Const)
			if !ok {
				return sample.TAny, fmt.Errorf("shape %v: dimensions must be integers", a[2].Const)
			}
			if err := checkRawShape(shape); err != nil {
				return sample.TAny, err
			}
			// Known dimensions whose product is past any buffer would
			// otherwise reach plan as a tiny estimate.
			n := dt.Size()
			for _, d := range shape {
				if d > 0 && n > math.MaxInt/d && !slices.Contains(shape, 0) {
					return sample.TAny, fmt.Errorf("shape %v holds more %s elements than memory does", shape, dt)
				}
				n *= max(d, 1)
			}
			return sample.TensorOf(dt, shape...), nil
		},
		Impl: func(_ *Call, a []any) (any, error) {
			name, _ := a[1].(string)
			dt, err := tensor.ParseDType(name)
			if err != nil {
				return nil, fmt.Errorf("decode_raw: %w", err)
			}
			shape := []int{-1}
			if len(a) == 3 {
				var ok bool
				if shape, ok = intList(a[2]); !ok {
					return nil, fmt.Errorf("decode_raw: shape must be a list of integers")
				}
				if err := checkRawShape(shape); err != nil {
					return nil, fmt.Errorf("decode_raw: %w", err)
				}
			}
			switch x := a[0].(type) {
			case []byte:
				return decodeRaw(x, dt, shape)
			case string:
				return decodeRaw(x, dt, shape)
			}
			return nil, fmt.Errorf("decode_raw: argument 1 must be bytes, got %s", valueWord(a[0]))
		},
	})
	r.Register(&Func{
		Name: "one_hot", Signature: "one_hot(i, n)", Doc: "A float32 vector of length n with 1 at index i.",
		MinArgs: 2, MaxArgs: 2,
		Returns: tensorPtr,
		Check: func(a []Arg) (sample.Type, error) {
			if err := wantKind(a, 0, sample.Int); err != nil {
				return sample.TAny, err
			}
			n, ok := constInt(a[1])
			if !ok {
				if err := wantKind(a, 1, sample.Int); err != nil {
					return sample.TAny, err
				}
				return sample.TensorOf(tensor.Float32, -1), nil
			}
			if n < 1 {
				return sample.TAny, fmt.Errorf("n must be at least 1, got %d", n)
			}
			if i, ok := constInt(a[0]); ok && (i < 0 || i >= n) {
				return sample.TAny, fmt.Errorf("index %d out of range [0, %d)", i, n)
			}
			return sample.TensorOf(tensor.Float32, n), nil
		},
		Impl: func(_ *Call, a []any) (any, error) {
			i, ok1 := toInt(a[0])
			n, ok2 := toInt(a[1])
			if !ok1 || !ok2 {
				return nil, fmt.Errorf("one_hot: arguments must be integers, got %s and %s", typeName(a[0]), typeName(a[1]))
			}
			if n < 1 || i < 0 || i >= n {
				return nil, fmt.Errorf("one_hot: index %d out of range [0, %d)", i, n)
			}
			if err := sizeFits(tensor.Float32, int(n)); err != nil {
				return nil, fmt.Errorf("one_hot: n %d: %w", n, err)
			}
			t := tensor.New(tensor.Float32, int(n))
			t.Float32()[i] = 1
			return t, nil
		},
	})
	r.Register(&Func{
		Name: "read_file", Signature: "read_file(path)", Doc: "The contents of a file as bytes.",
		MinArgs: 1, MaxArgs: 1,
		Returns: reflect.TypeOf([]byte(nil)),
		Check: func(a []Arg) (sample.Type, error) {
			return sample.TBytes, wantKind(a, 0, sample.String)
		},
		Impl: func(_ *Call, a []any) (any, error) {
			p, ok := a[0].(string)
			if !ok {
				return nil, fmt.Errorf("read_file: path must be a string, got %s", typeName(a[0]))
			}
			f, size, err := openWhole(p)
			if err != nil {
				return nil, err
			}
			defer f.Close()
			buf := make([]byte, size+1)
			n, err := io.ReadFull(f, buf)
			switch err {
			case io.ErrUnexpectedEOF, io.EOF:
				return buf[:n], nil
			case nil:
				return readGrown(f, p, buf)
			}
			return nil, err
		},
	})
	r.Register(&Func{
		Name: "__read_file_pooled", Signature: "read_file(path)",
		MinArgs: 1, MaxArgs: 1,
		Check: func(a []Arg) (sample.Type, error) {
			return sample.TBytes, wantKind(a, 0, sample.String)
		},
		Impl: func(_ *Call, a []any) (any, error) {
			p, ok := a[0].(string)
			if !ok {
				return nil, fmt.Errorf("read_file: path must be a string, got %s", typeName(a[0]))
			}
			return readPooled(p)
		},
	})
	r.Register(&Func{
		Name: "__at", Signature: "x[i]", MinArgs: 2, MaxArgs: 2,
		Check: func(a []Arg) (sample.Type, error) {
			t := a[0].Type
			switch k := a[1].Type.Kind; {
			case t.Kind == sample.Tensor && k != sample.Int && k != sample.Any:
				return sample.Type{}, fmt.Errorf("a tensor's index must be an integer, got %s", a[1].Type)
			}
			switch {
			case t.Kind == sample.Any:
				return sample.TAny, nil
			case t.Kind == sample.String:
				if k := a[1].Type.Kind; k != sample.Int && k != sample.Any {
					return sample.Type{}, fmt.Errorf("a string's index must be an integer, got %s", a[1].Type)
				}
				return sample.TString, nil
			case t.Kind != sample.Tensor:
				return sample.Type{}, fmt.Errorf("cannot index %s: only tensors and lists take x[i]", t)
			case t.Shape == nil: // rank unknown: a tensor or a number
				return sample.TAny, nil
			case len(t.Shape) == 0:
				return sample.Type{}, fmt.Errorf("cannot index a scalar tensor")
			}
			// A constant index past a known first dimension would fail
			// every sample.
			if i, ok := constInt(a[1]); ok && t.Shape[0] >= 0 && (i >= t.Shape[0] || i < -t.Shape[0]) {
				return sample.Type{}, fmt.Errorf("index %d out of range for %s", i, t)
			}
			switch {
			case len(t.Shape) > 1:
				return sample.TensorOf(t.DType, t.Shape[1:]...), nil
			case t.DType.IsFloat():
				return sample.TFloat, nil
			}
			return sample.TInt, nil
		},
		Impl: func(_ *Call, a []any) (v any, err error) {
			if s, ok := a[0].(string); ok {
				return charAt(s, a[1])
			}
			t, ok := a[0].(*tensor.Tensor)
			if !ok {
				// A value typed only at run time (cast's result, $env[k])
				// that is not a tensor is indexed as expr indexes it.
				defer recovered(&err)
				return runtime.Fetch(a[0], a[1]), nil
			}
			if t == nil {
				return nil, fmt.Errorf("cannot index a nil tensor")
			}
			i, ok := toInt(a[1])
			if !ok {
				return nil, fmt.Errorf("a tensor's index must be an integer, got %s", valueWord(a[1]))
			}
			if len(t.Shape) == 0 {
				return nil, fmt.Errorf("cannot index a scalar tensor")
			}
			n := int64(t.Shape[0])
			if i < 0 {
				i += n
			}
			if i < 0 || i >= n {
				return nil, fmt.Errorf("index %d out of range for %s", i, t)
			}
			if len(t.Shape) == 1 {
				if t.DType == tensor.Float32 {
					// As a float32 scalar reads (parse_example): x[0] ==
					// 0.29166666 was false where TensorFlow's is true.
					return tensor.Float32Decimal(t.Float32()[i]), nil
				}
				if t.DType.IsFloat() {
					return t.At(int(i)), nil
				}
				return t.IntAt(int(i)), nil
			}
			row := len(t.Data) / t.Shape[0]
			return tensor.FromBytes(t.DType, t.Shape[1:], append([]byte(nil), t.Data[int(i)*row:(int(i)+1)*row]...))
		},
	})
	registerEquality(r)
	registerIn(r)
	registerPython(r)
	registerStrings(r)
	registerNumbers(r)
	r.Register(&Func{
		Name: "__notensor", Signature: "a builtin's argument", MinArgs: 2, MaxArgs: 2,
		Check: func(a []Arg) (sample.Type, error) { return a[0].Type, nil },
		Impl: func(_ *Call, a []any) (any, error) {
			if t, ok := a[0].(*tensor.Tensor); ok {
				return nil, fmt.Errorf("%v: not defined on tensors (got %s); index it (x[0]) or use the tensor functions", a[1], valueWord(t))
			}
			return a[0], nil
		},
	})
	r.Register(&Func{
		Name: "__envget", Signature: "$env[name]", MinArgs: 2, MaxArgs: 2,
		Check: func(a []Arg) (sample.Type, error) {
			if k := a[1].Type.Kind; k != sample.String && k != sample.Any {
				return sample.Type{}, fmt.Errorf("$env[…] takes a field's name, a string; got %s", a[1].Type)
			}
			return sample.TAny, nil
		},
		Impl: func(_ *Call, a []any) (any, error) {
			k, ok := a[1].(string)
			if !ok {
				return nil, fmt.Errorf("$env[…] takes a field's name, a string; got %s", valueWord(a[1]))
			}
			if m, ok := a[0].(map[string]any); ok && k != CtxVar {
				return m[k], nil
			}
			return nil, nil // no such field, as expr reads one
		},
	})
	r.Register(&Func{
		Name: "__envhas", Signature: "name in $env", MinArgs: 2, MaxArgs: 2,
		Check: func(a []Arg) (sample.Type, error) {
			if k := a[1].Type.Kind; k != sample.String && k != sample.Any {
				return sample.Type{}, fmt.Errorf("in $env takes a field's name, a string; got %s", a[1].Type)
			}
			return sample.TBool, nil
		},
		Returns: reflect.TypeOf(true),
		Impl: func(_ *Call, a []any) (any, error) {
			k, _ := a[1].(string)
			m, _ := a[0].(map[string]any)
			_, ok := m[k]
			return ok && k != CtxVar, nil
		},
	})
	r.Register(&Func{
		Name: "__field", Signature: "x.name", MinArgs: 2, MaxArgs: 2,
		Check: func(a []Arg) (sample.Type, error) {
			if a[0].Type.Kind == sample.Tensor {
				return sample.Type{}, tensorField(a[1].Const)
			}
			return sample.TAny, nil
		},
		Impl: func(_ *Call, a []any) (v any, err error) {
			if _, ok := a[0].(*tensor.Tensor); ok {
				return nil, tensorField(a[1])
			}
			defer recovered(&err)
			return runtime.Fetch(a[0], a[1]), nil
		},
	})
	r.Register(&Func{
		Name: "__string", Signature: "string(x)", MinArgs: 1, MaxArgs: 1,
		Check:   func(a []Arg) (sample.Type, error) { return sample.TString, nil },
		Returns: reflect.TypeOf(""),
		Impl: func(_ *Call, a []any) (any, error) {
			switch x := a[0].(type) {
			case []byte:
				return string(x), nil
			case *tensor.Tensor:
				return valueWord(x), nil // not the Go struct's fields, as expr's own gave
			}
			if s, ok := pyString(a[0]); ok {
				return s, nil
			}
			return fmt.Sprintf("%v", a[0]), nil // expr's own string
		},
	})
	r.Register(&Func{
		Name: "__len", Signature: "len(x)", MinArgs: 1, MaxArgs: 1,
		Check: func(a []Arg) (sample.Type, error) { return sample.TInt, nil },
		// int, as expr's own len: expr compiles == between two ints to an
		// opcode that asserts int.
		Returns: reflect.TypeOf(0),
		Impl: func(_ *Call, a []any) (any, error) {
			t, ok := a[0].(*tensor.Tensor)
			if !ok {
				// An argument whose type was unknown at compile time
				// and is no tensor: what expr's len does.
				return exprLen(a[0])
			}
			if len(t.Shape) == 0 {
				return 1, nil
			}
			return t.Shape[0], nil
		},
	})
}

// listTensor makes a tensor of dtype dt from a list of numbers (a jsonl
// field such as "bbox": [10, 20.5, 30, 40], or an expression's list),
// nested lists giving more dimensions: what tf.constant does with a list.
func listTensor(l []any, dt tensor.DType) (*tensor.Tensor, error) {
	var shape []int
	for v := any(l); ; {
		x, ok := v.([]any)
		if !ok {
			break
		}
		shape = append(shape, len(x))
		if len(x) == 0 {
			break
		}
		v = x[0]
	}
	t := tensor.New(dt, shape...)
	n := 0
	var fill func(v any, depth int, at string) error
	fill = func(v any, depth int, at string) error {
		if depth < len(shape) {
			x, ok := v.([]any)
			first := "x" + strings.Repeat("[0]", depth)
			switch {
			case !ok:
				return fmt.Errorf("cast: the list is not rectangular: %s is %s, %s a list of %d", at, valueWord(v), first, shape[depth])
			case len(x) != shape[depth]:
				return fmt.Errorf("cast: the list is not rectangular: %s has length %d, %s %d", at, len(x), first, shape[depth])
			}
			for i, e := range x {
				if err := fill(e, depth+1, fmt.Sprintf("%s[%d]", at, i)); err != nil {
					return err
				}
			}
			return nil
		}
		switch x := v.(type) {
		case int64:
			t.SetInt(n, x)
		case int:
			t.SetInt(n, int64(x))
		case float64:
			t.Set(n, x)
		case float32:
			t.Set(n, float64(x))
		case bool:
			if x {
				t.SetInt(n, 1)
			} else {
				t.SetInt(n, 0)
			}
		default:
			return fmt.Errorf("cast: element %s is %s, not a number", at, valueWord(v))
		}
		n++
		return nil
	}
	if err := fill(l, 0, "x"); err != nil {
		return nil, err
	}
	return t, nil
}

// registerEquality registers __eq and __ne, which the patcher puts in
// place of == and != where an operand's type is known only at run time
// (a field of a jsonl source, x[i] of a tensor of unknown rank). expr's own
// == is false for a tensor against anything, so `label == 1` on a batched
// label would filter out every sample without a word; these fail instead,
// as validate does where the type is known.
func registerEquality(r *Registry) {
	for _, op := range []string{"==", "!="} {
		r.Register(&Func{
			Name: operatorFuncs[op], Signature: "x " + op + " y",
			MinArgs: 2, MaxArgs: 2,
			Check: func(a []Arg) (sample.Type, error) {
				if a[0].Type.Kind == sample.Tensor || a[1].Type.Kind == sample.Tensor {
					return sample.Type{}, tensorCompared(op, a[0].Type.String(), a[1].Type.String())
				}
				return sample.TBool, nil
			},
			// bool, so that `x == 1 && y` still compiles to expr's and.
			Returns: reflect.TypeOf(true),
			Impl: func(_ *Call, a []any) (any, error) {
				_, lt := a[0].(*tensor.Tensor)
				_, rt := a[1].(*tensor.Tensor)
				if lt || rt {
					return nil, tensorCompared(op, valueWord(a[0]), valueWord(a[1]))
				}
				eq := runtime.Equal(a[0], a[1])
				return eq == (op == "=="), nil
			},
		})
	}
}

// registerIn registers __in, which the patcher puts in place of `x in y`
// where an operand's type is known only at run time: expr's in is false,
// not an error, for a tensor, so `label in [1, 2]` after a batch filtered
// out every sample.
func registerIn(r *Registry) {
	r.Register(&Func{
		Name: "__in", Signature: "x in y",
		MinArgs: 2, MaxArgs: 2,
		Check: func(a []Arg) (sample.Type, error) {
			if a[0].Type.Kind == sample.Tensor || a[1].Type.Kind == sample.Tensor {
				return sample.Type{}, tensorIn(a[0].Type.String(), a[1].Type.String())
			}
			return sample.TBool, nil
		},
		Returns: reflect.TypeOf(true),
		Impl: func(_ *Call, a []any) (v any, err error) {
			_, lt := a[0].(*tensor.Tensor)
			_, rt := a[1].(*tensor.Tensor)
			if lt || rt {
				return nil, tensorIn(valueWord(a[0]), valueWord(a[1]))
			}
			if _, ok := a[1].(string); ok {
				// Python's sub in s.
				return nil, fmt.Errorf("operator in is not defined on a string: to find a substring write contains(s, sub)")
			}
			defer recovered(&err)
			return runtime.In(a[0], a[1]), nil
		},
	})
}

// tensorField is the error for x.name with x a tensor: its Go fields hand
// out the buffer a pool may reuse.
func tensorField(name any) error {
	return fmt.Errorf("a tensor has no fields or methods (.%v): use the expression functions (shape, cast, x[i], …)", name)
}

// tensorIn is the error for in with a tensor operand.
func tensorIn(l, r string) error {
	return fmt.Errorf("operator in is not defined on tensors (got %s and %s); test elements, as in x[0] in [1, 2]", l, r)
}

// tensorCompared is the error for == or != with a tensor operand.
func tensorCompared(op, l, r string) error {
	return fmt.Errorf("operator %s is not defined on tensors (got %s and %s); compare elements, as in x[0] %s 1", op, l, r, op)
}

// ValueWord names a run-time value's type as plan and validate do:
// int64, tensor<uint8>[2 2 3], null.
func ValueWord(v any) string { return valueWord(v) }

// valueWord names a run-time value's type as plan and validate do.
func valueWord(v any) string {
	switch reflect.ValueOf(v).Kind() {
	case reflect.Invalid:
		return "null"
	case reflect.Map:
		return "map"
	}
	return sample.TypeOf(v).String()
}

// exprLen is expr's built-in len: the length of a list, map or array, the
// runes of a string.
func exprLen(v any) (int, error) {
	r := reflect.ValueOf(v)
	switch r.Kind() {
	case reflect.Array, reflect.Slice, reflect.Map:
		return r.Len(), nil
	case reflect.String:
		return utf8.RuneCountInString(r.String()), nil
	}
	return 0, fmt.Errorf("len: argument must be a list, string, bytes or tensor, got %s", typeName(v))
}

func lenOf(v any) int {
	switch x := v.(type) {
	case []byte:
		return len(x)
	case string:
		return len(x)
	case [][]byte:
		return len(x)
	case []string:
		return len(x)
	case []any:
		return len(x)
	}
	return 0
}

// recovered, deferred, turns a panic of expr's runtime (its way of
// refusing an operand: an index out of range, + of two kinds) into the
// call's error, keeping an error value as it is.
func recovered(err *error) {
	if r := recover(); r != nil {
		if e, ok := r.(error); ok {
			*err = e
		} else {
			*err = fmt.Errorf("%v", r)
		}
	}
}

// wantKind checks that argument i has kind k (or an unknown type).
func wantKind(a []Arg, i int, k sample.Kind) error {
	got := a[i].Type.Kind
	if got == k || got == sample.Any {
		return nil
	}
	if k == sample.Float && got == sample.Int {
		return nil
	}
	// expr's / gives a float even of whole numbers (8 / 2 is 4.0): a
	// size computed so is refused, and the fix is not plain.
	if f, isConst := a[i].Const.(float64); k == sample.Int && got == sample.Float && (!a[i].IsConst || isConst && f == math.Trunc(f)) {
		return argErrorf(i, "must be %s, got %s (a whole float such as 2.0, or a / of integers, which divides to a float even of 8 / 2: int(…) makes it whole)", k, a[i].Type)
	}
	return argErrorf(i, "must be %s, got %s", k, a[i].Type)
}

func constInt(a Arg) (int, bool) {
	if !a.IsConst {
		return 0, false
	}
	switch v := a.Const.(type) {
	case int:
		return v, true
	case int64:
		return int(v), true
	}
	return 0, false
}

func constDType(a Arg) (tensor.DType, error) {
	s, ok := a.Const.(string)
	if !a.IsConst || !ok {
		return tensor.Invalid, fmt.Errorf("dtype must be a string literal such as \"float32\"")
	}
	return tensor.ParseDType(s)
}

func toInt(v any) (int64, bool) {
	switch x := v.(type) {
	case int:
		return int64(x), true
	case int64:
		return x, true
	case int32:
		return int64(x), true
	case float64:
		if x == float64(int64(x)) {
			return int64(x), true
		}
	}
	return 0, false
}

func toFloat(v any) (float64, bool) {
	switch x := v.(type) {
	case int:
		return float64(x), true
	case int64:
		return float64(x), true
	case int32:
		return float64(x), true
	case float64:
		return x, true
	case float32:
		return float64(x), true
	case bool:
		if x {
			return 1, true
		}
		return 0, true
	}
	return 0, false
}

// decoders are the functions whose bytes argument, when it is a read_file
// call, the patcher turns into __read_file_pooled: they only decode the
// bytes, so the buffer can go back to the pool as soon as they return.
var decoders = map[string]bool{"decode_image": true, "__decode_resize": true, "__decode_resize_float": true, "__decode_rrc": true}

// fileBufs recycles the buffers of __read_file_pooled: without it every
// image's encoded bytes (100 KB or so) are garbage the collector must find.
var fileBufs imageops.Pool

// pooledFile is a file's contents in a buffer from fileBufs; the decoder
// that consumes it calls release.
type pooledFile struct {
	data []byte
	buf  []byte
}

func (f *pooledFile) release() {
	fileBufs.Put(f.buf)
	f.data, f.buf = nil, nil
}

// readPooled reads the file at path into a pooled buffer, as read_file
// does into a fresh one.
func readPooled(path string) (*pooledFile, error) {
	f, size, err := openWhole(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	// One spare byte tells a file that grew since Stat from one that did
	// not; one that grew is read on to its end, within the bound.
	buf := fileBufs.Get(int(size) + 1)
	n, err := io.ReadFull(f, buf)
	switch err {
	case io.ErrUnexpectedEOF, io.EOF:
		return &pooledFile{data: buf[:n], buf: buf}, nil
	case nil:
		data, err := readGrown(f, path, buf)
		fileBufs.Put(buf)
		if err != nil {
			return nil, err
		}
		return &pooledFile{data: data}, nil
	}
	fileBufs.Put(buf)
	return nil, err
}

// openWhole opens a file read_file may read whole, and gives its size: a
// regular file no larger than the bound on a value (the run's memory
// budget). Anything else is refused: /dev/zero named in a manifest grew a
// process to 24 GB outside a 64 MiB budget, and a named pipe blocked a run
// past Ctrl-C, in its open. The open does not wait for a
// pipe's writer (O_NONBLOCK), and what it opened is checked, not the name
// before: a pipe put in a file's place between the two would block.
func openWhole(path string) (*os.File, int64, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if errors.Is(err, syscall.ENXIO) {
		// What opening a socket says ("no such device or address").
		if st, serr := os.Stat(path); serr == nil && st.Mode()&fs.ModeSocket != 0 {
			return nil, 0, fmt.Errorf("read_file: %s is a socket, not a regular file: read_file reads files whole", path)
		}
	}
	if err != nil {
		return nil, 0, err
	}
	st, err := f.Stat()
	if err == nil && !st.Mode().IsRegular() {
		switch {
		case st.IsDir():
			err = fmt.Errorf("read_file: %s is a folder, not a file", path)
		default:
			kind := "device"
			if st.Mode()&fs.ModeNamedPipe != 0 {
				kind = "named pipe"
			}
			err = fmt.Errorf("read_file: %s is a %s, not a regular file: read_file reads files whole, and this would never end or could block", path, kind)
		}
	}
	if err == nil {
		err = fileFits(path, st.Size(), false)
	}
	if err != nil {
		f.Close()
		return nil, 0, err
	}
	return f, st.Size(), nil
}

// CheckFile says, without opening it, what read_file would refuse in
// the file at path: that it is missing, a folder, a device, a named pipe
// or a socket. validate checks the paths an expression names as text with
// it (a missing one passed, and failed every sample).
func CheckFile(path string) error {
	st, err := os.Stat(path)
	switch {
	case err != nil:
		return fmt.Errorf("read_file: %w", err)
	case st.IsDir():
		return fmt.Errorf("read_file: %s is a folder, not a file", path)
	case !st.Mode().IsRegular():
		kind := "device"
		switch {
		case st.Mode()&fs.ModeNamedPipe != 0:
			kind = "named pipe"
		case st.Mode()&fs.ModeSocket != 0:
			kind = "socket"
		}
		return fmt.Errorf("read_file: %s is a %s, not a regular file: read_file reads files whole", path, kind)
	}
	return nil
}

// readGrown reads the rest of a file that has grown past head, the
// bytes read so far, within the bound on a value.
func readGrown(f *os.File, path string, head []byte) ([]byte, error) {
	limit := maxValue.Load()
	rest, err := io.ReadAll(io.LimitReader(f, max(0, limit-int64(len(head))+1)))
	if err != nil {
		return nil, err
	}
	// Past the limit the read stopped: the file is longer than that.
	n := int64(len(head) + len(rest))
	if err := fileFits(path, n, n > limit); err != nil {
		return nil, err
	}
	return append(append([]byte(nil), head...), rest...), nil
}

// fileFits refuses a file of size bytes larger than the bound on a value;
// cut says the read stopped at size, short of the file's end.
func fileFits(path string, size int64, cut bool) error {
	limit := maxValue.Load()
	if size <= limit {
		return nil
	}
	s, bound := byteWords(size), byteWords(limit)
	if s == bound && !cut {
		s, bound = fmt.Sprintf("%d bytes", size), fmt.Sprintf("%d bytes", limit)
	}
	what := fmt.Sprintf("the run's memory budget (%s)", bound)
	if limit == DefaultMaxValueBytes {
		what = fmt.Sprintf("the %s any sample may take", bound)
	}
	if cut {
		return fmt.Errorf("read_file: %s takes more than %s", path, what)
	}
	return fmt.Errorf("read_file: %s takes %s, more than %s", path, s, what)
}

// checkRawShape accepts dimensions of at least 0 and at most one -1, and
// no -1 beside a 0, which no length determines.
func checkRawShape(shape []int) error {
	unknown, zero := 0, false
	for _, d := range shape {
		switch {
		case d == -1:
			unknown++
		case d == 0:
			zero = true
		case d < 0:
			return fmt.Errorf("shape %v has a negative dimension other than -1", shape)
		}
	}
	switch {
	case unknown > 1:
		return fmt.Errorf("shape %v has more than one -1; at most one dimension is inferred", shape)
	case unknown == 1 && zero:
		return fmt.Errorf("shape %v has a -1 beside a 0: no length tells what the -1 is", shape)
	}
	return nil
}

// littleEndian says tensor buffers, which hold elements in the machine's
// order, hold them as tf.io.decode_raw reads them by default.
var littleEndian = binary.NativeEndian.Uint16([]byte{1, 0}) == 1

// decodeRaw copies data into a tensor of dtype dt and shape, inferring a
// -1 dimension from the length. The copy is a recyclable buffer of the
// tensor pool, and the bytes it came from stay the caller's.
func decodeRaw[B []byte | string](data B, dt tensor.DType, shape []int) (*tensor.Tensor, error) {
	size := dt.Size()
	if !littleEndian && size > 1 {
		return nil, fmt.Errorf("decode_raw: %s elements are read little-endian, and this machine is big-endian", dt)
	}
	if len(data)%size != 0 {
		return nil, fmt.Errorf("decode_raw: %d bytes are not a whole number of %s elements (%d bytes each)", len(data), dt, size)
	}
	n := len(data) / size
	// known is the product of the given dimensions, unless it would not
	// fit an int in bytes (over), when it cannot match the data anyway.
	known, at, zero, over := 1, -1, false, false
	for i, d := range shape {
		switch {
		case d == -1:
			at = i
		case d == 0:
			zero = true
		case known > math.MaxInt/size/d:
			over = true
		default:
			known *= d
		}
	}
	if zero {
		known, over = 0, false
	}
	out := append([]int(nil), shape...)
	switch {
	case at >= 0 && (known == 0 || over || n%known != 0):
		return nil, fmt.Errorf("decode_raw: %d %s elements (%d bytes) do not fill shape %v", n, dt, len(data), shape)
	case at >= 0:
		out[at] = n / known
	case over:
		return nil, fmt.Errorf("decode_raw: shape %v holds more elements than memory does, got %d bytes", shape, len(data))
	case known != n:
		return nil, fmt.Errorf("decode_raw: shape %v holds %d %s elements (%d bytes), got %d bytes", shape, known, dt, known*size, len(data))
	}
	t := tensor.Alloc(dt, out...)
	copy(t.Data, data)
	return t, nil
}
