package expression_test

import (
	"math"
	"strings"
	"testing"

	"github.com/piperun/piperun/expression"
	"github.com/piperun/piperun/sample"
	"github.com/piperun/piperun/tensor"
)

// TestRunTimeTypedOperands: where an operand's type is known only at run
// time (a jsonl field, batched), in and indexing behave as where it is
// known: `label in [1, 2]` of a batched tensor is an error, not false for
// every sample; an index read from a field indexes a tensor. Each of these
// passed validate and then filtered out everything or failed every sample.
func TestRunTimeTypedOperands(t *testing.T) {
	open := sample.Schema{Open: true}
	batch := tensor.FromInt64s([]int64{1, 2})
	for _, tc := range []struct {
		src  string
		env  map[string]any
		want any    // the value, when err is ""
		err  string // the start of the error
	}{
		{`label in [1, 2]`, map[string]any{"label": int64(2)}, true, ""},
		{`label in [1, 2]`, map[string]any{"label": int64(3)}, false, ""},
		{`label not in [1, 2]`, map[string]any{"label": int64(3)}, true, ""},
		{`"a" in names`, map[string]any{"names": []any{"b", "a"}}, true, ""},
		{`label in [1, 2]`, map[string]any{"label": batch}, nil, "operator in is not defined on tensors (got tensor<int64>[2] and list<any>); test elements, as in x[0] in [1, 2]"},
		{`label not in [1, 2]`, map[string]any{"label": batch}, nil, "operator in is not defined on tensors"},
		{`1 in label`, map[string]any{"label": batch}, nil, "operator in is not defined on tensors (got int64 and tensor<int64>[2])"},
		{`cast(label, "int64")[i]`, map[string]any{"label": []any{int64(4), int64(5)}, "i": int64(1)}, int64(5), ""},
		{`label[i]`, map[string]any{"label": batch, "i": int64(-1)}, int64(2), ""},
		{`label[i]`, map[string]any{"label": batch, "i": "x"}, nil, "a tensor's index must be an integer, got string"},
		{`label[i]`, map[string]any{"label": []any{"p", "q"}, "i": int64(0)}, "p", ""},
		{`one_hot(i, 2)[i]`, map[string]any{"i": int64(1)}, 1.0, ""},
		{`string(b)`, map[string]any{"b": []byte("hi")}, "hi", ""},
		{`string(n)`, map[string]any{"n": int64(7)}, "7", ""},
		{`string(label)`, map[string]any{"label": batch}, "tensor<int64>[2]", ""},
		// expr's builtins on a tensor typed only at run time: first gave
		// null, sum failed in reflect's words.
		{`first(label)`, map[string]any{"label": batch}, nil, "first: not defined on tensors (got tensor<int64>[2]); index it (x[0]) or use the tensor functions"},
		{`sum(label)`, map[string]any{"label": batch}, nil, "sum: not defined on tensors"},
		{`all(label, # > 0)`, map[string]any{"label": batch}, nil, "all: not defined on tensors"},
		{`first(label)`, map[string]any{"label": []any{int64(4), int64(5)}}, int64(4), ""},
		{`sum(label)`, map[string]any{"label": []any{int64(4), int64(5)}}, 9, ""},
		{`all(label, # > 3)`, map[string]any{"label": []any{int64(4), int64(5)}}, true, ""},
		{`upper(s)`, map[string]any{"s": "ab"}, "AB", ""},
		{`"a" in $env`, map[string]any{"a": int64(7)}, true, ""},
		// Optional indexing keeps expr's nil for a nil container.
		{`x?.[k]`, map[string]any{"x": nil, "k": "img"}, nil, ""},
		{`x?.[i]`, map[string]any{"x": nil, "i": int64(0)}, nil, ""},
		{`x?.[i]`, map[string]any{"x": []any{"p"}, "i": int64(0)}, "p", ""},
		// A tensor's Go fields, reached through a name known only at run
		// time, are refused then.
		{`$env[k].Data`, map[string]any{"k": "t", "t": batch}, nil, "a tensor has no fields or methods (.Data)"},
		{`$env[k]["Data"]`, map[string]any{"k": "t", "t": batch}, nil, "a tensor has no fields or methods (.Data)"},
		{`cast(x, "int64")`, map[string]any{"x": 1e30}, int64(math.MaxInt64), ""},
		// An integer keeps its low 32 bits whether a field holds it or
		// expr computed it (a Go int).
		{`cast(x, "int32")`, map[string]any{"x": int64(5000000000)}, int64(705032704), ""},
		{`cast(x * 5000000000, "int32")`, map[string]any{"x": int64(1)}, int64(705032704), ""},
		{`cast(5000000000, "int32")`, nil, int64(705032704), ""},
		{`cast(x, "int64")`, map[string]any{"x": -1e30}, int64(math.MinInt64), ""},
		// The run context is no field, whatever name a sample gives.
		{`$env[k]`, map[string]any{"k": "__piperun", "__piperun": &expression.RunCtx{Seed: 3}}, nil, ""},
		{`k in $env`, map[string]any{"k": "__piperun", "__piperun": &expression.RunCtx{Seed: 3}}, false, ""},
		{`$env[k] + 1`, map[string]any{"k": "a", "a": int64(7)}, 8, ""},
	} {
		p, err := expression.Default().Compile(tc.src, open, sample.Any)
		if err != nil {
			t.Errorf("%s: %v", tc.src, err)
			continue
		}
		v, err := p.Run(nil, tc.env)
		switch {
		case tc.err == "" && (err != nil || v != tc.want):
			t.Errorf("%s with %v = %v, %v; want %v", tc.src, tc.env, v, err, tc.want)
		case tc.err != "" && (err == nil || !strings.HasPrefix(err.Error(), tc.err)):
			t.Errorf("%s with %v = %v, %v; want an error starting %s", tc.src, tc.env, v, err, tc.err)
		}
	}
	// The bytes of a known field read as text too.
	in := sample.Schema{Fields: []sample.Field{{Name: "b", Type: sample.TBytes}, {Name: "img", Type: sample.TensorOf(tensor.Uint8, 2, 2, 3)}}}
	p, err := expression.Default().Compile(`string(b) + "!"`, in, sample.Any)
	if err != nil {
		t.Fatal(err)
	}
	if v, err := p.Run(nil, map[string]any{"b": []byte("hi")}); err != nil || v != "hi!" {
		t.Errorf(`string(b) + "!" = %v, %v; want hi!`, v, err)
	}
	p, err = expression.Default().Compile(`string(img)`, in, sample.Any)
	if err != nil {
		t.Fatal(err)
	}
	if v, err := p.Run(nil, map[string]any{"img": tensor.New(tensor.Uint8, 2, 2, 3)}); err != nil || v != "tensor<uint8>[2 2 3]" {
		t.Errorf(`string(img) = %q, %v; want its type, not the Go struct`, v, err)
	}
}

