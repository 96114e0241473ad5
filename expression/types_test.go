package expression_test

import (
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/piperun/piperun/expression"
	"github.com/piperun/piperun/sample"
	"github.com/piperun/piperun/tensor"
)

// TestTypesAndLen: what is built on a function call is typed (shape(x)[0]
// is an int64, not any, so that plan can size the field), and len works on
// a tensor whose type is known only at run time, as on one whose type is
// known at compile time: the length of its first dimension.
func TestTypesAndLen(t *testing.T) {
	in := sample.Schema{Fields: []sample.Field{
		{Name: "image", Type: sample.TensorOf(tensor.Uint8, -1, -1, 3)},
		{Name: "b", Type: sample.TBytes},
		{Name: "k", Type: sample.TString},
		{Name: "hw", Type: sample.ListOf(sample.Int)},
		{Name: "batched", Type: sample.Type{Kind: sample.Tensor, DType: tensor.Float32}}, // rank unknown
	}}
	env := func(k string) map[string]any {
		return map[string]any{
			"image": tensor.New(tensor.Uint8, 4, 5, 3),
			"scalar": func() *tensor.Tensor {
				s, _ := tensor.FromBytes(tensor.Float32, []int{}, make([]byte, 4))
				return s
			}(),
			"b": []byte("abc"), "s": "héllo", "l": []any{int64(1), "x"}, "i": int64(7),
			"k": k, "hw": []any{int64(4), int64(5)},
			"batched": tensor.New(tensor.Float32, 2, 3),
		}
	}
	for _, tc := range []struct {
		src, key string
		typ      string // the inferred type
		want     any    // the value, or the run-time error
		err      string
	}{
		{src: `shape(image)`, typ: "list<int64>", want: []any{int64(4), int64(5), int64(3)}},
		{src: `shape(image)[0]`, typ: "int64", want: int64(4)},
		// expr's arithmetic gives int; map normalizes it to int64.
		{src: `shape(image)[1] * 2 + 1`, typ: "int64", want: 11},
		{src: `shape(image)[2] == 3`, typ: "bool", want: true},
		{src: `shape(b)[0]`, typ: "int64", want: int64(3)},
		{src: `hw[1]`, typ: "int64", want: int64(5)},
		{src: `len(read_file("/dev/null"))`, typ: "int64", err: "read_file: /dev/null is a device, not a regular file"},
		// A call giving a tensor is indexed as a tensor field is.
		{src: `one_hot(2, 4)[2]`, typ: "float64", want: float64(1)},
		// Chained indexes go down the dimensions.
		{src: `shape(image[1][2])`, typ: "list<int64>", want: []any{int64(3)}},
		{src: `image[1][2][0]`, typ: "int64", want: int64(0)},
		// Indexes on values typed only at run time: a tensor of unknown
		// rank, cast's result, $env by a computed key (a tensor or a list).
		{src: `batched[1][2]`, typ: "any", want: float64(0)},
		{src: `cast(one_hot(1, 3), "uint8")[1]`, typ: "int64", want: int64(1)},
		{src: `$env[k][0][1][2]`, key: "image", typ: "any", want: int64(0)},
		{src: `$env[k][1]`, key: "l", typ: "any", want: "x"},
		{src: `$env[k][5]`, key: "l", typ: "any", err: "index out of range"},
		{src: `len(image)`, typ: "int64", want: 4},
		{src: `len(image) == 4`, typ: "bool", want: true},
		// $env by a key known only at run time.
		{src: `len($env[k])`, key: "image", typ: "int64", want: 4},
		{src: `len($env[k]) == 4`, key: "image", typ: "bool", want: true},
		{src: `len($env[k])`, key: "scalar", typ: "int64", want: 1},
		{src: `len($env[k])`, key: "b", typ: "int64", want: 3},
		{src: `len($env[k])`, key: "s", typ: "int64", want: 5},
		{src: `len($env[k])`, key: "l", typ: "int64", want: 2},
		{src: `len($env[k])`, key: "i", typ: "int64", err: "len: argument must be a list, string, bytes or tensor, got int64 (1:1)"},
		{src: `len("héllo")`, typ: "int64", want: 5},
		// map(x, f(#)) is a list of what f gives, so that a sink knows it
		// (write_tfrecord's advice for a key of two kinds).
		{src: `map(hw, float(#))`, typ: "list<float64>", want: []any{4.0, 5.0}},
		{src: `map(hw, # > 4)`, typ: "list<bool>", want: []any{false, true}},
		{src: `map(hw, string(#))`, typ: "list<string>", want: []any{"4", "5"}},
		{src: `map(hw, #)`, typ: "list<int64>", want: []any{int64(4), int64(5)}},
	} {
		p, err := expression.Default().Compile(tc.src, in, sample.Any)
		if err != nil {
			t.Errorf("%s: %v", tc.src, err)
			continue
		}
		if got := p.Type.String(); got != tc.typ {
			t.Errorf("%s: type %s, want %s", tc.src, got, tc.typ)
		}
		v, err := p.Run(nil, env(tc.key))
		switch {
		case tc.err != "":
			if err == nil || !strings.HasPrefix(err.Error(), tc.err) {
				t.Errorf("%s with k=%q: got %v, %v; want error %q", tc.src, tc.key, v, err, tc.err)
			}
		case err != nil:
			t.Errorf("%s with k=%q: %v", tc.src, tc.key, err)
		case !reflect.DeepEqual(v, tc.want):
			t.Errorf("%s with k=%q: got %#v, want %#v", tc.src, tc.key, v, tc.want)
		}
	}
}

