package engine_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/piperun/piperun/spec"
	"github.com/piperun/piperun/stages"
)

// TestFilterNamesItsCondition: a condition that gives no bool fails
// naming the filter's where in the spec and the type in the spec's words
// (it said "expression gave <nil>" and "tensor.Tensor").
func TestFilterNamesItsCondition(t *testing.T) {
	dir := t.TempDir()
	_, err := runSpec(t, dir, `
version: 1
name: f
stages:
  - {name: src, type: range, count: 3}
  - name: keep
    type: filter
    where: 'index > 0 ? 1 : true'
  - {name: out, type: discard}
`)
	want := `stage "keep" (filter): sample 1 (epoch 0): where (` + filepath.Join(dir, "spec.yaml") + `:8:12): the condition gave int64, not a bool`
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("err = %v\nwant it to hold %s", err, want)
	}
}

// TestPiperunNameIsReserved: a map cannot set the field random functions
// read the run context through, and a jsonl key of that name comes out of
// a map and a filter as it went in; before, a map deleted it.
func TestPiperunNameIsReserved(t *testing.T) {
	dir := t.TempDir()
	_, diags := spec.Parse(filepath.Join(dir, "spec.yaml"), []byte(`
version: 1
name: r
stages:
  - {name: src, type: range, count: 1}
  - {name: m, type: map, set: {__piperun: 'index + 1'}}
  - {name: out, type: discard}
`), spec.Options{Catalog: stages.Default()})
	if want := "stages[1].set.__piperun: __piperun is piperun's own name"; !strings.Contains(fmt.Sprint(diags), want) {
		t.Errorf("diagnostics:\n%v\nwant %s", diags, want)
	}
	if err := os.WriteFile(filepath.Join(dir, "in.jsonl"), []byte(`{"a": 1, "__piperun": "mine"}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := runSpec(t, dir, `
version: 1
name: r
stages:
  - {name: src, type: files, pattern: in.jsonl}
  - {name: read, type: jsonl}
  - {name: m, type: map, set: {b: 'a + 1'}}
  - {name: f, type: filter, where: 'b > 0'}
  - {name: out, type: write_jsonl, path: out.jsonl}
`); err != nil {
		t.Fatal(err)
	}
	if got := readLines(t, filepath.Join(dir, "out.jsonl")); len(got) != 1 || !strings.Contains(got[0], `"__piperun":"mine"`) || !strings.Contains(got[0], `"b":2`) {
		t.Errorf("output %q; want the jsonl's __piperun kept and b 2", got)
	}
}
