package stages_test

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/piperun/piperun/sample"
	"github.com/piperun/piperun/spec"
	"github.com/piperun/piperun/stages"
	"github.com/piperun/piperun/tensor"
)

func TestGlob(t *testing.T) {
	dir := t.TempDir()
	for _, f := range []string{"a/x.tfrecord", "a/b/y.tfrecord", "a/b/c/z.tfrecord", "a/b/note.txt", "top.tfrecord"} {
		p := filepath.Join(dir, f)
		os.MkdirAll(filepath.Dir(p), 0o755)
		os.WriteFile(p, nil, 0o644)
	}
	// A broken symlink is no file, under * as under ** (the walk lists it
	// like one; found by the tester, whose run then failed to open it).
	if err := os.Symlink(filepath.Join(dir, "nowhere"), filepath.Join(dir, "a", "b", "broken.tfrecord")); err != nil {
		t.Fatal(err)
	}
	tests := []struct{ pattern, want string }{
		{"a/b/*.tfrecord", "a/b/y.tfrecord"},
		{"*.tfrecord", "top.tfrecord"},
		{"a/*.tfrecord", "a/x.tfrecord"},
		{"a/**/*.tfrecord", "a/b/c/z.tfrecord a/b/y.tfrecord a/x.tfrecord"},
		{"**/*.tfrecord", "a/b/c/z.tfrecord a/b/y.tfrecord a/x.tfrecord top.tfrecord"},
		{"a/**", "a/b/c/z.tfrecord a/b/note.txt a/b/y.tfrecord a/x.tfrecord"},
		{"nope/**/*.tfrecord", ""},
		{"a", ""}, // a directory is not a file
		// A file's ** is the file, as before a symlinked root was
		// followed ("not a directory").
		{"top.tfrecord/**", "top.tfrecord"},
		{"top.tfrecord", "top.tfrecord"},
		{"a/x.tfrecord", "a/x.tfrecord"},
		{`a/\x.tfrecord`, "a/x.tfrecord"},
	}
	for _, tc := range tests {
		got, err := stages.Glob(filepath.Join(dir, tc.pattern))
		if err != nil {
			t.Fatalf("%s: %v", tc.pattern, err)
		}
		for i := range got {
			got[i], _ = filepath.Rel(dir, got[i])
		}
		if s := strings.Join(got, " "); s != tc.want {
			t.Errorf("Glob(%s) = %q, want %q", tc.pattern, s, tc.want)
		}
	}
	if _, err := stages.Glob(filepath.Join(dir, "[")); err == nil {
		t.Error("bad pattern accepted")
	}
}

func TestShardFromEnv(t *testing.T) {
	tests := []struct {
		env          map[string]string
		index, count int
		err          string
	}{
		{nil, 0, 1, ""},
		{map[string]string{"RANK": "2", "WORLD_SIZE": "4"}, 2, 4, ""},
		{map[string]string{"SLURM_PROCID": "1", "SLURM_NTASKS": "3"}, 1, 3, ""},
		{map[string]string{"JOB_COMPLETION_INDEX": "5", "PIPERUN_SHARD_COUNT": "8"}, 5, 8, ""},
		{map[string]string{"PIPERUN_SHARD_INDEX": "0", "PIPERUN_SHARD_COUNT": "2", "RANK": "1", "WORLD_SIZE": "2"}, 0, 2, ""},
		{map[string]string{"RANK": "1"}, 0, 0, "shard: auto: RANK and WORLD_SIZE must be set together"},
		{map[string]string{"WORLD_SIZE": "1"}, 0, 1, ""},
		{map[string]string{"WORLD_SIZE": "4"}, 0, 0, "shard: auto: WORLD_SIZE=4 is set but RANK is not: without its rank every process would read every file (for one process reading every file, unset WORLD_SIZE or write shard: {index: 0, count: 1})"},
		{map[string]string{"PIPERUN_SHARD_COUNT": "4"}, 0, 0, "shard: auto: PIPERUN_SHARD_COUNT=4 is set but PIPERUN_SHARD_INDEX or JOB_COMPLETION_INDEX is not: without its rank every process would read every file (for one process reading every file, unset PIPERUN_SHARD_COUNT or write shard: {index: 0, count: 1})"},
		{map[string]string{"WORLD_SIZE": "x"}, 0, 0, `shard: auto: WORLD_SIZE="x" is not a whole number from 1`},
		{map[string]string{"WORLD_SIZE": "0"}, 0, 0, `shard: auto: WORLD_SIZE="0" is not a whole number from 1`},
		// An allocation's shell exports the task count alone: one shard.
		{map[string]string{"SLURM_NTASKS": "4"}, 0, 1, ""},
		{map[string]string{"RANK": "4", "WORLD_SIZE": "4"}, 0, 0, `shard: auto: RANK=4 must be below WORLD_SIZE=4 (ranks count from 0)`},
		{map[string]string{"RANK": "x", "WORLD_SIZE": "4"}, 0, 0, `shard: auto: RANK="x" is not a whole number from 0`},
		{map[string]string{"RANK": "-1", "WORLD_SIZE": "4"}, 0, 0, `shard: auto: RANK="-1" is not a whole number from 0`},
		{map[string]string{"SLURM_PROCID": "0", "SLURM_NTASKS": "0"}, 0, 0, `shard: auto: SLURM_NTASKS="0" is not a whole number from 1`},
		// A world size without its rank is an error under Slurm too,
		// where the Slurm pair hid it.
		{map[string]string{"SLURM_PROCID": "0", "SLURM_NTASKS": "1", "WORLD_SIZE": "2"}, 0, 0, `shard: auto: SLURM_PROCID and SLURM_NTASKS make this shard 0 of 1, but WORLD_SIZE="2" is set without RANK: set RANK too, unset WORLD_SIZE, or set PIPERUN_SHARD_INDEX and PIPERUN_SHARD_COUNT`},
		// export WORLD_SIZE=$SLURM_NTASKS in an sbatch script: it agrees.
		{map[string]string{"SLURM_PROCID": "2", "SLURM_NTASKS": "4", "WORLD_SIZE": "4"}, 2, 4, ""},
		{map[string]string{"JOB_COMPLETION_INDEX": "1", "PIPERUN_SHARD_COUNT": "3", "WORLD_SIZE": "3"}, 1, 3, ""},
		// srun running torchrun: the processes' ranks, not the nodes'.
		{map[string]string{"SLURM_PROCID": "1", "SLURM_NTASKS": "2", "RANK": "5", "WORLD_SIZE": "8"}, 5, 8, ""},
		// piperun's own pair overrides every launcher's.
		{map[string]string{"PIPERUN_SHARD_INDEX": "1", "PIPERUN_SHARD_COUNT": "2", "WORLD_SIZE": "4"}, 1, 2, ""},
	}
	for _, tc := range tests {
		i, c, err := stages.ShardFromEnv(func(k string) (string, bool) { v, ok := tc.env[k]; return v, ok })
		if tc.err != "" {
			if err == nil || err.Error() != tc.err {
				t.Errorf("%v: err %v, want %q", tc.env, err, tc.err)
			}
			continue
		}
		if err != nil || i != tc.index || c != tc.count {
			t.Errorf("%v: %d/%d %v, want %d/%d", tc.env, i, c, err, tc.index, tc.count)
		}
	}
}