// TestIndexPastTheRank: indexing the number a 1-D tensor's index gives is
// a compile error, not a run-time one.
func TestIndexPastTheRank(t *testing.T) {
	in := sample.Schema{Fields: []sample.Field{{Name: "img", Type: sample.TensorOf(tensor.Uint8, 8, 8, 3)}}}
	for _, tc := range []struct{ src, want string }{
		{`one_hot(2, 4)[0][0]`, "x[i]: cannot index float64: only tensors and lists take x[i] (line 1, column 17 of the expression)"},
		// A constant index past a known dimension, refused at validate
		// as every sample would fail (a user's test).
		{`img[100]`, "x[i]: index 100 out of range for tensor<uint8>[8 8 3] (line 1, column 4 of the expression)"},
		{`img[-9]`, "x[i]: index -9 out of range for tensor<uint8>[8 8 3] (line 1, column 4 of the expression)"},
		{`img[7][8]`, "x[i]: index 8 out of range for tensor<uint8>[8 3] (line 1, column 7 of the expression)"},
		{`img[-8][7][2]`, ""},
	} {
		_, err := expression.Default().Compile(tc.src, in, sample.Any)
		if tc.want == "" {
			if err != nil {
				t.Errorf("%s: %v", tc.src, err)
			}
			continue
		}
		if err == nil || err.Error() != tc.want {
			t.Errorf("%s: %v\nwant %s", tc.src, err, tc.want)
		}
	}
}

// TestNormalizeChannels: mean and std of the wrong length for an image whose
// channels are known fail at compile time, the count of values that fit
// said once for one channel ("want 1", not "want 1 or 1").
func TestNormalizeChannels(t *testing.T) {
	in := sample.Schema{Fields: []sample.Field{
		{Name: "gray", Type: sample.TensorOf(tensor.Float32, -1, -1, 1)},
		{Name: "rgb", Type: sample.TensorOf(tensor.Float32, -1, -1, 3)},
		{Name: "any", Type: sample.Type{Kind: sample.Tensor, DType: tensor.Float32}},
	}}
	for _, tc := range []struct{ src, err string }{
		{`normalize(gray, [0.5, 0.5, 0.5], 0.2)`, "normalize: mean has 3 values, want 1 for the image's 1 channel (line 1, column 1 of the expression)"},
		{`normalize(rgb, 0.5, [0.2, 0.2])`, "normalize: std has 2 values, want 1 or 3 for the image's 3 channels (line 1, column 1 of the expression)"},
		{`normalize(gray, 0.5, 0.2)`, ""},
		{`normalize(rgb, [0.5, 0.4, 0.3], [0.2, 0.2, 0.2])`, ""},
		// Constants float32 arithmetic turns into infinities (a new-user
		// test: 1e-50 was "std must not be 0").
		{`normalize(rgb, 0.5, 1e-50)`, "normalize: std 1e-50 is too small for float32: its reciprocal, which normalize multiplies by, overflows (the least is about 3e-39) (line 1, column 1 of the expression)"},
		{`normalize(rgb, 0.5, [0.2, 1e-40, 0.2])`, "normalize: std 1e-40 is too small for float32: its reciprocal, which normalize multiplies by, overflows (the least is about 3e-39) (line 1, column 1 of the expression)"},
		{`normalize(rgb, [0.5, 1e39, 0.5], 0.2)`, "normalize: mean 1e+39 is beyond float32's range (±3.4e38) (line 1, column 1 of the expression)"},
		{`normalize(rgb, 0.5, 0)`, "normalize: std must not be 0 (line 1, column 1 of the expression)"},
		{`normalize(rgb, 0.5, 1e-30)`, ""},
		// Channels known only at run time: checked then.
		{`normalize(any, [0.5, 0.4], 0.2)`, ""},
	} {
		if got := compileError(tc.src, in); got != tc.err {
			t.Errorf("%s:\ngot  %q\nwant %q", tc.src, got, tc.err)
		}
	}
}

// compileError is the error compiling src for in gives, "" for none.
func compileError(src string, in sample.Schema) string {
	if _, err := expression.Default().Compile(src, in, sample.Any); err != nil {
		return err.Error()
	}
	return ""
}

