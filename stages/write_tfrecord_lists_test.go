package stages_test

import (
	"bytes"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/piperun/piperun/example"
	"github.com/piperun/piperun/spec"
	"github.com/piperun/piperun/stages"
	"github.com/piperun/piperun/tensor"
	"github.com/piperun/piperun/tfrecord"
)

// writeAndReadBack writes fields as write_tfrecord's sink does (ToExample,
// Marshal, one framed record) and parses the record back, so a test sees
// what a reader of the file would.
func writeAndReadBack(t *testing.T, fields map[string]any) (*example.Example, error) {
	t.Helper()
	ex, err := stages.ToExample(fields)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	w := tfrecord.NewWriter(&buf, tfrecord.None)
	if err := w.Write(example.Marshal(ex)); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	r, err := tfrecord.NewReader(&buf, tfrecord.None, "test")
	if err != nil {
		t.Fatal(err)
	}
	rec, err := r.Next()
	if err != nil {
		t.Fatal(err)
	}
	got, err := example.Unmarshal(rec)
	if err != nil {
		t.Fatal(err)
	}
	return got, nil
}

// TestWriteTFRecordLists: a list becomes the one feature kind its elements
// allow. A list of numbers with any float is a float_list, since JSON and
// expression literals leave whole numbers as ints (a bbox [10, 20.5, 30,
// 40] from jsonl failed "list mixes element types"; found by a user
// test); booleans count as 0 and 1 (they failed "a boolean in a list
// cannot be written").
func TestWriteTFRecordLists(t *testing.T) {
	for _, tc := range []struct {
		name   string
		json   string // the value as a jsonl line holds it; else val
		val    []any
		kind   example.Kind
		ints   []int64
		floats []float32
		bytes  []string
	}{
		{name: "ints", json: `[1, 2, -3]`, kind: example.KindInt64, ints: []int64{1, 2, -3}},
		{name: "floats", json: `[1.5, 2.25]`, kind: example.KindFloat, floats: []float32{1.5, 2.25}},
		{name: "a float among ints", json: `[10, 20.5, 30, 40]`, kind: example.KindFloat, floats: []float32{10, 20.5, 30, 40}},
		{name: "an int among floats", json: `[1.5, 2]`, kind: example.KindFloat, floats: []float32{1.5, 2}},
		{name: "whole floats", json: `[1.0, 2.0]`, kind: example.KindFloat, floats: []float32{1, 2}},
		{name: "bools", json: `[true, false]`, kind: example.KindInt64, ints: []int64{1, 0}},
		{name: "bools and ints", json: `[true, 3, false]`, kind: example.KindInt64, ints: []int64{1, 3, 0}},
		{name: "bools and a float", json: `[true, 0.5, false]`, kind: example.KindFloat, floats: []float32{1, 0.5, 0}},
		{name: "strings", json: `["a", "bc"]`, kind: example.KindBytes, bytes: []string{"a", "bc"}},
		{name: "strings and bytes", val: []any{"a", []byte{0xff}}, kind: example.KindBytes, bytes: []string{"a", "\xff"}},
		{name: "one int", json: `[7]`, kind: example.KindInt64, ints: []int64{7}},
		// No element says the kind; the next record may hold floats.
		{name: "empty", json: `[]`, kind: example.KindNone},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var v any = tc.val
			if tc.json != "" {
				line, err := stages.ParseJSONLine([]byte(`{"v": ` + tc.json + `}`))
				if err != nil {
					t.Fatal(err)
				}
				v = line["v"]
			}
			ex, err := writeAndReadBack(t, map[string]any{"v": v})
			if err != nil {
				t.Fatal(err)
			}
			f := ex.Features["v"]
			if f == nil {
				t.Fatalf("no feature v in %v", ex.Features)
			}
			if f.Kind != tc.kind {
				t.Fatalf("kind %s, want %s", f.Kind, tc.kind)
			}
			var got, want any
			switch tc.kind {
			case example.KindInt64:
				got, want = append([]int64{}, f.Ints...), tc.ints
			case example.KindFloat:
				got, want = append([]float32{}, f.Floats...), tc.floats
			case example.KindBytes:
				s := []string{}
				for _, b := range f.Bytes {
					s = append(s, string(b))
				}
				got, want = s, tc.bytes
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("values %v, want %v", got, want)
			}
		})
	}
}