// TestRunTimeTextInPlainWords: what validate cannot know fails in the
// spec's words, not Go's.
func TestRunTimeTextInPlainWords(t *testing.T) {
	in := sample.Schema{Fields: []sample.Field{{Name: "index", Type: sample.TInt}}}
	if p, err := expression.Default().Compile(`index > 2 ? nil : index`, in, sample.Any); err != nil || p.Type.Kind != sample.Any {
		t.Errorf("a conditional of null or an int: %v, %v; want it typed unknown, as plan shows it", p, err)
	}
	for src, want := range map[string]string{
		`7 % index`: "integer division or modulo by zero (1:3)",
		`7 / index`: "", // a float division: +Inf
		// Typed unknown, not int64: a null is possible.
		`let y = index > 2 ? index : nil; y + 1`: "invalid operation: null + int64",
	} {
		p, err := expression.Default().Compile(src, in, sample.Any)
		if err != nil {
			t.Errorf("%s: %v", src, err)
			continue
		}
		_, err = p.Run(nil, map[string]any{"index": int64(0)})
		if want == "" && err != nil || want != "" && (err == nil || !strings.HasPrefix(err.Error(), want)) {
			t.Errorf("%s: %v; want %q", src, err, want)
		}
	}
}

// TestRefusedAtValidate: what validate passed and every sample then
// failed on, or what handed out piperun's insides, is refused where it is
// written.
func TestRefusedAtValidate(t *testing.T) {
	in := sample.Schema{Fields: []sample.Field{{Name: "img", Type: sample.TensorOf(tensor.Uint8, 2, 2, 3)}, {Name: "index", Type: sample.TInt}}}
	open := sample.Schema{Open: true}
	for _, tc := range []struct {
		src    string
		schema sample.Schema
		want   string
	}{
		{`img.Data`, in, "a tensor has no fields or methods (.Data): use the expression functions (shape, cast, x[i], …) (line 1, column 5 of the expression)"},
		{`img.Uint8()`, in, "a tensor has no fields or methods (.Uint8): use the expression functions (shape, cast, x[i], …)"},
		{`one_hot(index, 3).Shape`, in, "a tensor has no fields or methods (.Shape)"},
		{`img[1.5]`, in, "x[i]: a tensor's index must be an integer, got float64"},
		{`index + 5 % 0`, in, "integer division or modulo by zero"},
		{`img in [1]`, in, "operator in is not defined on tensors (got tensor<uint8>[2 2 3] and list<int64>)"},
		{`$env[1]`, open, "$env[…] takes a field's name, a string; got int64 (line 1, column 6 of the expression)"},
		{`$env`, open, `$env is only for $env["name"] and "name" in $env (line 1, column 1 of the expression)`},
		{`keys($env)`, open, `$env is only for $env["name"] and "name" in $env`},
		{`len($env)`, open, `$env is only for $env["name"] and "name" in $env`},
		{`get($env, "a")`, open, `$env is only for $env["name"] and "name" in $env`},
		{`__piperun.Seed`, in, "__piperun is piperun's own name (random functions read the sample's identity through it); no field may be called so (line 1, column 1 of the expression)"},
		{`index + $env["__piperun"].Seed`, open, "__piperun is piperun's own name"},
		{`normalize(to_float(img), true, 1)`, in, "normalize: argument 2 must be a number or a list of numbers, got bool"},
		{`normalize(to_float(img), 0.5, "x")`, in, "normalize: argument 3 must be a number or a list of numbers"},
		{`transpose(cast([[1, 2], [3, 4]], "int32"), [1, 1])`, in, "transpose: perm [1 1] is not a permutation of 0..1"},
	} {
		_, err := expression.Default().Compile(tc.src, tc.schema, sample.Any)
		if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("%s: %v\nwant an error starting %s", tc.src, err, tc.want)
		}
	}
}