// TestUnknownNamesInArguments: a name that is neither a field nor a function
// is an error wherever it stands, also among the arguments of a call whose
// result type is declared (expr's patch passes type those calls and would
// not look at their arguments again).
func TestUnknownNamesInArguments(t *testing.T) {
	in := sample.Schema{Fields: []sample.Field{{Name: "path", Type: sample.TString}, {Name: "index", Type: sample.TInt}}}
	const funcs = "(piperun's functions: adjust_brightness, adjust_contrast, adjust_saturation, cast, center_crop, color_jitter, decode_image, decode_raw, flip_left_right, flip_up_down, grayscale, normalize, one_hot, random_crop, random_grayscale, random_resized_crop, read_file, resize, rot90, shape, to_float, transpose, uniform; expr's builtins, such as len, upper, round and filter, are listed at https://expr-lang.org/docs/language-definition)"
	for _, tc := range []struct{ src, want string }{
		{`read_file(nope)`, `unknown field "nope" (fields here: path, index) (line 1, column 11 of the expression)`},
		{`len(nope)`, `unknown field "nope" (fields here: path, index) (line 1, column 5 of the expression)`},
		{`resize(nope, 2, 2)`, `unknown field "nope" (fields here: path, index) (line 1, column 8 of the expression)`},
		{`one_hot(foo(1), 3)`, `unknown function foo ` + funcs + ` (line 1, column 9 of the expression)`},
		{`to_float(flipx(0.5))`, `unknown function flipx ` + funcs + ` (line 1, column 10 of the expression)`},
		{`decode_image(read_file(path), 3) | flipx(0.5) | to_float()`, `unknown function flipx ` + funcs + ` (line 1, column 36 of the expression)`},
		{`nope + 1`, `unknown field "nope" (fields here: path, index) (line 1, column 1 of the expression)`},
		// A name near one of piperun's functions, or one of expr's
		// builtins in another case, is suggested; sqrt is one letter
		// changed from the builtin sort, and is not.
		{`To_Float(index)`, `unknown function To_Float (did you mean to_float?) (line 1, column 1 of the expression)`},
		{`one_hot(tofloat(index), 3)`, `unknown function tofloat (did you mean to_float?) (line 1, column 9 of the expression)`},
		{`decode_image(read_file(path), 3) | resiz(2, 2)`, `unknown function resiz (did you mean resize?) (line 1, column 36 of the expression)`},
		{`LEN(path)`, `unknown function LEN (did you mean len?) (line 1, column 1 of the expression)`},
		{`sqrt(2.0)`, `unknown function sqrt ` + funcs + ` (line 1, column 1 of the expression)`},
		// One letter more or less, or two swapped, from a builtin: one
		// edit, but not the substitution that made sqrt sort.
		{`lenn(path)`, `unknown function lenn (did you mean len?) (line 1, column 1 of the expression)`},
		{`uper(path)`, `unknown function uper (did you mean upper?) (line 1, column 1 of the expression)`},
		{`lwoer(path)`, `unknown function lwoer (did you mean lower?) (line 1, column 1 of the expression)`},
		{`rond(1.5)`, `unknown function rond (did you mean round?) (line 1, column 1 of the expression)`},
	} {
		_, err := expression.Default().Compile(tc.src, in, sample.Any)
		if err == nil || err.Error() != tc.want {
			t.Errorf("%s: %v\nwant %s", tc.src, err, tc.want)
		}
	}
}

// TestOneHotConstantIndex: an index written as a number is checked
// against n by validate, as it fails every sample at run time.
func TestOneHotConstantIndex(t *testing.T) {
	in := sample.Schema{Fields: []sample.Field{{Name: "index", Type: sample.TInt}}}
	for _, tc := range []struct{ src, want string }{
		{`one_hot(5, 3)`, `one_hot: index 5 out of range [0, 3) (line 1, column 1 of the expression)`},
		{`one_hot(-1, 3)`, `one_hot: index -1 out of range [0, 3) (line 1, column 1 of the expression)`},
		{`one_hot(2, 3)`, ``},
		{`one_hot(index, 3)`, ``},
	} {
		if got := compileError(tc.src, in); got != tc.want {
			t.Errorf("%s:\ngot  %q\nwant %q", tc.src, got, tc.want)
		}
	}
}

// TestNowIsRefused: now() reads the clock, so a deterministic spec would
// give other samples on every run, without a word (a
// filter on now().UnixNano() % 2 passed validate).
func TestNowIsRefused(t *testing.T) {
	in := sample.Schema{Fields: []sample.Field{{Name: "index", Type: sample.TInt}}}
	const refused = "now() reads the clock, so the samples would differ from run to run; piperun's runs are reproducible (draw with the random functions, or store a date(…) of a fixed time)"
	for _, tc := range []struct{ src, want string }{
		{`now().UnixNano() % 2 == 0`, refused + ` (line 1, column 1 of the expression)`},
		{`index > 1 ? now().Nanosecond() : 0`, refused + ` (line 1, column 13 of the expression)`},
		{`date("2026-12-07").Unix()`, ``},
	} {
		if got := compileError(tc.src, in); got != tc.want {
			t.Errorf("%s:\ngot  %q\nwant %q", tc.src, got, tc.want)
		}
	}
}

// TestPlainTypeNames: checker messages name types as a spec does, and an
// operator on a tensor says what to use instead.
func TestPlainTypeNames(t *testing.T) {
	in := sample.Schema{Fields: []sample.Field{{Name: "img", Type: sample.Type{Kind: sample.Tensor}}, {Name: "l", Type: sample.ListOf(sample.Any)}, {Name: "by", Type: sample.TBytes}}}
	for _, tc := range []struct{ src, want string }{
		{`img + 1`, `operator + is not defined on tensors (got tensor and int64); use tensor functions (to_float, normalize, cast) (line 1, column 5 of the expression)`},
		{`2 * img`, `operator * is not defined on tensors (got int64 and tensor); use tensor functions (to_float, normalize, cast) (line 1, column 3 of the expression)`},
		{`max(img)`, `invalid argument for max (type tensor) (line 1, column 1 of the expression)`},
		{`img[0:2]`, `cannot slice tensor (line 1, column 4 of the expression)`},
		// expr's integers are Go ints; a spec's are int64.
		{`let n = len(l); n + "x"`, `invalid operation: + (mismatched types int64 and string) (line 1, column 19 of the expression)`},
		{`let n = len(l); "x" + n`, `invalid operation: + (mismatched types string and int64) (line 1, column 21 of the expression)`},
		// Only where a type is named: int is also a function.
		{`int({})`, `invalid argument for int (type map) (line 1, column 1 of the expression)`},
		{`let int = 1; int`, `cannot redeclare builtin int (line 1, column 5 of the expression)`},
		// Bytes are bytes, not Go's []uint8.
		{`by + 1`, `invalid operation: + (mismatched types bytes and int64) (line 1, column 4 of the expression)`},
		{`-by`, `invalid operation: - (mismatched type bytes) (line 1, column 1 of the expression)`},
		{`int(by)`, `invalid argument for int (type bytes) (line 1, column 1 of the expression)`},
		{`upper(by)`, `cannot use bytes as argument (type string) to call upper (line 1, column 7 of the expression)`},
		// A filter written with =.
		{`len(l) = 1`, `unexpected token Operator("="); compare with == (an expression sets nothing) (line 1, column 8 of the expression)`},
	} {
		_, err := expression.Default().Compile(tc.src, in, sample.Any)
		if err == nil || err.Error() != tc.want {
			t.Errorf("%s: %v\nwant %s", tc.src, err, tc.want)
		}
	}
}

