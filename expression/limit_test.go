package expression_test

import (
	"strings"
	"testing"

	"github.com/piperun/piperun/expression"
	"github.com/piperun/piperun/sample"
	"github.com/piperun/piperun/tensor"
)

// TestSizesFromSamplesAreBounded: a function that sizes its result from a
// sample's value refuses a tensor larger than the run's bound before
// allocating it (one of 40 GB killed the process with the runtime's
// out-of-memory abort), and a constant size no run could hold is a
// compile error, whose bytes would otherwise wrap the memory estimates
// around (one_hot(0, 2^62) was planned at 334 bytes).
func TestSizesFromSamplesAreBounded(t *testing.T) {
	defer expression.SetMaxValueBytes(1 << 20)()
	in := sample.Schema{Fields: []sample.Field{{Name: "n", Type: sample.TInt}}}
	for _, tc := range []struct {
		src  string
		n    int64
		want string // "" for a result
	}{
		{`shape(one_hot(0, n))[0]`, 262144, ""},
		{`one_hot(0, n)`, 262145, "one_hot: n 262145: a float32 tensor of shape [262145] would take 1048580 bytes, more than the run's memory budget (1048576 bytes) (1:1)\n | one_hot(0, n)\n | ^"},
		{`one_hot(0, n)`, 10_000_000_000, "one_hot: n 10000000000: a float32 tensor of shape [10000000000] would take 37.25GiB, more than the run's memory budget (1MiB) (1:1)\n | one_hot(0, n)\n | ^"},
		{`shape(resize(decode_raw("abcdefghijkl", "uint8", [2, 2, 3]), n, 100))`, 3495, ""},
		{`resize(decode_raw("abcdefghijkl", "uint8", [2, 2, 3]), n, 100000)`, 100000, "resize: height 100000 and width 100000: a uint8 tensor of shape [100000 100000 3] would take 27.94GiB, more than the run's memory budget (1MiB) (1:1)\n | resize(decode_raw(\"abcdefghijkl\", \"uint8\", [2, 2, 3]), n, 100000)\n | ^"},
		{`random_resized_crop(decode_raw("abcdefghijkl", "uint8", [2, 2, 3]), n, n)`, 1 << 40, "random_resized_crop: height 1099511627776 and width 1099511627776: a uint8 tensor of shape [1099511627776 1099511627776 3] is larger than any memory: its size in bytes overflows int64 (1:1)\n | random_resized_crop(decode_raw(\"abcdefghijkl\", \"uint8\", [2, 2, 3]), n, n)\n | ^"},
	} {
		p, err := expression.Default().Compile(tc.src, in, sample.Any)
		if err != nil {
			t.Fatalf("%s: %v", tc.src, err)
		}
		v, err := p.Run(nil, map[string]any{"n": tc.n, expression.CtxVar: &expression.RunCtx{}})
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s with n %d: %v", tc.src, tc.n, err)
		case tc.want != "" && (err == nil || err.Error() != tc.want):
			t.Errorf("%s with n %d: got %v, %v\nwant %s", tc.src, tc.n, v, err, tc.want)
		}
	}
	for src, want := range map[string]string{
		`one_hot(0, 4611686018427387904)`: "one_hot: a float32 tensor of shape [4611686018427387904] is larger than any memory: its size in bytes overflows int64 (line 1, column 1 of the expression)",
		`one_hot(0, 274877906945)`:        "one_hot: a float32 tensor of shape [274877906945] would take 1099511627780 bytes, more than the 1099511627776 bytes any sample may take (line 1, column 1 of the expression)",
		`resize(decode_raw("abcdefghijkl", "uint8", [2, 2, 3]), 3037000500, 3037000500)`: "resize: a uint8 tensor of shape [3037000500 3037000500 3] is larger than any memory: its size in bytes overflows int64 (line 1, column 1 of the expression)",
		`resize(decode_raw("abcdefghijkl", "uint8", [2, 2, 3]), 1000000, 1000000)`:       "resize: a uint8 tensor of shape [1000000 1000000 3] would take 2.73TiB, more than the 1TiB any sample may take (line 1, column 1 of the expression)",
	} {
		if _, err := expression.Default().Compile(src, in, sample.Any); err == nil || err.Error() != want {
			t.Errorf("%s: got %v\nwant %s", src, err, want)
		}
	}
}