func TestStack(t *testing.T) {
	mk := func(fields ...map[string]any) []*sample.Sample {
		out := make([]*sample.Sample, len(fields))
		for i, f := range fields {
			out[i] = &sample.Sample{ID: int64(i), Fields: f}
		}
		return out
	}
	ss := mk(
		map[string]any{"i": int64(1), "f": 0.5, "b": true, "s": "x", "t": tensor.FromInt64s([]int64{1, 2})},
		map[string]any{"i": int64(2), "f": 1.5, "b": false, "s": "y", "t": tensor.FromInt64s([]int64{3})},
	)
	for k, want := range map[string]string{
		"i": "[1 2]", "f": "[0.5 1.5]", "b": "[1 0]", "s": "[x y]",
	} {
		v, err := stages.Stack(ss, k, nil)
		if err != nil {
			t.Fatal(err)
		}
		var got string
		switch x := v.(type) {
		case *tensor.Tensor:
			vals := make([]float64, x.Len())
			for i := range vals {
				vals[i] = x.At(i)
			}
			got = fmt.Sprint(vals)
		default:
			got = fmt.Sprint(x)
		}
		if got != want {
			t.Errorf("Stack %s = %s, want %s", k, got, want)
		}
	}
	if _, err := stages.Stack(ss, "t", nil); err == nil || !strings.Contains(err.Error(), `field "t": shapes differ within a batch`) {
		t.Errorf("unpadded ragged tensors: %v", err)
	}
	v, err := stages.Stack(ss, "t", map[string]float64{"t": -1})
	if err != nil {
		t.Fatal(err)
	}
	if p := v.(*tensor.Tensor); !reflect.DeepEqual(p.Shape, []int{2, 2}) || !reflect.DeepEqual(p.Int64(), []int64{1, 2, 3, -1}) {
		t.Errorf("padded: %v %v", p.Shape, p.Int64())
	}
	mixed := mk(map[string]any{"i": int64(1)}, map[string]any{"i": "two"})
	if _, err := stages.Stack(mixed, "i", nil); err == nil || err.Error() != `field "i" is int64 in sample 0 (epoch 0) but string in sample 1 (epoch 0), within one batch` {
		t.Errorf("mixed: %v", err)
	}
	// Ints and floats of a key typed only at run time (jsonl) stack as
	// float64, in either order, as NumPy reads [1, 2.5] (found by a
	// new-user test: the batch failed).
	for _, ns := range [][]any{{int64(1), 2.5, int64(3)}, {2.5, int64(1), int64(3)}} {
		fs := make([]map[string]any, len(ns))
		for i, n := range ns {
			fs[i] = map[string]any{"n": n}
		}
		v, err := stages.Stack(mk(fs...), "n", nil)
		want := []float64{toF(ns[0]), toF(ns[1]), toF(ns[2])}
		if p, ok := v.(*tensor.Tensor); err != nil || !ok || p.DType != tensor.Float64 || !reflect.DeepEqual(p.Float64(), want) {
			t.Errorf("numbers %v: %v %v, want float64 %v", ns, v, err, want)
		}
	}
	if _, err := stages.Stack(mk(map[string]any{"i": int64(1)}, map[string]any{"i": 2.5}, map[string]any{"i": "x"}), "i", nil); err == nil ||
		err.Error() != `field "i" is int64 in sample 0 (epoch 0) but string in sample 2 (epoch 0), within one batch` {
		t.Errorf("numbers and a string: %v", err)
	}
	// A JSON null is named so, not as Go's <nil>.
	null := mk(map[string]any{"i": int64(1)}, map[string]any{"i": nil})
	if _, err := stages.Stack(null, "i", nil); err == nil || err.Error() != `field "i" is int64 in sample 0 (epoch 0) but null in sample 1 (epoch 0), within one batch` {
		t.Errorf("null: %v", err)
	}
	missing := mk(map[string]any{"i": int64(1)}, map[string]any{})
	if _, err := stages.Stack(missing, "i", nil); err == nil || err.Error() != `field "i" is missing from sample 1 (epoch 0)` {
		t.Errorf("missing: %v", err)
	}
}