// TestMapsAreNoValues: a map literal cannot be a sample's value (samples
// have no map type, and the serve sink tags bytes and NaN in lists with
// one-key objects); validate says so instead of the run failing. Reading
// from a map literal is fine.
func TestMapsAreNoValues(t *testing.T) {
	in := sample.Schema{Fields: []sample.Field{{Name: "index", Type: sample.TInt}}}
	for _, tc := range []struct{ src, want string }{
		{`{"f": 1}`, `a map ({…}) cannot be a sample's value; set its entries as fields of their own (line 1, column 1 of the expression)`},
		{`[1, {"f": "NaN"}]`, `a map ({…}) cannot be a sample's value, nor in a list of one; set its entries as fields of their own (line 1, column 5 of the expression)`},
		{`{"a": index}.a + 1`, ``},
		{`[{"a": 2}.a]`, ``},
		// Nor a time or a duration, which expr's builtins give (found by a
		// new-user test: validate passed, the run failed on time.Time).
		{`date("2020-01-01")`, `a time (date()) cannot be a sample's value; store a number such as date(…).Unix() or a string such as date(…).Format("2006-01-02") (line 1, column 1 of the expression)`},
		{`duration("1s")`, `a duration cannot be a sample's value; store a number such as duration(…).Seconds() (line 1, column 1 of the expression)`},
		{`[index, date("2020-01-01")]`, `a time (date()) cannot be a sample's value; store a number such as date(…).Unix() or a string such as date(…).Format("2006-01-02"), nor in a list (line 1, column 9 of the expression)`},
		{`date("2020-01-01").Unix()`, ``},
		{`duration("1500ms").Seconds()`, ``},
		{`date("2020-01-01").Format("2006")`, ``},
		// Lists inside an expression are not stored (these
		// were refused).
		{`len([date("2020-01-01")])`, ``},
		{`map([date("2020-01-01"), date("2021-01-01")], #.Unix())`, ``},
		{`date("2020-06-01") in [date("2020-01-01"), date("2021-01-01")]`, ``},
		{`sum(map([duration("1h"), duration("2m")], #.Seconds()))`, ``},
		{`len([{"a": 1}])`, ``},
	} {
		if got := compileError(tc.src, in); got != tc.want {
			t.Errorf("%s: %q\nwant %q", tc.src, got, tc.want)
		}
	}
}

// TestRunTimeErrorsInPlainWords: a value whose type only the run knows
// fails in words a spec's author knows, and the cause stays reachable.
func TestRunTimeErrorsInPlainWords(t *testing.T) {
	in := sample.Schema{Open: true}
	for _, tc := range []struct {
		src  string
		x    any
		want string
	}{
		{`x + 1`, []any{int64(1)}, "invalid operation: list + int"},
		{`upper(x)`, []any{int64(1)}, "upper: wrong argument type: got list, want string (1:1)"},
		// expr's literals are Go ints; a spec's integers are int64, and
		// int(x) is the function.
		{`x + 1`, "s", "invalid operation: string + int64 (1:3)"},
		{`1 + x`, "s", "invalid operation: int64 + string (1:3)"},
		{`x + 1`, []byte("a"), "invalid operation: bytes + int64 (1:3)"},
		{`int(x)`, []byte("a"), "int: invalid operation: int(bytes) (1:1)"},
		{`upper(x)`, int64(3), "upper: wrong argument type: got int64, want string (1:1)"},
		// piperun's functions name themselves, as validate's messages do.
		{`resize(x, 2, 2)`, int64(3), "resize: argument 1 must be an image tensor, got int64 (1:1)"},
		{`upper(x)`, nil, "upper: wrong argument type: got null, want string (1:1)"},
		// The call the caret points at is named, also inside another
		// expression and on a later line.
		{`"a" + trim(x)`, int64(3), "trim: wrong argument type: got int64, want string (1:7)"},
		{"1 +\n  len(upper(x))", int64(3), "upper: wrong argument type: got int64, want string (2:7)"},
		// Also where the call that failed is a stand-in (read_file pooled
		// for decode_image) or comes from imageops.
		{`read_file(x)`, "/nonexistent/a.jpg", "read_file: open /nonexistent/a.jpg: no such file or directory (1:1)"},
		{`decode_image(read_file(x), 3)`, "/nonexistent/a.jpg", "read_file: open /nonexistent/a.jpg: no such file or directory (1:14)"},
		{`decode_image(x, 3)`, []byte("zz"), "decode_image: unknown image format (want jpeg or png) (1:1)"},
		{`resize(decode_image(x, 3), 2, 2)`, []byte("zz"), "decode_image: unknown image format (want jpeg or png) (1:8)"},
	} {
		p, err := expression.Default().Compile(tc.src, in, sample.Any)
		if err != nil {
			t.Fatal(err)
		}
		_, err = p.Run(nil, map[string]any{"x": tc.x})
		if err == nil || !strings.HasPrefix(err.Error(), tc.want) || strings.Contains(err.Error(), "interface {}") {
			t.Errorf("%s: %v, want it to contain %q and no Go type", tc.src, err, tc.want)
		}
		if errors.Unwrap(err) == nil {
			t.Errorf("%s: the cause is not wrapped", tc.src)
		}
	}
}

