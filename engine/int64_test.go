package engine_test

import (
	"path/filepath"
	"testing"

	"github.com/piperun/piperun/example"
	"github.com/piperun/piperun/tfrecord"
)

// TestInt64TensorsWrittenExactly: a batch of int64 values above 2^53 is
// written exactly by write_jsonl and write_tfrecord, and indexed exactly
// by an expression. Found in review: every path went through a float64,
// so 2^53+1 came out as 2^53.
func TestInt64TensorsWrittenExactly(t *testing.T) {
	dir := t.TempDir()
	_, err := runSpec(t, dir, `
version: 1
name: bigint
stages:
  - {name: src, type: range, count: 2}
  - {name: m, type: map, set: {big: 'index + 9007199254740993'}, keep: [big]}
  - {name: b, type: batch, size: 2}
  - {name: again, type: map, set: {second: 'big[1]', small: 'cast(big, "int32")', back: 'cast(cast(big, "int32"), "int64")'}}
  - {name: out, type: write_jsonl, path: out.jsonl}
  - {name: tf, type: write_tfrecord, input: again, path: out.tfrecord}
`)
	if err != nil {
		t.Fatal(err)
	}
	// 9007199254740993 = 2^53 + 1; its low 32 bits are 1.
	want := `{"back":[1,2],"big":[9007199254740993,9007199254740994],"second":9007199254740994,"small":[1,2]}`
	if got := readLines(t, filepath.Join(dir, "out.jsonl")); len(got) != 1 || got[0] != want {
		t.Errorf("jsonl: got %q, want %q", got, want)
	}
	r, c, err := tfrecord.Open(filepath.Join(dir, "out.tfrecord"), tfrecord.None, true)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	rec, err := r.Next()
	if err != nil {
		t.Fatal(err)
	}
	ex, err := example.Unmarshal(rec)
	if err != nil {
		t.Fatal(err)
	}
	if got := ex.Features["big"].Ints; len(got) != 2 || got[0] != 9007199254740993 || got[1] != 9007199254740994 {
		t.Errorf("tfrecord: big = %v, want [9007199254740993 9007199254740994]", got)
	}
}