func TestAppendJSON(t *testing.T) {
	img := tensor.New(tensor.Uint8, 2, 2, 1)
	copy(img.Data, []byte{1, 2, 3, 4})
	got, err := stages.AppendJSON(nil, map[string]any{
		"z": int64(-3), "a": 0.25, "b": []byte("hi"), "img": img, "l": []string{"p", "q"}, "n": nil, "t": true,
		"f32": tensor.FromFloat32s([]float32{0.1}),
	})
	if err != nil {
		t.Fatal(err)
	}
	want := `{"a":0.25,"b":"aGk=","f32":[0.1],"img":[[[1],[2]],[[3],[4]]],"l":["p","q"],"n":null,"t":true,"z":-3}`
	if string(got) != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}

// TestAppendJSONKeepsTypes: a float is written with a point or an
// exponent, so reading the line back gives a float again (1.0 written as 1
// came back an int64, and a batch of it and 2.5 failed); a string that is
// not UTF-8 is an error, not bytes silently replaced by U+FFFD.
func TestAppendJSONKeepsTypes(t *testing.T) {
	for _, tc := range []struct {
		v         any
		want, err string
	}{
		{1.0, `{"v":1.0}`, ""},
		{0.0, `{"v":0.0}`, ""},
		{math.Copysign(0, -1), `{"v":-0.0}`, ""},
		{2.5, `{"v":2.5}`, ""},
		{1e21, `{"v":1e+21}`, ""},
		{1e-7, `{"v":1e-07}`, ""},
		{int64(1), `{"v":1}`, ""},
		{tensor.FromFloat32s([]float32{1, 0.5, 3}), `{"v":[1.0,0.5,3.0]}`, ""},
		{"é", `{"v":"é"}`, ""},
		{"a\xffb", "", `field "v": string of 3 bytes is not valid UTF-8 (byte 1 is 0xff), and a JSON string cannot hold it: read it as bytes (written as base64) or write it with write_tfrecord`},
		{[]string{"ok", "\xc3"}, "", `field "v": string of 1 bytes is not valid UTF-8 (byte 0 is 0xc3), and a JSON string cannot hold it: read it as bytes (written as base64) or write it with write_tfrecord`},
	} {
		got, err := stages.AppendJSON(nil, map[string]any{"v": tc.v})
		if tc.err != "" {
			if err == nil || err.Error() != tc.err {
				t.Errorf("%#v: %s, %v; want error %q", tc.v, got, err, tc.err)
			}
			continue
		}
		if err != nil || string(got) != tc.want {
			t.Errorf("%#v: %s, %v; want %s", tc.v, got, err, tc.want)
			continue
		}
		back, err := stages.ParseJSONLine(got)
		if err != nil {
			t.Fatal(err)
		}
		if _, isFloat := tc.v.(float64); isFloat && reflect.TypeOf(back["v"]) != reflect.TypeOf(0.0) {
			t.Errorf("%s read back as %T", got, back["v"])
		}
	}
}