// TestTensorEquality: == and != on a tensor fail, at compile time where the
// type is known and at run time where it is not (a batched jsonl field):
// expr's own == was false for a tensor against anything, so `a == 1` on a
// batch filtered out every sample without a word. Other values compare as
// expr compares them.
func TestTensorEquality(t *testing.T) {
	known := sample.Schema{Fields: []sample.Field{{Name: "img", Type: sample.TensorOf(tensor.Uint8, 2, 2, 3)}}}
	for _, tc := range []struct{ src, want string }{
		{`img == 1`, `operator == is not defined on tensors (got tensor and int64); compare elements, as in x[0] == 1 (line 1, column 5 of the expression)`},
		{`1 != img`, `operator != is not defined on tensors (got int64 and tensor); compare elements, as in x[0] != 1 (line 1, column 3 of the expression)`},
		{`cast(img, "float32") != 1`, `operator != is not defined on tensors (got tensor<float32>[2 2 3] and int64); compare elements, as in x[0] != 1 (line 1, column 22 of the expression)`},
		{`to_float(img) == 1`, `operator == is not defined on tensors (got tensor and int64); compare elements, as in x[0] == 1 (line 1, column 15 of the expression)`},
	} {
		_, err := expression.Default().Compile(tc.src, known, sample.Any)
		if err == nil || err.Error() != tc.want {
			t.Errorf("%s: %v\nwant %s", tc.src, err, tc.want)
		}
	}

	open := sample.Schema{Open: true}
	batch := tensor.FromInt64s([]int64{1, 3})
	for _, tc := range []struct {
		src     string
		env     map[string]any
		want    any
		wantErr string
	}{
		{`a == 1`, map[string]any{"a": batch}, nil, `operator == is not defined on tensors (got tensor<int64>[2] and int64); compare elements, as in x[0] == 1`},
		{`a != b`, map[string]any{"a": "x", "b": batch}, nil, `operator != is not defined on tensors (got string and tensor<int64>[2]); compare elements, as in x[0] != 1`},
		{`a[0] == 1`, map[string]any{"a": batch}, true, ``},
		{`a[1] != 1`, map[string]any{"a": batch}, true, ``},
		{`a == 1`, map[string]any{"a": int64(1)}, true, ``},
		{`a == 1.0`, map[string]any{"a": int64(1)}, true, ``},
		{`a != 1`, map[string]any{"a": int64(1)}, false, ``},
		{`a == "x"`, map[string]any{"a": "x"}, true, ``},
		{`a == nil`, map[string]any{"a": nil}, true, ``},
		{`a == [1, 2]`, map[string]any{"a": []any{int64(1), int64(2)}}, true, ``},
		{`a == 1 && b`, map[string]any{"a": int64(1), "b": true}, true, ``},
		{`a != 1 || b == 2`, map[string]any{"a": int64(1), "b": int64(2)}, true, ``},
	} {
		p, err := expression.Default().Compile(tc.src, open, sample.Any)
		if err != nil {
			t.Fatalf("%s: %v", tc.src, err)
		}
		got, err := p.Run(nil, tc.env)
		switch {
		case tc.wantErr != "":
			if err == nil || !strings.HasPrefix(err.Error(), tc.wantErr+" (1:") {
				t.Errorf("%s: %v, %v\nwant error %s", tc.src, got, err, tc.wantErr)
			}
		case err != nil || got != tc.want:
			t.Errorf("%s: %v, %v; want %v", tc.src, got, err, tc.want)
		}
	}
}

// TestMissingFieldsAreNamed: a field a sample lacks (a jsonl line without
// the key) reads as null; the run-time error names the missing field
// rather than talking of `<nil> + int`. Names
// bound by let, functions and $env are no fields.
func TestMissingFieldsAreNamed(t *testing.T) {
	open := sample.Schema{Open: true}
	for _, tc := range []struct {
		src  string
		env  map[string]any
		want string
	}{
		{`a + 1`, map[string]any{"b": int64(2)}, `field "a" is missing from this sample; where only some samples have it, write a ?? DEFAULT or "a" in $env ? … : … (1:1)`},
		{`a > 0`, map[string]any{}, `field "a" is missing from this sample; where only some samples have it, write a ?? DEFAULT or "a" in $env ? … : … (1:1)`},
		{`$env["x/y"] + a`, map[string]any{}, `field "x/y" is missing from this sample; where only some samples have it, write $env["x/y"] ?? DEFAULT or "x/y" in $env ? … : … (1:1)`},
		{`"a" in $env || a + 1 > 0`, map[string]any{}, `field "a" is missing from this sample; where only some samples have it, write a ?? DEFAULT or "a" in $env ? … : … (1:16)`},
		// Said to be optional, and missing: expr's error, naming it.
		{`(a ?? nil) + 1`, map[string]any{}, `field "a" is missing from this sample: invalid operation: null + int64 (1:12)`},
		{`let k = 2; k * a`, map[string]any{"a": "s"}, `invalid operation: int64 * string (1:14)`},
		{`upper(a)`, map[string]any{"a": int64(1)}, `upper: wrong argument type: got int64, want string (1:1)`},
	} {
		p, err := expression.Default().Compile(tc.src, open, sample.Any)
		if err != nil {
			t.Fatalf("%s: %v", tc.src, err)
		}
		_, err = p.Run(nil, tc.env)
		if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("%s: %v\nwant it to start %s", tc.src, err, tc.want)
		}
	}
}