// TestWriteTFRecordListErrors: what no feature can hold fails naming the
// field and saying why, in a spec's words.
func TestWriteTFRecordListErrors(t *testing.T) {
	for _, tc := range []struct {
		val  []any
		want string
	}{
		{[]any{int64(1), "a"}, `field "v": a list of numbers and strings cannot be written as a feature (element 0 is a number, element 1 a string): a feature is one flat list of int64s, floats or bytes`},
		{[]any{"a", []byte("b"), true}, `field "v": a list of numbers and strings cannot be written as a feature (element 2 is a number, element 0 a string): a feature is one flat list of int64s, floats or bytes`},
		{[]any{1.5, []any{int64(1)}}, `field "v": a list in a list cannot be written as a feature: a feature is one flat list of int64s, floats or bytes`},
		{[]any{int64(1), nil}, `field "v": null in a list cannot be written as a feature: a feature is one flat list of int64s, floats or bytes`},
		{[]any{tensor.New(tensor.Float32, 2)}, `field "v": a tensor in a list cannot be written as a feature: a feature is one flat list of int64s, floats or bytes`},
	} {
		_, err := writeAndReadBack(t, map[string]any{"v": tc.val})
		if err == nil || err.Error() != tc.want {
			t.Errorf("%v: %v\nwant %s", tc.val, err, tc.want)
		}
	}
}

// TestWriteTFRecordListWarning: validate warns of a list whose elements
// are known only at run time, the one field type whose write can fail,
// saying what writes (it said "all numbers or all strings", and a list
// of numbers then failed "list mixes element types"); a field that
// always writes gets no warning.
func TestWriteTFRecordListWarning(t *testing.T) {
	const warning = `is list<any>, whose elements are known only at run time: it can be written only if they are all numbers and booleans (an int64_list, or a float_list if any is a float) or all strings and bytes (a bytes_list)`
	for _, tc := range []struct {
		name, stages string
		want         []string // the fields warned of
	}{
		{"a list of numbers and strings", `
  - {name: m, type: map, set: {x: '[1, "a"]'}}`, []string{"x"}},
		{"list<int64>", `
  - {name: m, type: map, set: {sh: 'shape(cast([1.5, 2], "float32"))'}}`, nil},
		{"list<string>", `
  - {name: m, type: map, set: {s: 'string(index)'}}
  - {name: b, type: batch, size: 2}`, nil},
		{"scalars and tensors", `
  - {name: m, type: map, set: {f: '1.5', t: 'cast([1.5, 2], "float32")', b: 'index > 0'}}`, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := "version: 1\nname: w\nstages:\n  - {name: r, type: range, count: 2}" + tc.stages +
				"\n  - {name: out, type: write_tfrecord, path: out.tfrecord}\n"
			_, diags := spec.Parse("w.yaml", []byte(src), spec.Options{Catalog: stages.Default()})
			if diags.HasErrors() {
				t.Fatalf("%v", diags)
			}
			var got []string
			for _, d := range diags {
				if d.Severity != spec.SevWarning || !strings.Contains(d.Message, "list") {
					continue
				}
				name, rest, _ := strings.Cut(strings.TrimPrefix(d.Message, "field "), " ")
				if rest != warning {
					t.Errorf("warning %q\nwant field %s %s", d.Message, name, warning)
				}
				got = append(got, strings.Trim(name, `"`))
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("warned of %v, want %v\n%v", got, tc.want, diags)
			}
		})
	}
}

// TestWriteTFRecordRefusesABatchOfLists: a batch stacks a list field into a
// list of lists, which no TFRecord feature holds: validate refuses it,
// saying what to do, instead of warning of a run that always fails (a
// new-user test, with parse_example's list of class names).
func TestWriteTFRecordRefusesABatchOfLists(t *testing.T) {
	src := "version: 1\nname: w\nstages:\n  - {name: r, type: range, count: 2}\n  - {name: m, type: map, set: {sh: 'shape(cast([1.5, 2], \"float32\"))', s: '[string(index)]'}}\n  - {name: b, type: batch, size: 2}\n  - {name: out, type: write_tfrecord, path: out.tfrecord}\n"
	_, diags := spec.Parse("w.yaml", []byte(src), spec.Options{Catalog: stages.Default()})
	var got []string
	for _, d := range diags {
		got = append(got, d.String())
	}
	const tail = `: a batch stacks each sample's list into a list of lists, and a TFRecord feature holds one flat list; drop the field before the batch (a map's drop), or write with write_jsonl, which keeps nested lists`
	want := []string{
		`w.yaml:7:5: stages[3]: field "s" is list<list>` + tail,
		`w.yaml:7:5: stages[3]: field "sh" is list<list>` + tail,
	}
	sort.Strings(got)
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestWriteTFRecordRefusesFloatOverflow: a float_list holds float32s, so
// a float64 beyond float32's range would be written as infinity (a user
// test: 1e39 was read back as inf, unseen). It fails naming the field and
// the element; an infinity or NaN already there, and values that only
// lose precision, are written as float32 rounds them.
func TestWriteTFRecordRefusesFloatOverflow(t *testing.T) {
	f64 := tensor.New(tensor.Float64, 3)
	copy(f64.Float64(), []float64{1, -5e38, 2})
	for _, tc := range []struct {
		name string
		val  any
		want string
	}{
		{"scalar", 1e39, `field "v": 1e+39 is beyond float32's range (±3.4028235e+38), and a float_list holds float32s: it would be written as +Inf; scale it in a map, or write it as an int or a string`},
		{"list", []any{int64(1), -4e38}, `field "v": element 1, -4e+38, is beyond float32's range (±3.4028235e+38), and a float_list holds float32s: it would be written as -Inf; scale it in a map, or write it as an int or a string`},
		{"tensor", f64, `field "v": element 1, -5e+38, is beyond float32's range (±3.4028235e+38), and a float_list holds float32s: it would be written as -Inf; scale it in a map, or write it as an int or a string`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := writeAndReadBack(t, map[string]any{"v": tc.val})
			if err == nil || err.Error() != tc.want {
				t.Errorf("%v\nwant %s", err, tc.want)
			}
		})
	}
	inf := math.Inf(1)
	ex, err := writeAndReadBack(t, map[string]any{"v": []any{inf, 1646034751.123, 5e-324, 3.4e38}})
	if err != nil {
		t.Fatal(err)
	}
	want := []float32{float32(inf), 1646034751.123, 0, 3.4e38}
	if got := ex.Features["v"].Floats; !reflect.DeepEqual(got, want) {
		t.Errorf("floats %v, want %v", got, want)
	}
}

