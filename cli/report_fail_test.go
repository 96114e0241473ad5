package cli_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/piperun/piperun/cache"
	"github.com/piperun/piperun/spec"
	"github.com/piperun/piperun/stages"
)

// TestReportOfARunThatCannotStart: a run that fails before its first
// sample (its cache is being filled by another holder) still writes the
// --report file, with ok false and the reason.
func TestReportOfARunThatCannotStart(t *testing.T) {
	dir := t.TempDir()
	p := writeSpec(t, dir, "c.yaml", `version: 1
name: held
stages:
  - {name: src, type: range, count: 10}
  - {name: c, type: cache, dir: caches}
  - {name: out, type: discard}
`)
	sp, diags := spec.Load(p, spec.Options{Catalog: stages.Default()})
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	fp, _, err := stages.Fingerprint(sp, sp.Stages[1], 0)
	if err != nil {
		t.Fatal(err)
	}
	held, err := cache.Open(filepath.Join(dir, "caches"), fp, cache.Manifest{}, cache.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	report := filepath.Join(dir, "report.json")
	r := run(t, "apply", "--progress", "never", "--report", report, p)
	if r.code != 1 || !strings.Contains(r.stderr, "is in use by another piperun process") {
		t.Fatalf("got %s\nwant exit 1, in use", r)
	}
	rep, b := readReport(t, report)
	if rep.OK == nil || *rep.OK || !strings.Contains(rep.Error, "is in use by another piperun process") || rep.Budget <= 0 {
		t.Errorf("report %s: want ok false, the error and the budget", b)
	}
	// The spec compiled, with no seed set: the seed drawn is written, so
	// the run can be repeated.
	if rep.Seed == nil {
		t.Errorf("report %s: want the seed", b)
	}
}

// TestReportOfAnInvalidSpec: an apply that stops at validation replaces an
// older report with one saying it failed, and why: the problems as
// validate prints them (stderr's "above" means nothing in a file).
func TestReportOfAnInvalidSpec(t *testing.T) {
	dir := t.TempDir()
	p := writeSpec(t, dir, "bad.yaml", invalidSpec)
	report := filepath.Join(dir, "report.json")
	if err := os.WriteFile(report, []byte(`{"ok": true}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if r := run(t, "apply", "--progress", "never", "--report", report, p); r.code != 3 {
		t.Fatalf("got %s\nwant exit 3", r)
	}
	rep, b := readReport(t, report)
	want := p + `:5:36: stages[1].set.y: unknown field "nosuch" (fields here: index)`
	if rep.OK == nil || *rep.OK || !strings.HasPrefix(rep.Error, want) || strings.Contains(rep.Error, "above") {
		t.Errorf("report %s: want ok false and the spec's problems", b)
	}
	// No seed was drawn: none is written (0 is a seed; found by a new-user
	// test).
	if rep.Seed != nil {
		t.Errorf("report %s: want no seed", b)
	}
	// The report's directory is made, as for a run that starts (found by
	// a new-user test: no report at all when it did not exist yet), by
	// apply and by bench alike.
	for _, cmd := range [][]string{{"apply", "--progress", "never"}, {"bench", "--step-time", "1ms"}} {
		report := filepath.Join(dir, cmd[0], "new", "report.json")
		if r := run(t, append(cmd, "--report", report, p)...); r.code != 3 {
			t.Fatalf("%s: got %s\nwant exit 3", cmd[0], r)
		}
		rep, b := readReport(t, report)
		if rep.OK == nil || *rep.OK || !strings.HasPrefix(rep.Error, want) {
			t.Errorf("%s: report %s: want ok false and the spec's problems", cmd[0], b)
		}
		// Never in place of the spec itself (bench, and
		// apply before it, replaced the spec that did not load with its
		// report).
		if r := run(t, append(cmd, "--report", p, p)...); r.code != 3 || !strings.Contains(r.stderr, "is the spec itself") {
			t.Errorf("%s --report SPEC: got %s\nwant exit 3 and the refusal", cmd[0], r)
		}
		if b, err := os.ReadFile(p); err != nil || string(b) != invalidSpec {
			t.Fatalf("%s --report SPEC: the spec now holds %q (%v)", cmd[0], b, err)
		}
	}
}

// TestBenchReportOfARunThatCannotStart: a bench that stops before its run
// (its buffers do not fit) replaces an older report with ok false (found
// in review: the old "ok": true stayed).
func TestBenchReportOfARunThatCannotStart(t *testing.T) {
	report := filepath.Join(t.TempDir(), "bench.json")
	if err := os.WriteFile(report, []byte(`{"ok": true}`), 0o644); err != nil {
		t.Fatal(err)
	}
	const file = "testdata/budget_prefetch.yaml"
	if r := run(t, "bench", "--step-time", "1ms", "--report", report, file); r.code != 3 {
		t.Fatalf("got %s\nwant exit 3", r)
	}
	rep, b := readReport(t, report)
	if rep.OK == nil || *rep.OK || !strings.Contains(rep.Error, "more than resources.memory (256MiB)") {
		t.Errorf("report %s: want ok false and why", b)
	}
}

// report is what the failure tests read of an --report file.
type report struct {
	OK     *bool   `json:"ok"`
	Error  string  `json:"error"`
	Budget int64   `json:"memory_budget_bytes"`
	Seed   *uint64 `json:"seed"`
	Sinks  map[string]struct {
		Samples   int64 `json:"samples"`
		Committed *bool `json:"committed"`
	} `json:"sinks"`
}

// readReport reads and decodes the --report file at path, and returns its
// bytes too, for messages.
func readReport(t *testing.T, path string) (report, []byte) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("no report: %v", err)
	}
	var rep report
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	return rep, b
}

// TestReportOfASpecThatDoesNotFit: a spec whose buffers cannot fit the
// budget fails before it starts, and its report gives the numbers.
func TestReportOfASpecThatDoesNotFit(t *testing.T) {
	report := filepath.Join(t.TempDir(), "report.json")
	const file = "testdata/budget_prefetch.yaml"
	if r := run(t, "apply", "--progress", "never", "--report", report, file); r.code != 3 ||
		!strings.Contains(r.stderr, file+": the pipeline's buffers do not fit in resources.memory") {
		t.Fatalf("got %s\nwant exit 3", r)
	}
	rep, b := readReport(t, report)
	want := file + `:12:43: stages[2].buffer: stage "ahead" buffers 1000 samples of about 588.25KiB each = 574.47MiB, more than resources.memory (256MiB): lower its buffer to 443 (what the other stages leave) or raise resources.memory to 575.62MiB`
	if rep.OK == nil || *rep.OK || rep.Error != want {
		t.Errorf("report %s: want ok false and %q", b, want)
	}
}