// TestCastList: cast makes a tensor of a list of numbers, as tf.constant
// does, nested lists giving more dimensions; a ragged list or one holding
// a string is an error naming the element. validate passed cast(list) and
// every sample then failed ("bbox": [10, 20.5,
// 30, 40] from a jsonl file could not become a tensor).
func TestCastList(t *testing.T) {
	open := sample.Schema{Open: true}
	for _, tc := range []struct {
		src   string
		x     any
		dtype tensor.DType
		shape []int
		vals  []float64
		err   string
	}{
		{`cast(x, "float32")`, []any{int64(10), 20.5, int64(30), int64(40)}, tensor.Float32, []int{4}, []float64{10, 20.5, 30, 40}, ""},
		{`cast(x, "int64")`, []any{[]any{int64(1), int64(2)}, []any{int64(3), int64(4)}, []any{int64(5), true}}, tensor.Int64, []int{3, 2}, []float64{1, 2, 3, 4, 5, 1}, ""},
		{`cast(x, "uint8")`, []any{int64(-3), int64(300), 7.9}, tensor.Uint8, []int{3}, []float64{0, 255, 7}, ""},
		{`cast([1, 2.5], "float64")`, nil, tensor.Float64, []int{2}, []float64{1, 2.5}, ""},
		{`cast(x, "float32")`, []any{}, tensor.Float32, []int{0}, nil, ""},
		{`cast(x, "int64")`, []any{[]any{int64(1), int64(2)}, []any{int64(3)}}, 0, nil, nil, "cast: the list is not rectangular: x[1] has length 1, x[0] 2"},
		{`cast(x, "int64")`, []any{[]any{int64(1)}, int64(3)}, 0, nil, nil, "cast: the list is not rectangular: x[1] is int64, x[0] a list of 1"},
		{`cast(x, "int64")`, []any{int64(1), "two"}, 0, nil, nil, "cast: element x[1] is string, not a number"},
	} {
		p, err := expression.Default().Compile(tc.src, open, sample.Any)
		if err != nil {
			t.Fatalf("%s: %v", tc.src, err)
		}
		v, err := p.Run(nil, map[string]any{"x": tc.x})
		if tc.err != "" {
			if err == nil || !strings.HasPrefix(err.Error(), tc.err) {
				t.Errorf("%s of %v: %v, %v; want error %s", tc.src, tc.x, v, err, tc.err)
			}
			continue
		}
		got, ok := v.(*tensor.Tensor)
		if err != nil || !ok {
			t.Fatalf("%s of %v: %v, %v", tc.src, tc.x, v, err)
		}
		var vals []float64
		for i := 0; i < got.Len(); i++ {
			vals = append(vals, got.At(i))
		}
		if got.DType != tc.dtype || !reflect.DeepEqual(got.Shape, tc.shape) || !reflect.DeepEqual(vals, tc.vals) {
			t.Errorf("%s of %v = %s %v, want %s%v %v", tc.src, tc.x, got, vals, tc.dtype, tc.shape, tc.vals)
		}
	}
	// Of a field typed only at run time, cast may make a tensor (of a
	// jsonl list) or a number, so its result is typed as unknown: before,
	// it was a number, and the README's own b[2] - b[0] was refused.
	bbox, err := expression.Default().Compile(`let b = cast(x, "float32"); b[2] - b[0]`, open, sample.Any)
	if err != nil {
		t.Fatal(err)
	}
	if v, err := bbox.Run(nil, map[string]any{"x": []any{int64(10), 20.5, int64(30), int64(40)}}); err != nil || v != 20.0 {
		t.Errorf("b[2] - b[0] of a cast jsonl list: %v, %v; want 20", v, err)
	}
	if p, err := expression.Default().Compile(`to_float(cast(x, "uint8"))`, open, sample.Any); err != nil || p.Type.String() != "tensor<float32>[?]" {
		t.Errorf("to_float of a cast field typed at run time: %v, %v; want a float32 tensor", p, err)
	}
	// A scalar cast to float32 is rounded to a float32, and reads as a
	// tensor's element does: the float32's shortest decimal.
	for src, want := range map[string]any{`cast(0.1234567891, "float32")`: 0.12345679, `cast(0.1, "float32")`: 0.1, `cast(0.1, "float64")`: 0.1, `cast(-2.9, "int32")`: int64(-2)} {
		p, err := expression.Default().Compile(src, open, sample.Any)
		if err != nil {
			t.Fatal(err)
		}
		if v, err := p.Run(nil, nil); err != nil || v != want {
			t.Errorf("%s = %v, %v; want %v", src, v, err, want)
		}
	}
	// A list of strings is refused where its type is known.
	in := sample.Schema{Fields: []sample.Field{{Name: "names", Type: sample.ListOf(sample.String)}}}
	if _, err := expression.Default().Compile(`cast(names, "int64")`, in, sample.Any); err == nil || !strings.Contains(err.Error(), "argument 1 must be a tensor, a number or a list of numbers, got list<string>") {
		t.Errorf("cast of a list of strings: %v", err)
	}
}