// TestOverlappingBoundsTakeTheLargest: runs overlapping in one process
// each set the bound to their budget; the largest of those not yet taken
// away holds, whatever order they end in, and none is left behind (a
// swap-and-restore left an ended run's bound in place).
func TestOverlappingBoundsTakeTheLargest(t *testing.T) {
	in := sample.Schema{Fields: []sample.Field{{Name: "n", Type: sample.TInt}}}
	p, err := expression.Default().Compile(`shape(one_hot(0, n))[0]`, in, sample.Any)
	if err != nil {
		t.Fatal(err)
	}
	fits := func(n int64) bool {
		_, err := p.Run(nil, map[string]any{"n": n})
		return err == nil
	}
	endA := expression.SetMaxValueBytes(1 << 20) // 262144 float32s
	endB := expression.SetMaxValueBytes(2 << 20)
	if !fits(400_000) || fits(600_000) {
		t.Errorf("with 1 and 2 MiB set: 1.6 MB fits %v, 2.4 MB fits %v; want the 2 MiB bound", fits(400_000), fits(600_000))
	}
	endA()
	if !fits(400_000) || fits(600_000) {
		t.Errorf("with 2 MiB left: 1.6 MB fits %v, 2.4 MB fits %v; want the 2 MiB bound", fits(400_000), fits(600_000))
	}
	endC := expression.SetMaxValueBytes(1 << 20)
	endB()
	if fits(300_000) {
		t.Errorf("with 1 MiB left, 1.2 MB fits")
	}
	endC()
	if !fits(600_000) {
		t.Errorf("with every bound taken away, 2.4 MB does not fit")
	}
}

// TestStringsAreBounded: a string an expression builds is bounded as a
// tensor is, before it is made. expr's VM counts lists and ranges against
// its own limit, not string concatenation or replace: a reduce that
// doubled a string 40 times grew the process to 24 GB and the kernel's
// out-of-memory killer. Within the bound, + and
// replace give what expr's do, also on values typed only at run time.
func TestStringsAreBounded(t *testing.T) {
	defer expression.SetMaxValueBytes(1 << 20)()
	in := sample.Schema{Fields: []sample.Field{{Name: "s", Type: sample.TString}, {Name: "a", Type: sample.TAny}, {Name: "b", Type: sample.TAny}}}
	for _, tc := range []struct {
		src  string
		a, b any
		want any // an error's text, or the value
	}{
		{`s + "!"`, nil, nil, "ab!"},
		{`a + b`, "x", "y", "xy"},
		{`a + b`, int64(2), int64(3), 5}, // as expr's own + gives it
		{`a + b`, 1.5, int64(2), 3.5},
		{`a + s`, "<", nil, "<ab"},
		{`upper(s + s)`, nil, nil, "ABAB"},
		{`len(reduce(0..18, #acc + #acc, "xy"))`, nil, nil, 1 << 20},
		{`len(reduce(0..19, #acc + #acc, "xy"))`, nil, nil, "a string of 2MiB would take more than the run's memory budget (1MiB) (1:24)\n | len(reduce(0..19, #acc + #acc, \"xy\"))\n | .......................^"},
		{`a + b`, "x", int64(1), "invalid operation: string + int64 (1:3)\n | a + b\n | ..^"},
		{`replace(s, "a", "aa")`, nil, nil, "aab"},
		{`len(reduce(0..25, replace(#acc, "a", "aa"), "a"))`, nil, nil, "replace: a string of 2MiB would take more than the run's memory budget (1MiB) (1:19)\n | len(reduce(0..25, replace(#acc, \"a\", \"aa\"), \"a\"))\n | ..................^"},
		// The encoders too (an adversarial test: 24 nested toBase64 held
		// 4.9 GB, 10 nested toJSON 4.1 GB, under a 512 MiB budget). What
		// they give within the bound is what expr's do.
		{`toBase64(s)`, nil, nil, "YWI="},
		{`toBase64(a)`, "hi", nil, "aGk="},
		{`toJSON(a)`, map[string]any{"k": []any{1, "<x>"}}, nil, "{\n  \"k\": [\n    1,\n    \"\\u003cx\\u003e\"\n  ]\n}"},
		// A tensor is bounded before it is written too.
		{`len(toJSON(a))`, tensor.New(tensor.Uint8, 800_000), nil, "toJSON: its text may take up to 1.02MiB, more than the run's memory budget (1MiB) (1:5)\n | len(toJSON(a))\n | ....^"},
		{`len(reduce(0..40, toBase64(#acc), "ab"))`, nil, nil, 825880},
		{`len(reduce(0..41, toBase64(#acc), "ab"))`, nil, nil, "toBase64: a string of 1.05MiB would take more than the run's memory budget (1MiB) (1:19)\n | len(reduce(0..41, toBase64(#acc), \"ab\"))\n | ..................^"},
		{`len(reduce(0..40, toJSON(#acc), "\\\\"))`, nil, nil, "toJSON: its text may take up to 1.5MiB, more than the run's memory budget (1MiB) (1:19)\n | len(reduce(0..40, toJSON(#acc), \"\\\\\\\\\"))\n | ..................^"},
	} {
		p, err := expression.Default().Compile(tc.src, in, sample.Any)
		if err != nil {
			t.Fatalf("%s: %v", tc.src, err)
		}
		v, err := p.Run(nil, map[string]any{"s": "ab", "a": tc.a, "b": tc.b})
		if msg, ok := tc.want.(string); ok && err != nil {
			if err.Error() != msg {
				t.Errorf("%s: %v\nwant %s", tc.src, err, msg)
			}
			continue
		}
		if err != nil || v != tc.want {
			t.Errorf("%s: got %#v (%T), %v; want %#v", tc.src, v, v, err, tc.want)
		}
	}
}

