package cli_test

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestValidateProbe: the size of a record is unknown until read, so a
// shuffle buffer too large for the budget passes plain validate and fails
// validate --probe, with the measured numbers.
func TestValidateProbe(t *testing.T) {
	dir := t.TempDir()
	data, _ := filepath.Abs("../examples/data/shapes")
	spec := writeSpec(t, dir, "probe.yaml", `
version: 1
name: probe
resources: {memory: 64MiB}
stages:
  - {name: files, type: files, pattern: `+data+`/train-*.tfrecord}
  - {name: records, type: tfrecord}
  - {name: sh, type: shuffle, buffer: 100000}
  - {name: out, type: discard}
`)
	if r := run(t, "validate", spec); r.code != 0 {
		t.Fatalf("plain validate: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r := run(t, "validate", "--probe", "32", spec)
	if r.code != 1 {
		t.Fatalf("validate --probe: exit %d, want 1\n%s%s", r.code, r.stdout, r.stderr)
	}
	want := `probe.yaml:4:21: resources.memory: stage "sh" buffers 100000 samples of about `
	if !strings.Contains(r.stdout, want) || !strings.Contains(r.stdout, "more than resources.memory (64MiB)") {
		t.Errorf("stdout:\n%s\nwant it to contain %q", r.stdout, want)
	}
	// plan shows the measured sizes, and rejects the spec as validate does.
	p := run(t, "plan", "--probe", "32", spec)
	if p.code != 3 || !strings.Contains(p.stdout, "~") || !strings.Contains(p.stderr, want) {
		t.Errorf("plan --probe: exit %d, want 3 with measured sizes and %q:\n%s%s", p.code, want, p.stdout, p.stderr)
	}
}