// TestDecodeRaw: decode_raw reads bytes as tf.io.decode_raw does (the
// elements little-endian, 1-D) and, given a shape, as a reshape after it
// would; the checker types the result from the literal dtype and shape,
// and a length that does not fit is a run-time error naming both.
func TestDecodeRaw(t *testing.T) {
	in := sample.Schema{Fields: []sample.Field{
		{Name: "b", Type: sample.TBytes},
		{Name: "s", Type: sample.TString},
		{Name: "n", Type: sample.TInt},
		{Name: "any", Type: sample.TAny},
	}}
	u12 := []byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 255}
	f2 := []byte{0, 0, 0x80, 0x3f, 0, 0, 0, 0xc0} // 1.0 and -2.0, little-endian float32
	for _, tc := range []struct {
		src   string
		b     any
		typ   string // the checked type, or the compile error
		shape []int
		want  string // the tensor's elements, or the run-time error
	}{
		{src: `decode_raw(b, "uint8")`, b: u12, typ: "tensor<uint8>[?]", shape: []int{12}, want: "[0 1 2 3 4 5 6 7 8 9 10 255]"},
		{src: `decode_raw(b, "uint8", [2, 2, 3])`, b: u12, typ: "tensor<uint8>[2 2 3]", shape: []int{2, 2, 3}, want: "[0 1 2 3 4 5 6 7 8 9 10 255]"},
		{src: `decode_raw(b, "uint8", [-1, 3])`, b: u12, typ: "tensor<uint8>[? 3]", shape: []int{4, 3}, want: "[0 1 2 3 4 5 6 7 8 9 10 255]"},
		{src: `decode_raw(b, "int32")`, b: u12, typ: "tensor<int32>[?]", shape: []int{3}, want: "[50462976 117835012 -16119544]"},
		{src: `decode_raw(b, "float32", [2])`, b: f2, typ: "tensor<float32>[2]", shape: []int{2}, want: "[1 -2]"},
		{src: `decode_raw(s, "uint8", [])`, b: "A", typ: "tensor<uint8>[]", shape: []int{}, want: "[65]"},
		{src: `decode_raw(any, "uint8", [0])`, b: []byte{}, typ: "tensor<uint8>[0]", shape: []int{0}, want: "[]"},
		// Lengths that do not fit.
		{src: `decode_raw(b, "int64")`, b: u12, typ: "tensor<int64>[?]", want: "decode_raw: 12 bytes are not a whole number of int64 elements (8 bytes each)"},
		{src: `decode_raw(b, "uint8", [2, 2, 2])`, b: u12, typ: "tensor<uint8>[2 2 2]", want: "decode_raw: shape [2 2 2] holds 8 uint8 elements (8 bytes), got 12 bytes"},
		{src: `decode_raw(b, "uint8", [2, 7])`, b: u12, typ: "tensor<uint8>[2 7]", want: "decode_raw: shape [2 7] holds 14 uint8 elements (14 bytes), got 12 bytes"},
		{src: `decode_raw(b, "uint8", [-1, 1000000000, 1000000000, 1000000000])`, typ: "decode_raw: shape [-1 1000000000 1000000000 1000000000] holds more uint8 elements than memory does (line 1, column 1 of the expression)"},
		{src: `decode_raw(b, "uint8", [0, 7])`, b: u12, typ: "tensor<uint8>[0 7]", want: "decode_raw: shape [0 7] holds 0 uint8 elements (0 bytes), got 12 bytes"},
		{src: `decode_raw(b, "uint8", [-1, 5])`, b: u12, typ: "tensor<uint8>[? 5]", want: "decode_raw: 12 uint8 elements (12 bytes) do not fill shape [-1 5]"},
		{src: `decode_raw(b, "uint8", [0, -1])`, typ: "decode_raw: shape [0 -1] has a -1 beside a 0: no length tells what the -1 is (line 1, column 1 of the expression)"},
		{src: `decode_raw(b, "uint8", [1000000000, 1000000000, 1000000000])`, typ: "decode_raw: shape [1000000000 1000000000 1000000000] holds more uint8 elements than memory does (line 1, column 1 of the expression)"},
		{src: `decode_raw(b, "uint8", [0, 1000000000, 1000000000, 1000000000])`, b: []byte{}, typ: "tensor<uint8>[0 1000000000 1000000000 1000000000]", shape: []int{0, 1000000000, 1000000000, 1000000000}, want: "[]"},
		{src: `decode_raw(b, "uint8", [4.0, 3])`, b: u12, typ: "tensor<uint8>[4 3]", shape: []int{4, 3}, want: "[0 1 2 3 4 5 6 7 8 9 10 255]"},
		{src: `decode_raw(b, "uint8", [2.5, 3])`, typ: "decode_raw: shape [2.5 3]: dimensions must be integers (line 1, column 1 of the expression)"},
		{src: `decode_raw(any, "uint8")`, b: int64(3), typ: "tensor<uint8>[?]", want: "decode_raw: argument 1 must be bytes, got int64"},
		// Compile errors.
		{src: `decode_raw(n, "uint8")`, typ: "decode_raw: argument 1 must be bytes, got int64 (line 1, column 12 of the expression)"},
		{src: `decode_raw(b, "uint9")`, typ: `decode_raw: unknown dtype "uint9" (want uint8, int32, int64, float32 or float64) (line 1, column 1 of the expression)`},
		{src: `decode_raw(b, s)`, typ: `decode_raw: dtype must be a string literal such as "float32" (line 1, column 1 of the expression)`},
		{src: `decode_raw(b, "uint8", [-1, -1])`, typ: "decode_raw: shape [-1 -1] has more than one -1; at most one dimension is inferred (line 1, column 1 of the expression)"},
		{src: `decode_raw(b, "uint8", [2, -3])`, typ: "decode_raw: shape [2 -3] has a negative dimension other than -1 (line 1, column 1 of the expression)"},
		{src: `decode_raw(b, "uint8", n)`, typ: "decode_raw: shape must be a literal list of dimensions, e.g. [224, 224, 3] (line 1, column 1 of the expression)"},
	} {
		p, err := expression.Default().Compile(tc.src, in, sample.Any)
		if err != nil {
			if err.Error() != tc.typ {
				t.Errorf("%s: compile error %q, want %q", tc.src, err, tc.typ)
			}
			continue
		}
		if got := p.Type.String(); got != tc.typ {
			t.Errorf("%s: type %s, want %s", tc.src, got, tc.typ)
			continue
		}
		v, err := p.Run(nil, map[string]any{"b": tc.b, "s": tc.b, "any": tc.b, "n": int64(2)})
		if tc.shape == nil {
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%s: got %v, %v; want error %q", tc.src, v, err, tc.want)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tc.src, err)
			continue
		}
		x, ok := v.(*tensor.Tensor)
		if !ok {
			t.Errorf("%s: got %T, want a tensor", tc.src, v)
			continue
		}
		var elems []string
		for i := range x.Len() {
			elems = append(elems, strconv.FormatFloat(x.At(i), 'f', -1, 64))
		}
		if got := "[" + strings.Join(elems, " ") + "]"; fmt.Sprint(x.Shape) != fmt.Sprint(tc.shape) || got != tc.want {
			t.Errorf("%s: %v %s, want %v %s", tc.src, x.Shape, got, tc.shape, tc.want)
		}
	}
}