func TestParseJSONLine(t *testing.T) {
	tests := []struct{ in, want, err string }{
		{`{"a": 1, "b": 2.5, "c": "x", "d": [1, "y"], "e": null, "f": true}`, `map[a:1 b:2.5 c:x d:[1 y] e:<nil> f:true]`, ""},
		{`{"big": 12345678901234567}`, `map[big:12345678901234567]`, ""},
		{`{"a": {"b": 1}}`, "", `key "a": nested objects are not supported; flatten them into keys`},
		{`[1, 2]`, "", "line is an array, not a JSON object"},
		{`"x"`, "", "line is a string, not a JSON object"},
		{`{"a": 1`, "", "invalid JSON: unexpected EOF"},
		{`{"a": 1} {"b": 2}`, "", "trailing data after the JSON object"},
		{`null`, "", "line is null, not a JSON object"},
		{`{"a": 9223372036854775807, "b": -9223372036854775808}`, `map[a:9223372036854775807 b:-9223372036854775808]`, ""},
		{`{"a": 9223372036854775808}`, "", `key "a": integer 9223372036854775808 does not fit in int64; write it as a string`},
		{`{"a": [1, -9223372036854775809]}`, "", `key "a": integer -9223372036854775809 does not fit in int64; write it as a string`},
		{`{"a": 9223372036854775808.0}`, `map[a:9.223372036854776e+18]`, ""},
		{`{"a": [1e400]}`, "", `key "a": number 1e400 is out of the range of a float64 (about ±1.8e308); write it as a string`},
		{"{\"a\": \"x\xffy\"}", "", "line is not valid UTF-8 (byte 8 is 0xff); JSON text must be UTF-8"},
		{"{\"\xc3\": 1}", "", "line is not valid UTF-8 (byte 2 is 0xc3); JSON text must be UTF-8"},
		{`{"a": "\u00e9\ud800"}`, "", `a string holds \ud800 at byte 13, half of a UTF-16 surrogate pair, which UTF-8 text cannot hold; write the character itself or its pair`},
		{`{"a": "\udc00\ud800"}`, "", `a string holds \udc00 at byte 7, half of a UTF-16 surrogate pair, which UTF-8 text cannot hold; write the character itself or its pair`},
		{`{"a": "\ud83d\ude00 \\ud800 \\\u00e9\"\/"}`, `map[a:😀 \ud800 \é"/]`, ""},
		{`{"a": 1}]`, "", "trailing data after the JSON object"},
		{`{"a": 1}}`, "", "trailing data after the JSON object"},
		{`{"a": 1} } x`, "", "trailing data after the JSON object"},
		{"{\"a\": 1} \t\r\n", `map[a:1]`, ""},
	}
	for _, tc := range tests {
		got, err := stages.ParseJSONLine([]byte(tc.in))
		if tc.err != "" {
			if err == nil || err.Error() != tc.err {
				t.Errorf("%s: err %v, want %q", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil || fmt.Sprint(got) != tc.want {
			t.Errorf("%s: %v %v, want %s", tc.in, got, err, tc.want)
		}
	}
	if v, _ := stages.ParseJSONLine([]byte(`{"a": 1}`)); reflect.TypeOf(v["a"]) != reflect.TypeOf(int64(0)) {
		t.Errorf("integers should be int64, got %T", v["a"])
	}
}

// FuzzParseJSONLine: the JSON-lines parser never panics, and whatever it
// accepts can be written back with AppendJSON and parsed to the same value.
func FuzzParseJSONLine(f *testing.F) {
	for _, s := range []string{`{"a": 1, "b": [1.5, "x"], "c": null}`, `{}`, `{"a": {"b": 1}}`, `{"a": 1e400}`, `{"a":"\u00e9"}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := stages.ParseJSONLine(b)
		if err != nil {
			return
		}
		out, err := stages.AppendJSON(nil, m)
		if err != nil {
			// Only non-finite floats cannot be written back, by design.
			if !strings.Contains(err.Error(), "cannot be written as JSON") {
				t.Fatalf("accepted %q but cannot write it back: %v", b, err)
			}
			return
		}
		again, err := stages.ParseJSONLine(out)
		if err != nil {
			t.Fatalf("re-parse of %s: %v", out, err)
		}
		if !reflect.DeepEqual(again, m) {
			t.Fatalf("round trip changed %v into %v", m, again)
		}
	})
}

// TestBatchShapeWarnings: a batched image field of unknown shape gets the
// advice that fits what is unknown: a size (resize), a channel count
// (decode with fixed channels, not pad, which would put alpha in green),
// or both.
func TestBatchShapeWarnings(t *testing.T) {
	const src = `version: 1
name: w
stages:
  - {name: f, type: files, pattern: '*.png'}
  - {name: m, type: map, set: {img: '%s'}, keep: [img]}
  - {name: b, type: batch, size: 2}
  - {name: out, type: discard}
`
	for _, tc := range []struct{ expr, want string }{
		{`decode_image(read_file(path), 3)`, `field "img" is tensor<uint8>[? ? 3]; if its shape varies between samples, batching fails: add pad: {img: 0} or resize first`},
		{`decode_image(read_file(path), 0)`, `field "img" is tensor<uint8>[? ? ?]; if its shape varies between samples, batching fails: for images, resize to one size and decode with a fixed channel count, e.g. decode_image(b, 3) | resize(224, 224); for other data, add pad: {img: 0}`},
		{`decode_image(read_file(path), 0) | resize(8, 8)`, `field "img" is tensor<uint8>[8 8 ?]: its last dimension is known only at run time, and batching fails if it varies between samples; for images, decode with a fixed channel count, e.g. decode_image(b, 3) or decode_image(b, 4), rather than 0 (as stored); for other data, add pad: {img: 0}`},
		{`decode_image(read_file(path), 3) | resize(8, 8)`, ``},
		{`decode_raw(read_file(path), "int32")`, `field "img" is tensor<int32>[?]; if its shape varies between samples, batching fails: add pad: {img: 0}`},
	} {
		_, diags := spec.Parse("w.yaml", []byte(fmt.Sprintf(src, tc.expr)), spec.Options{Catalog: stages.Default()})
		var got []string
		for _, d := range diags {
			got = append(got, d.Message)
		}
		if diags.HasErrors() || strings.Join(got, "\n") != tc.want {
			t.Errorf("%s:\ngot  %q\nwant %q", tc.expr, got, tc.want)
		}
	}
}

// TestCacheBelowAShuffleWarns: a shuffle above a cache only orders the
// pass that fills it; validate says so, and when a shuffle below the cache
// reorders the replays, it names that one instead of advising one. A
// cache with no shuffle above it gets no warning.
func TestCacheBelowAShuffleWarns(t *testing.T) {
	const src = `version: 1
name: c
seed: 1
stages:
  - {name: f, type: files, pattern: '*.txt', shuffle: %v}
  - {name: c, type: cache, dir: .c}
%s  - {name: out, type: discard}
`
	const replays = `stage "f" above this cache shuffles, but a cache replays its samples in the order of their IDs: `
	for _, tc := range []struct {
		shuffle bool
		below   string
		want    string
	}{
		{true, "", replays + "the epochs after the one that fills it (and later runs) are not shuffled; shuffle below the cache"},
		{true, "  - {name: m, type: map, set: {x: '1'}}\n  - {name: s, type: shuffle, buffer: 8}\n",
			replays + `after the pass that fills it (and in later runs) only shuffle "s" below reorders them, within its buffer, and the shuffle of stage "f" changes the first pass alone`},
		{false, "  - {name: s, type: shuffle, buffer: 8}\n", ""},
	} {
		_, diags := spec.Parse("c.yaml", []byte(fmt.Sprintf(src, tc.shuffle, tc.below)), spec.Options{Catalog: stages.Default()})
		var got []string
		for _, d := range diags {
			got = append(got, d.Message)
		}
		if diags.HasErrors() || strings.Join(got, "\n") != tc.want {
			t.Errorf("shuffle %v, below %q:\ngot  %q\nwant %q", tc.shuffle, tc.below, got, tc.want)
		}
	}
}

// TestCacheDirNamedAsSuch: a cache directory that cannot be made is called
// a cache directory, not an output directory.
func TestCacheDirNamedAsSuch(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	src := "version: 1\nname: c\nseed: 1\nstages:\n  - {name: r, type: range, count: 3}\n  - {name: c, type: cache, dir: file/cache}\n  - {name: out, type: discard}\n"
	_, diags := spec.Parse(filepath.Join(dir, "c.yaml"), []byte(src), spec.Options{Catalog: stages.Default(), Environment: true})
	want := "c.yaml:6:33: stages[1].dir: " + file + " is not a directory"
	if len(diags) != 1 || !strings.HasSuffix(diags[0].String(), want) {
		t.Errorf("got %v\nwant one ending %q", diags, want)
	}
	if _, err := os.Stat("/proc/self"); err != nil {
		t.Skip("no /proc here")
	}
	src = strings.Replace(src, "file/cache", "/proc/piperun-cache", 1)
	_, diags = spec.Parse(filepath.Join(dir, "c.yaml"), []byte(src), spec.Options{Catalog: stages.Default(), Environment: true})
	want = "stages[1].dir: cache directory /proc/piperun-cache cannot be made in /proc: it takes no new files"
	if len(diags) != 1 || !strings.HasSuffix(diags[0].String(), want) {
		t.Errorf("got %v\nwant one ending %q", diags, want)
	}
}

// toF returns an int64 or float64 as a float64.
func toF(v any) float64 {
	if i, ok := v.(int64); ok {
		return float64(i)
	}
	return v.(float64)
}

// TestFilesSaysWhyNothingMatched: a pattern that matches nothing says
// whether its folder is missing or files match but for case (*.jpeg
// against *.JPEG); labels: from_dir over files of one folder is an error,
// as they have no class folder; class folders are not.
func TestFilesSaysWhyNothingMatched(t *testing.T) {
	dir := t.TempDir()
	for _, f := range []string{"flat/a.JPEG", "flat/b.JPEG", "root/cat/c.jpg", "root/dog/d.jpg", "root/MANIFEST.tsv", "flat/c[3].jpg", "photos [2024]/cat/e.jpg",
		"tree/cat/x.jpg", "tree/dog/y.jpg"} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, f)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(dir, "empty"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, l := range []string{"links/a.jpg", "links/b.jpg"} {
		if err := os.MkdirAll(filepath.Join(dir, "links"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink("/mnt/not-mounted/x.jpg", filepath.Join(dir, l)); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct{ pattern, labels, want string }{
		{"flat/*.jpeg", "", `stages[0].pattern: pattern "flat/*.jpeg" matches no file (resolved to ` + filepath.Join(dir, "flat/*.jpeg") + `); 2 match it but for case, such as ` + filepath.Join(dir, "flat/a.JPEG")},
		{"nope/*.jpeg", "", `stages[0].pattern: pattern "nope/*.jpeg" matches no file (resolved to ` + filepath.Join(dir, "nope/*.jpeg") + `); folder ` + filepath.Join(dir, "nope") + ` does not exist`},
		// ImageFolder's convention: files in the folder a pattern starts
		// from have no class (TestFromDirIsImageFolder has the rest).
		{"flat/*.JPEG", "from_dir", `stages[0].labels: every file pattern "flat/*.JPEG" matches sits directly in ` + filepath.Join(dir, "flat") + `, the folder it starts from, so none has a class: a file's class is the folder directly in ` + filepath.Join(dir, "flat") + ` that holds it (` + filepath.Join(dir, "flat", "<class>", "…") + `, torchvision's ImageFolder layout); match files in class folders (flat/*/*.JPEG, or */*.JPEG if flat is itself one class's folder), or drop labels: from_dir`},
		{"root/*/*.jpg", "from_dir", ``},
		// Files beside the class folders are left out, as ImageFolder
		// leaves them out.
		{"root/**", "from_dir", `warning: stages[0].labels: 1 file (` + filepath.Join(dir, "root/MANIFEST.tsv") + `) that pattern "root/**" matches sits directly in ` + filepath.Join(dir, "root") + `, the folder it starts from, outside the class folders: labels: from_dir leaves it out, as torchvision's ImageFolder does (a file's class is the folder directly in ` + filepath.Join(dir, "root") + ` that holds it); match the class folders' files only (root/*/**) not to list it`},
		{"flat/*.JPEG", "", ``},
		// No wildcard: the folder is the file's; a folder of other case
		// matches but for case.
		{"flat/nofile.jsonl", "", `stages[0].pattern: pattern "flat/nofile.jsonl" matches no file (resolved to ` + filepath.Join(dir, "flat/nofile.jsonl") + `)`},
		{"flat/A.jpeg", "", `stages[0].pattern: pattern "flat/A.jpeg" matches no file (resolved to ` + filepath.Join(dir, "flat/A.jpeg") + `); 1 matches it but for case, such as ` + filepath.Join(dir, "flat/a.JPEG")},
		{"flat", "", `stages[0].pattern: pattern "flat" matches no file (resolved to ` + filepath.Join(dir, "flat") + `); it is a folder: match the files in it with flat/*`},
		{"FLAT/*.JPEG", "", `stages[0].pattern: pattern "FLAT/*.JPEG" matches no file (resolved to ` + filepath.Join(dir, "FLAT/*.JPEG") + `); 2 match it but for case, such as ` + filepath.Join(dir, "flat/a.JPEG")},
		// A name with a wildcard character in it.
		{"flat/c[3].jpg", "", `stages[0].pattern: pattern "flat/c[3].jpg" matches no file (resolved to ` + filepath.Join(dir, "flat/c[3].jpg") + `); ` + filepath.Join(dir, "flat/c[3].jpg") + ` exists, but *, ? and [ are wildcards: escape them with a backslash to match them as they stand (flat/c\[3].jpg)`},
		{"photos [2024]/*/*.jpg", "", `stages[0].pattern: pattern "photos [2024]/*/*.jpg" matches no file (resolved to ` + filepath.Join(dir, "photos [2024]/*/*.jpg") + `); ` + filepath.Join(dir, "photos [2024]") + ` exists, but *, ? and [ are wildcards: escape them with a backslash to match them as they stand (photos \[2024]/*/*.jpg)`},
		{`photos \[2024]/*/*.jpg`, "", ``},
		// A folder of class folders, and an empty one.
		{"tree", "from_dir", `stages[0].pattern: pattern "tree" matches no file (resolved to ` + filepath.Join(dir, "tree") + `); it is a folder of folders: match the files in them with tree/*/*, or at any depth with tree/**`},
		{"empty", "", `stages[0].pattern: pattern "empty" matches no file (resolved to ` + filepath.Join(dir, "empty") + `); it is an empty folder`},
		// Names that match but are no file: links into a dataset not
		// mounted, folders.
		{"links/*.jpg", "", `stages[0].pattern: pattern "links/*.jpg" matches no file (resolved to ` + filepath.Join(dir, "links/*.jpg") + `); 2 names match, none a regular file; 2 are symlinks that lead nowhere (such as ` + filepath.Join(dir, "links/a.jpg") + `): is its target mounted?`},
		{"tree/*", "", `stages[0].pattern: pattern "tree/*" matches no file (resolved to ` + filepath.Join(dir, "tree/*") + `); 2 names match, none a regular file; 2 are folders (such as ` + filepath.Join(dir, "tree/cat") + `): match the files in them with tree/*/*`},
		{"empty/*", "", `stages[0].pattern: pattern "empty/*" matches no file (resolved to ` + filepath.Join(dir, "empty/*") + `); folder ` + filepath.Join(dir, "empty") + ` is empty`},
	} {
		src := fmt.Sprintf("version: 1\nname: f\nstages:\n  - {name: f, type: files, pattern: '%s'%s}\n  - {name: out, type: discard}\n", tc.pattern, map[bool]string{true: ", labels: from_dir"}[tc.labels != ""])
		_, diags := spec.Parse(filepath.Join(dir, "f.yaml"), []byte(src), spec.Options{Catalog: stages.Default(), Environment: true})
		var got []string
		for _, d := range diags {
			got = append(got, strings.SplitN(d.String(), ": ", 2)[1])
		}
		if strings.Join(got, "\n") != tc.want {
			t.Errorf("%s %s:\n got %q\nwant %q", tc.pattern, tc.labels, got, tc.want)
		}
	}
}

// TestNoMatchInAFolderWithWildcards: a spec in a folder whose name holds
// wildcard characters is told about its patterns in the folder's own name
// ("sp\[1]" named no folder), gets the hint for a case that differs, and a
// pattern that is itself wildcards is not taken for a folder.
func TestNoMatchInAFolderWithWildcards(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "case[1]")
	for _, d := range []string{"flat", "[abc]", "empty/x.jpg", "[deep]/sub", "deep/x.jpg/sub"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{"flat/a.JPEG", "[deep]/sub/1.jpg", "deep/x.jpg/sub/1.jpg"} {
		if err := os.WriteFile(filepath.Join(dir, f), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct{ pattern, want string }{
		{"flat/*.jpeg", `stages[0].pattern: pattern "flat/*.jpeg" matches no file (resolved to ` + filepath.Join(dir, "flat/*.jpeg") + `); 1 matches it but for case, such as ` + filepath.Join(dir, "flat/a.JPEG")},
		{"[abc]", `stages[0].pattern: pattern "[abc]" matches no file (resolved to ` + filepath.Join(dir, "[abc]") + `); ` + filepath.Join(dir, "[abc]") + ` exists, but it is a folder that holds no file (and *, ? and [ are wildcards: a backslash escapes them)`},
		// Files only deeper down: **.
		{"[deep]", `stages[0].pattern: pattern "[deep]" matches no file (resolved to ` + filepath.Join(dir, "[deep]") + `); ` + filepath.Join(dir, "[deep]") + ` exists, but *, ? and [ are wildcards: escape them with a backslash to match them as they stand (\[deep]/**)`},
		{"deep/*.jpg", `stages[0].pattern: pattern "deep/*.jpg" matches no file (resolved to ` + filepath.Join(dir, "deep/*.jpg") + `); 1 name matches, none a regular file; 1 is a folder (such as ` + filepath.Join(dir, "deep/x.jpg") + `), with files only deeper down: match them with deep/*.jpg/**`},
		// . and .. after a wildcard would be cleaned through it.
		{"flat/*/.", `stages[0].pattern: pattern "flat/*/." has . after a wildcard, which would be read as if the folder before it were named: write . and .. only after folders named in full`},
		{"flat/*/../a.JPEG", `stages[0].pattern: pattern "flat/*/../a.JPEG" has .. after a wildcard, which would be read as if the folder before it were named: write . and .. only after folders named in full`},
		// The escaped pattern it suggests matches (its check went one
		// folder too high past the leading ..).
		{"../case[1]/flat/*.JPEG", `stages[0].pattern: pattern "../case[1]/flat/*.JPEG" matches no file (resolved to ` + filepath.Join(dir, "../case[1]/flat/*.JPEG") + `); ` + dir + ` exists, but *, ? and [ are wildcards: escape them with a backslash to match them as they stand (../case\[1]/flat/*.JPEG)`},
		// Hints that would lead to another pattern matching nothing say
		// so.
		{"empty/*.jpg", `stages[0].pattern: pattern "empty/*.jpg" matches no file (resolved to ` + filepath.Join(dir, "empty/*.jpg") + `); 1 name matches, none a regular file; 1 is a folder (such as ` + filepath.Join(dir, "empty/x.jpg") + `), which holds no file`},
		{"empty", `stages[0].pattern: pattern "empty" matches no file (resolved to ` + filepath.Join(dir, "empty") + `); it is a folder of folders, which hold no file`},
		{"flat/", `stages[0].pattern: pattern "flat/" ends with /, which matches folders, not files: match the files in them with flat/*`},
		{"flat", `stages[0].pattern: pattern "flat" matches no file (resolved to ` + filepath.Join(dir, "flat") + `); it is a folder: match the files in it with flat/*`},
	} {
		src := fmt.Sprintf("version: 1\nname: f\nstages:\n  - {name: f, type: files, pattern: '%s'}\n  - {name: out, type: discard}\n", tc.pattern)
		_, diags := spec.Parse(filepath.Join(dir, "f.yaml"), []byte(src), spec.Options{Catalog: stages.Default(), Environment: true})
		var got []string
		for _, d := range diags {
			got = append(got, strings.SplitN(d.String(), ": ", 2)[1])
		}
		if strings.Join(got, "\n") != tc.want {
			t.Errorf("%s:\n got %q\nwant %q", tc.pattern, got, tc.want)
		}
	}
}

// TestValidateWarnsOfAnEmptyShard: files are dealt to shards one by one,
// so with fewer files than shards a rank gets none; validate says so, as
// apply does. Files that do not divide into the shards
// give ranks different epochs, which puts a DDP job's ranks out of step
// (a later new-user test), unless a take right below evens them; files
// that divide get no warning. shard: auto is checked with the launcher's
// variables (it was not checked at all).
func TestValidateWarnsOfAnEmptyShard(t *testing.T) {
	dir := t.TempDir()
	for _, f := range []string{"a.txt", "b.txt", "c.txt", "d.txt", "e.txt"} {
		if err := os.WriteFile(filepath.Join(dir, f), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	const outOfStep = "so the ranks see different numbers of samples an epoch: ranks that step together (DDP) fall out of step, the longer ones' last steps of an epoch meeting the shorter ones' first of the next, and at the end the longer ones wait for steps the others never take; "
	for _, tc := range []struct {
		shard, below string
		rank         string // RANK, with WORLD_SIZE=2, for shard: auto
		want         string
	}{
		{"{index: 0, count: 2}", "", "", "warning: stages[0].shard: the 5 files matched do not divide into 2 shards: shard 0 gets 3 files, the others 2 (this one, 0: 3), " + outOfStep + "match a multiple of 2 files, or put a take of 2 (the smaller shards' files) right after this stage"},
		{"{index: 1, count: 2}", "{name: t, type: take, count: 2}", "", ""},
		// Through stages that emit a sample for each they read (a review:
		// files → decode → take warned).
		{"{index: 1, count: 2}", "{name: m, type: map, set: {a: 'path'}}\n  - {name: s, type: shuffle, buffer: 4}\n  - {name: t, type: take, count: 2}", "", ""},
		{"{index: 1, count: 2}", "{name: m, type: map, set: {a: 'path'}, on_error: skip}\n  - {name: t, type: take, count: 2}", "", "warning: stages[0].shard: the 5 files matched do not divide into 2 shards: shard 0 gets 3 files, the others 2 (this one, 1: 2), " + outOfStep + "match a multiple of 2 files, or put a take of 2 (the smaller shards' files) right after this stage"},
		{"{index: 1, count: 2}", "{name: b, type: batch, size: 2}\n  - {name: t, type: take, count: 2}", "", "warning: stages[0].shard: the 5 files matched do not divide into 2 shards: shard 0 gets 3 files, the others 2 (this one, 1: 2), " + outOfStep + "match a multiple of 2 files, or put a take of 2 (the smaller shards' files) right after this stage"},
		{"{index: 1, count: 2}", "{name: t, type: take, count: 3}", "", "warning: stages[0].shard: the 5 files matched do not divide into 2 shards: shard 0 gets 3 files, the others 2 (this one, 1: 2), " + outOfStep + "match a multiple of 2 files, or put a take of 2 (the smaller shards' files) right after this stage"},
		{"{index: 0, count: 2}", "{name: t, type: skip, count: 1}", "", "warning: stages[0].shard: the 5 files matched do not divide into 2 shards: shard 0 gets 3 files, the others 2 (this one, 0: 3), " + outOfStep + "match a multiple of 2 files, or put a take of 2 (the smaller shards' files) right after this stage"},
		{"auto", "", "1", "warning: stages[0].shard: the 5 files matched do not divide into 2 shards: shard 0 gets 3 files, the others 2 (this one, 1: 2), " + outOfStep + "match a multiple of 2 files, or put a take of 2 (the smaller shards' files) right after this stage"},
		{"{index: 1, count: 6}", "", "", "warning: stages[0].shard: the 5 files matched do not divide into 6 shards: shards 0 to 4 get 1 file, the others 0 (this one, 1: 1), " + outOfStep + "match 6 files or a multiple of them"},
		{"{index: 5, count: 6}", "", "", "warning: stages[0].shard: shard 5 of 6 gets no files: the 5 files matched all go to other shards (sharding is by file), so this process emits no samples"},
		{"{index: 2, count: 5}", "", "", ""},
	} {
		if tc.rank != "" {
			t.Setenv("RANK", tc.rank)
			t.Setenv("WORLD_SIZE", "2")
		}
		list := "  - {name: f, type: files, pattern: '*.txt', shard: " + tc.shard + "}\n"
		if tc.below != "" {
			list += "  - " + tc.below + "\n"
		}
		src := "version: 1\nname: s\nstages:\n" + list + "  - {name: out, type: discard}\n"
		_, diags := spec.Parse(filepath.Join(dir, "s.yaml"), []byte(src), spec.Options{Catalog: stages.Default(), Environment: true})
		got := ""
		if len(diags) > 0 {
			got = strings.SplitN(diags[0].String(), ": ", 2)[1]
		}
		if len(diags) > 1 || got != tc.want {
			t.Errorf("shard %s, below %q: got %v\nwant %q", tc.shard, tc.below, diags, tc.want)
		}
	}
}

// TestPadMustFitExactly: validate refuses a pad its field would change
// (-1 in uint8) and an integer a number cannot hold exactly (above 2^53),
// at the pad's line and column, and passes one that fits (a new-user
// test: pad 9223372036854775807 became -9223372036854775808).
func TestPadMustFitExactly(t *testing.T) {
	for _, tc := range []struct{ pad, want string }{
		{"-1", `f.yaml:6:46: stages[2].pad.v: pad -1 does not fit uint8 (an integer in its range) (field "v" is tensor<uint8>[?])`},
		{"9007199254740993", `f.yaml:6:46: stages[2].pad.v: integer 9007199254740993 cannot be held exactly here: it is read as a number, exact up to 2^53 (9007199254740992), and would become 9007199254740992`},
		{"0x7fffffffffffffff", `f.yaml:6:46: stages[2].pad.v: integer 0x7fffffffffffffff cannot be held exactly here: it is read as a number, exact up to 2^53 (9007199254740992), and would become 9223372036854775808`},
		{"255", ``},
	} {
		src := "version: 1\nname: f\nstages:\n  - {name: src, type: range, count: 4}\n  - {name: m, type: map, set: {v: 'cast(one_hot(0, int(index) + 1), \"uint8\")'}}\n  - {name: b, type: batch, size: 2, pad: {v: " + tc.pad + "}}\n  - {name: out, type: discard}\n"
		_, diags := spec.Parse("f.yaml", []byte(src), spec.Options{Catalog: stages.Default()})
		var got []string
		for _, d := range diags {
			if d.Severity == spec.SevError {
				got = append(got, d.String())
			}
		}
		if strings.Join(got, "\n") != tc.want {
			t.Errorf("pad %s:\n got %q\nwant %q", tc.pad, got, tc.want)
		}
	}
}

// TestJoinCounts: what a join emits an epoch, from its inputs' counts (-1
// unknown), for plan's estimates.
func TestJoinCounts(t *testing.T) {
	for _, tc := range []struct {
		name string
		c    interface{ EpochSamplesOf([]int64) int64 }
		ins  []int64
		want int64
	}{
		{"zip", &stages.ZipConfig{}, []int64{40, 25, 70}, 25},
		{"zip, one unknown", &stages.ZipConfig{}, []int64{40, -1}, -1},
		{"concat", &stages.ConcatConfig{}, []int64{40, 25}, 65},
		{"concat, one unknown", &stages.ConcatConfig{}, []int64{-1, 25}, -1},
		{"mix", &stages.MixConfig{}, []int64{40, 25}, 65},
		{"mix, a weight of 0", &stages.MixConfig{Weights: []float64{1, 0}}, []int64{40, 25}, 40},
		{"mix, stop_on_empty", &stages.MixConfig{StopOnEmpty: true}, []int64{40, 25}, -1},
	} {
		if got := tc.c.EpochSamplesOf(tc.ins); got != tc.want {
			t.Errorf("%s of %v: %d, want %d", tc.name, tc.ins, got, tc.want)
		}
	}
}