// TestExprsOwnLimitIsNamed: expr's own limit on what one evaluation
// builds is not resources.memory, which its message seemed to name.
func TestExprsOwnLimitIsNamed(t *testing.T) {
	p, err := expression.Default().Compile(`len(0..2000000)`, sample.Schema{}, sample.Any)
	if err != nil {
		t.Fatal(err)
	}
	_, err = p.Run(nil, map[string]any{})
	const want = "memory budget exceeded: an evaluation may make at most 1000000 list elements, range numbers or characters of repeat, expr's own limit, which resources.memory does not change (1:6)\n | len(0..2000000)\n | .....^"
	if err == nil || err.Error() != want {
		t.Errorf("%v\nwant %s", err, want)
	}
}

// TestPatchedOperatorsStillCheck: the + and replace the patcher takes
// for their string bounds are checked at validate time as before (a
// review: a tensor + a string, replace of an int, and nil + a string
// passed validate and failed every sample).
func TestPatchedOperatorsStillCheck(t *testing.T) {
	in := sample.Schema{Fields: []sample.Field{{Name: "s", Type: sample.TString}, {Name: "i", Type: sample.TInt}}}
	for _, tc := range []struct{ src, want string }{
		{`cast([1, 2], "int64") + "x"`, "operator + is not defined on tensors"},
		{`s + cast([1.5], "float32")`, "operator + is not defined on tensors"},
		{`replace(i, "1", "2")`, "replace(s, old, new[, n]): argument 1 must be string, got int64"},
		{`replace(s, 1, "2")`, "replace(s, old, new[, n]): argument 2 must be string, got int64"},
		{`replace(s, "1", "2", 1.5)`, "replace(s, old, new[, n]): argument 4 must be int64, got float64"},
		{`replace(s, "1", "2", 1, 2)`, "replace"},
		{`toBase64(i)`, "toBase64(s): argument 1 must be string, got int64"},
		{`toBase64(s, s)`, "toBase64"},
		{`toJSON()`, "toJSON"},
		{`s + nil`, "invalid operation"},
	} {
		_, err := expression.Default().Compile(tc.src, in, sample.Any)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v\nwant an error holding %q", tc.src, err, tc.want)
		}
	}
}