// TestWriteTFRecordWarnsOfOtherShards: shards a run will not write, left
// by an earlier run with more of them, stay beside the new set, and a
// pattern reading the output would read them too (a user test: shards: 3,
// then 2, left o-00002 and said nothing). validate and apply warn, naming
// them; files that only look alike, and the shards it writes, are not.
func TestWriteTFRecordWarnsOfOtherShards(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"o-00000.tfrecord", "o-00001.tfrecord", "o-00002.tfrecord", "o-00003.tfrecord", "o-00004.tfrecord", "o-00005.tfrecord", "o-1.tfrecord", "o-00007.txt", "x-00008.tfrecord", "p-00000-of-00003.tfrecord", "p-00001-of-00002.tfrecord"} {
		if err := os.WriteFile(filepath.Join(dir, name), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct{ path, shards, want string }{
		{"o-{shard}.tfrecord", "2", "warning: stages[1].path: o-00002.tfrecord, o-00003.tfrecord, o-00004.tfrecord and 1 more match this path but are not among the 2 shards it writes (left by a run with another number of shards?): a pattern reading the output, such as o-*.tfrecord, would read them too; remove them, or write elsewhere"},
		{"o-{shard}.tfrecord", "5", "warning: stages[1].path: o-00005.tfrecord matches this path but is not among the 5 shards it writes (left by a run with another number of shards?): a pattern reading the output, such as o-*.tfrecord, would read it too; remove it, or write elsewhere"},
		{"o-{shard}.tfrecord", "6", ""},
		{"o-{shard}.tfrecord", "9", ""},
		{"x-{shard}.tfrecord", "1", "warning: stages[1].path: x-00008.tfrecord matches this path but is not the shard it writes (left by a run with another number of shards?): a pattern reading the output, such as x-*.tfrecord, would read it too; remove it, or write elsewhere"},
		{"o-{shard}-of-{shards}.tfrecord", "2", ""},
		{"p-{shard}-of-{shards}.tfrecord", "2", "warning: stages[1].path: p-00000-of-00003.tfrecord matches this path but is not among the 2 shards it writes (left by a run with another number of shards?): a pattern reading the output, such as p-*-of-*.tfrecord, would read it too; remove it, or write elsewhere"},
		{"o-00000.tfrecord", "1", ""},
	} {
		src := "version: 1\nname: w\nstages:\n  - {name: r, type: range, count: 3}\n  - {name: out, type: write_tfrecord, path: '" + tc.path + "', shards: " + tc.shards + "}\n"
		_, diags := spec.Parse(filepath.Join(dir, "w.yaml"), []byte(src), spec.Options{Catalog: stages.Default(), Environment: true})
		var got []string
		for _, d := range diags {
			got = append(got, strings.TrimPrefix(d.String(), filepath.Join(dir, "w.yaml")+":5:"))
		}
		var want []string
		if tc.want != "" {
			want = []string{tc.want}
		}
		for i := range got {
			if _, rest, ok := strings.Cut(got[i], " "); ok {
				got[i] = rest // the column
			}
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s, %s shards: got %q\nwant %q", tc.path, tc.shards, got, want)
		}
	}
}