// TestErrorPositionsCountLinesAndCharacters: an error's line and column
// are counted in lines and characters of the expression, whichever check
// found it. The type checker's used to say line 1 and the column of the
// offset in the whole expression, and an unknown function's counted bytes.
func TestErrorPositionsCountLinesAndCharacters(t *testing.T) {
	in := sample.Schema{Fields: []sample.Field{{Name: "index", Type: sample.TInt}, {Name: "s", Type: sample.TString}}}
	for _, tc := range []struct{ src, want string }{
		{"let x = 1;\n  resize(index, 2, 2)", "resize: argument 1 must be an image tensor, got int64 (line 2, column 10 of the expression)"},
		{"s == \"é\" ? resize(index, 2, 2) : 0", "resize: argument 1 must be an image tensor, got int64 (line 1, column 19 of the expression)"},
		{"s == \"é\" ? resiz(index) : 0", "unknown function resiz (did you mean resize?) (line 1, column 12 of"},
		{"let y = \"ü\";\nlen(y) + resiz(index)", "(line 2, column 10 of the expression)"},
	} {
		_, err := expression.Default().Compile(tc.src, in, sample.Any)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q:\ngot  %v\nwant %q in it", tc.src, err, tc.want)
		}
	}
}

// TestLetIsTypeChecked: the calls inside a let and after it are checked
// like any others, and a let variable has the type of its value, so what
// is built on it is typed too. Type checking used to stop at a let: a
// wrong argument there passed validate and failed on the first sample.
func TestLetIsTypeChecked(t *testing.T) {
	in := sample.Schema{Fields: []sample.Field{{Name: "b", Type: sample.TBytes}, {Name: "index", Type: sample.TInt}}}
	p, err := expression.Default().Compile("let img = decode_image(b, 3); let small = resize(img, 8, 6); small", in, sample.Any)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := p.Type.String(), sample.TensorOf(tensor.Uint8, 8, 6, 3).String(); got != want {
		t.Errorf("type %s, want %s", got, want)
	}
	for _, tc := range []struct{ src, want string }{
		{"let img = decode_image(index, 3); img", "decode_image: argument 1 must be bytes, got int64 (line 1, column 24 of the expression)"},
		{"let n = index; resize(n, 8, 8)", "resize: argument 1 must be an image tensor, got int64 (line 1, column 23 of the expression)"},
		{"let img = decode_image(b, 3); normalize(img, 0.5, 0.2)", "normalize: argument 1 must be a float32 image, got tensor<uint8>[? ? 3]: apply to_float first (line 1, column 41 of the expression)"},
	} {
		_, err := expression.Default().Compile(tc.src, in, sample.Any)
		if err == nil || err.Error() != tc.want {
			t.Errorf("%s:\ngot  %v\nwant %s", tc.src, err, tc.want)
		}
	}
}

// TestAnyFieldsTakeEveryOperator: a field whose type only the run knows
// (a conditional of two kinds, a field an error upstream left untyped)
// compiles under any operator or function, and fails, if at all, when it
// runs. It used to be typed as null: `y > 1` below `y: c ? 1 : 2.5` failed
// validate with "mismatched types unknown and int64".
func TestAnyFieldsTakeEveryOperator(t *testing.T) {
	in := sample.Schema{Fields: []sample.Field{{Name: "y", Type: sample.TAny}}}
	for _, tc := range []struct {
		src  string
		y    any
		want any
	}{
		{`y > 1`, int64(2), true},
		{`y > 1`, 0.5, false},
		{`y + 1`, 2.5, 3.5},
		{`y * 2`, int64(3), 6},
		{`upper(y)`, "ab", "AB"},
		{`y == nil`, nil, true},
		{`y ?? 7`, nil, 7},
		{`len(y)`, []any{int64(1), int64(2)}, 2},
	} {
		p, err := expression.Default().Compile(tc.src, in, sample.Any)
		if err != nil {
			t.Errorf("%s: %v", tc.src, err)
			continue
		}
		got, err := p.Run(nil, map[string]any{"y": tc.y})
		if err != nil || fmt.Sprint(got) != fmt.Sprint(tc.want) {
			t.Errorf("%s with y=%v: %v, %v; want %v", tc.src, tc.y, got, err, tc.want)
		}
	}
	// It may be a bool, so a filter may be it alone.
	if _, err := expression.Default().Compile(`y`, in, sample.Bool); err != nil {
		t.Errorf("y as a filter: %v", err)
	}
}
