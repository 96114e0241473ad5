package cli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"go.yaml.in/yaml/v3"

	"github.com/piperun/piperun/cli"
	"github.com/piperun/piperun/engine"
	"github.com/piperun/piperun/plan"
	"github.com/piperun/piperun/spec"
)

var update = flag.Bool("update", false, "rewrite golden files under testdata/")

// binary is the real piperun executable, built once in TestMain for the
// process-level tests (signals).
var binary string

func TestMain(m *testing.M) {
	flag.Parse()
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	dir, err := os.MkdirTemp("", "piperun-cli-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	// PIPERUN_TEST_BINARY names a piperun built beforehand, for a test
	// binary (go test -c) run where there is no Go toolchain, as
	// bench/gpu_check.sh does on a GPU machine.
	if b := os.Getenv("PIPERUN_TEST_BINARY"); b != "" {
		// Absolute, so that a bare name is not looked up on PATH.
		if binary, err = filepath.Abs(b); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		return m.Run()
	}
	binary = filepath.Join(dir, "piperun")
	cmd := exec.Command("go", "build", "-o", binary, "github.com/piperun/piperun/cmd/piperun")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building piperun:", err)
		return 1
	}
	return m.Run()
}

// result is one in-process run of the CLI.
type result struct {
	code           int
	stdout, stderr string
}

func run(t *testing.T, args ...string) result {
	t.Helper()
	var out, errb bytes.Buffer
	code := cli.Run(context.Background(), args, &out, &errb)
	return result{code: code, stdout: out.String(), stderr: errb.String()}
}

func (r result) String() string {
	return fmt.Sprintf("exit %d\n--- stdout\n%s--- stderr\n%s", r.code, r.stdout, r.stderr)
}

// sharedData returns the sibling shared/data directory of real test files,
// skipping the test when it is absent.
func sharedData(t testing.TB) string {
	t.Helper()
	dir := os.Getenv("PIPERUN_SHARED_DATA")
	if dir == "" {
		dir = filepath.Join("..", "..", "shared", "data")
	}
	if _, err := os.Stat(filepath.Join(dir, "tfrecord", "EXPECTED")); err != nil {
		t.Skipf("shared test data not found at %s (set PIPERUN_SHARED_DATA to its path): %v", dir, err)
	}
	return dir
}

// writeSpec writes a spec into dir and returns its path.
func writeSpec(t *testing.T, dir, name, body string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// golden compares got with testdata/name, rewriting it under -update.
func golden(t *testing.T, name, got string) {
	t.Helper()
	p := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(p, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(p)
	if err != nil {
		t.Fatalf("%v (run go test ./cli -update to create it)", err)
	}
	if got != string(want) {
		t.Errorf("output differs from %s (go test ./cli -update rewrites it)\n--- got\n%s\n--- want\n%s", p, got, want)
	}
}

const okSpec = `version: 1
name: ok
seed: 1
resources: {memory: 16MiB}
stages:
  - {name: src, type: range, count: 5}
  - {name: out, type: discard}
`

// invalidSpec has an unknown stage type and a map expression on a missing
// field.
const invalidSpec = `version: 1
name: bad
stages:
  - {name: src, type: range, count: 5}
  - {name: m, type: map, set: {y: 'nosuch + 1'}}
  - {name: out, type: discard}
`

func TestExitCodes(t *testing.T) {
	dir := t.TempDir()
	ok := writeSpec(t, dir, "ok.yaml", okSpec)
	bad := writeSpec(t, dir, "bad.yaml", invalidSpec)
	for _, tc := range []struct {
		name string
		args []string
		want int
	}{
		{"apply ok", []string{"apply", ok}, 0},
		{"apply invalid spec", []string{"apply", bad}, 3},
		{"apply missing file", []string{"apply", filepath.Join(dir, "nope.yaml")}, 3},
		{"apply unknown flag", []string{"apply", "--nosuch", ok}, 2},
		{"apply no args", []string{"apply"}, 2},
		{"apply two args", []string{"apply", ok, ok}, 2},
		{"apply bad progress", []string{"apply", "--progress", "sometimes", ok}, 2},
		{"apply --set without =", []string{"apply", "--set", "x", ok}, 2},
		{"apply --set without a path", []string{"apply", "--set", "=3", ok}, 2},
		{"apply --set to an unknown key", []string{"apply", "--set", "nosuch=3", ok}, 3},
		{"validate --set without =", []string{"validate", "--set", "x", ok}, 2},
		{"plan --set without =", []string{"plan", "--set", "epochs", ok}, 2},
		{"bench --set without =", []string{"bench", "--set", "x", ok}, 2},
		{"validate clean", []string{"validate", ok}, 0},
		{"validate problems", []string{"validate", bad}, 1},
		{"validate clean and problems", []string{"validate", ok, bad}, 1},
		{"validate no args", []string{"validate"}, 2},
		{"validate bad format", []string{"validate", "--format", "xml", ok}, 2},
		{"validate unknown flag", []string{"validate", "--nosuch", ok}, 2},
		{"plan ok", []string{"plan", ok}, 0},
		{"plan dot", []string{"plan", "--format", "dot", ok}, 0},
		{"plan mermaid", []string{"plan", "--format", "mermaid", ok}, 0},
		{"plan invalid", []string{"plan", bad}, 3},
		{"plan over budget", []string{"plan", filepath.Join("testdata", "budget.yaml")}, 3},
		{"plan dot over budget", []string{"plan", "--format", "dot", filepath.Join("testdata", "budget.yaml")}, 3},
		{"plan no args", []string{"plan"}, 2},
		{"plan bad format", []string{"plan", "--format", "png", ok}, 2},
		{"schema", []string{"schema"}, 0},
		{"schema extra arg", []string{"schema", "x"}, 2},
		{"unknown command", []string{"frobnicate"}, 2},
		{"bad log format", []string{"--log-format", "xml", "schema"}, 2},
		{"version", []string{"version"}, 0},
		{"inspect no args", []string{"inspect"}, 2},
		{"inspect bad format", []string{"inspect", "--format", "yaml", ok}, 2},
		{"inspect missing file", []string{"inspect", filepath.Join(dir, "nope.tfrecord")}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := run(t, tc.args...)
			if r.code != tc.want {
				t.Errorf("piperun %s: exit %d, want %d\n%s", strings.Join(tc.args, " "), r.code, tc.want, r)
			}
			if tc.want != 0 && r.stderr == "" && r.stdout == "" {
				t.Errorf("piperun %s: exit %d with no message", strings.Join(tc.args, " "), r.code)
			}
		})
	}
}

// diagnostic is the JSON form of spec.Diagnostic that validate --format
// json prints: {"pos": {"file", "line", "column"}, "path", "message",
// "severity"}. Unknown keys fail the decode, so a renamed key is caught.
type diagnostic struct {
	Pos struct {
		File   string `json:"file"`
		Line   int    `json:"line"`
		Column int    `json:"column"`
	} `json:"pos"`
	Path     string `json:"path"`
	Message  string `json:"message"`
	Severity string `json:"severity"`
}

func decodeDiagnostics(t *testing.T, s string) []diagnostic {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(s))
	dec.DisallowUnknownFields()
	var got []diagnostic
	if err := dec.Decode(&got); err != nil {
		t.Fatalf("stdout is not a JSON array of diagnostics: %v\n%s", err, s)
	}
	return got
}

func TestValidateBudget(t *testing.T) {
	// The batch stage stacks 256 images of 224×224×3 float32 (588KiB each)
	// into batches of 147MiB, against a 64MiB budget (it holds the images
	// themselves as uint8, to_float being left to it: 37MiB);
	// resources.memory's value sits at line 4, column 11.
	const file = "testdata/budget.yaml"
	const msg = `stage "batch" emits samples of about 147MiB each, more than resources.memory (64MiB)`

	t.Run("text", func(t *testing.T) {
		r := run(t, "validate", file)
		want := file + ":4:11: resources.memory: " + msg + "\n"
		if r.code != 1 || r.stdout != want || r.stderr != "1 problem\n" {
			t.Errorf("got %s\nwant exit 1, stdout %q, stderr %q", r, want, "1 problem\n")
		}
	})
	t.Run("json", func(t *testing.T) {
		r := run(t, "validate", "--format", "json", file)
		if r.code != 1 {
			t.Fatalf("exit %d, want 1\n%s", r.code, r)
		}
		got := decodeDiagnostics(t, r.stdout)
		want := diagnostic{Path: "resources.memory", Message: msg, Severity: "error"}
		want.Pos.File, want.Pos.Line, want.Pos.Column = file, 4, 11
		if len(got) != 1 || got[0] != want {
			t.Errorf("got  %+v\nwant [%+v]", got, want)
		}
	})
	t.Run("github", func(t *testing.T) {
		r := run(t, "validate", "--format", "github", file)
		want := "::error file=" + file + ",line=4,col=11,title=piperun validate::resources.memory: " + msg + "\n"
		if r.code != 1 || r.stdout != want {
			t.Errorf("got %s\nwant exit 1, stdout %q", r, want)
		}
	})
	t.Run("apply refuses", func(t *testing.T) {
		r := run(t, "apply", file)
		if r.code != 3 || !strings.Contains(r.stderr, file+":4:11: resources.memory: "+msg) {
			t.Errorf("got %s\nwant exit 3 naming %s:4:11", r, file)
		}
	})
}

// TestValidateBudgets: validate's budget check, one spec per way the
// declared buffers and samples cannot fit.
func TestValidateBudgets(t *testing.T) {
	for _, tc := range []struct{ file, msg string }{
		// A prefetch of 1000 float32 images: at its buffer, where the
		// number to change is.
		{"testdata/budget_prefetch.yaml", `12:43: stages[2].buffer: stage "ahead" buffers 1000 samples of about 588.25KiB each = 574.47MiB, more than resources.memory (256MiB): lower its buffer to 443 (what the other stages leave) or raise resources.memory to 575.62MiB`},
		// Without drop_remainder a batch is "up to" 256 images: a full one
		// bounds the estimate.
		{"testdata/budget_nodrop.yaml", `stage "batch" emits samples of about 147MiB each, more than resources.memory (64MiB)`},
		// The stage that makes samples too large is named, once, not the
		// take below it that passes them on.
		{"testdata/budget_map_large.yaml", `stage "m" emits samples of about 381.47MiB each, more than resources.memory (64MiB)`},
		// A field set from shape(image)[0] is an int64, 8 bytes, so the
		// batch of 256 uint8 images (36.75MiB out, as much buffered) is
		// sized rather than left unknown.
		{"testdata/budget_shape.yaml", `buffers need about 73.73MiB (src 205B, img 147.33KiB, batch 73.58MiB), more than resources.memory (64MiB); 73.73MiB fits`},
		// The quickstart's shape at 4 MiB: the names are strings, of
		// unknown size before the run, but the images, their float32
		// batches and the 4 that prefetch holds are known and already
		// need more (found by the tester: any string turned the check off,
		// and the run stalled instead).
		{"testdata/budget_lower.yaml", `buffers need at least 7.05MiB (src 205B, img ≥ 7.15KiB, shuffle ≥ 1.75MiB, batch ≥ 1.07MiB, prefetch ≥ 4.22MiB; ≥: the sizes of strings and bytes are known only at run time, and count as empty here; --probe N measures them), more than resources.memory (4MiB)`},
		// A prefetch of batches sized by the batch stage's estimate, not
		// left unknown by the batch's "?" rows.
		{"testdata/budget_prefetch_batches.yaml", `12:39: stages[3].buffer: stage "p" buffers 1000 samples of about 391.79KiB each = 382.61MiB, more than resources.memory (64MiB): lower its buffer to 164 (what the other stages leave) or raise resources.memory to 383.79MiB`},
	} {
		r := run(t, "validate", tc.file)
		want := tc.file + ":4:11: resources.memory: " + tc.msg + "\n"
		if strings.Contains(tc.msg, "stages[") {
			want = tc.file + ":" + tc.msg + "\n"
		}
		if r.code != 1 || r.stdout != want {
			t.Errorf("got %s\nwant exit 1, stdout %q", r, want)
		}
	}
}

// TestBudgetOverTheMachineWarns: a budget larger than the machine's (or
// container's) memory is a warning, placed at resources.memory, from
// validate and apply, and left out by validate --no-environment, whose
// verdict must not depend on the machine (1TiB
// on a 23 GiB machine passed without a word).
func TestBudgetOverTheMachineWarns(t *testing.T) {
	if plan.MachineMemory() <= 0 {
		t.Skip("this machine's memory cannot be read")
	}
	dir := t.TempDir()
	p := writeSpec(t, dir, "big.yaml", `version: 1
name: big
resources: {memory: 4000000TiB}
stages:
  - {name: src, type: range, count: 3}
  - {name: out, type: discard}
`)
	want := fmt.Sprintf("%s:3:21: warning: resources.memory: 4000000TiB is more than the memory this process may use (%s: the machine's RAM, or its cgroup's limit where lower): the budget no longer keeps the run from the OOM killer\n",
		p, spec.ByteSize(plan.MachineMemory()))
	if r := run(t, "validate", p); r.code != 0 || r.stdout != want {
		t.Errorf("validate: got %s\nwant exit 0, stdout %q", r, want)
	}
	if r := run(t, "validate", "--no-environment", p); r.code != 0 || strings.Contains(r.stdout, "OOM") {
		t.Errorf("validate --no-environment: got %s\nwant exit 0 and no warning", r)
	}
	if r := run(t, "apply", "--progress", "never", "--gpu", "off", p); r.code != 0 || !strings.Contains(r.stderr, strings.TrimSuffix(want, "\n")) {
		t.Errorf("apply: got %s\nwant exit 0 and the warning", r)
	}
}

// TestFanOutSharesItsSamples: a stage feeding two consumers reserves the
// values of each sample once, since the copies share them. Samples of
// 782KiB fit a 1MiB budget with two sinks, where a reservation per
// consumer (1.5MiB each) never could; the report's peak stays under the
// budget and both sinks get every sample.
func TestFanOutSharesItsSamples(t *testing.T) {
	const file = "testdata/budget_fanout.yaml"
	if r := run(t, "validate", file); r.code != 0 || r.stdout != "" {
		t.Fatalf("validate: got %s\nwant exit 0, no problems", r)
	}
	rep := filepath.Join(t.TempDir(), "report.json")
	if r := run(t, "apply", "--progress", "never", "--report", rep, file); r.code != 0 {
		t.Fatalf("apply: got %s\nwant exit 0", r)
	}
	var got engine.Report
	b, err := os.ReadFile(rep)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	if !got.OK || got.Sinks["a"].Samples != 10 || got.Sinks["b"].Samples != 10 {
		t.Errorf("report: ok %v, sinks %+v; want ok and 10 samples in a and b", got.OK, got.Sinks)
	}
	if got.PeakMemoryBytes > 1<<20 || got.PeakMemoryBytes < 800_000 {
		t.Errorf("peak memory %d bytes, want one sample's values (about 800000) and at most the budget of %d", got.PeakMemoryBytes, 1<<20)
	}
}

// TestShuffleOverItsShareWarns: a shuffle buffer that fits the budget but
// not the half a shuffle may fill is a warning (the run shuffles over
// fewer samples, as validate says), in validate, plan and apply alike.
func TestShuffleOverItsShareWarns(t *testing.T) {
	const file = "testdata/budget_shuffle_half.yaml"
	want := file + ":12:44: warning: stages[2].buffer: 300 samples of about 588.25KiB each = 172.34MiB, more than 128MiB, the 1/2 of resources.memory (256MiB) a shuffle may fill: it will hold about 222 samples\n"
	if r := run(t, "validate", file); r.code != 0 || r.stdout != want {
		t.Errorf("validate: got %s\nwant exit 0, stdout %q", r, want)
	}
	if r := run(t, "plan", file); r.code != 0 || r.stderr != want {
		t.Errorf("plan: got %s\nwant exit 0, stderr %q", r, want)
	}
}

// TestShuffleAboveTheMapFits: the specs of the two tests above without
// optimize: false. The planner moves the shuffle above the decoding map,
// so it holds range samples of 205 bytes rather than images, and the
// budget problems go away; plan says what it moved, and that the order
// differs from the spec as written, whose shuffle would have held fewer
// samples.
func TestShuffleAboveTheMapFits(t *testing.T) {
	dir := t.TempDir()
	for file, order := range map[string]string{
		"testdata/budget_buffer.yaml":       "as written, its 1000 samples might fill its share of resources.memory (128MiB), and then it shuffles over fewer: the same samples come out, maybe in another order than with optimize: false",
		"testdata/budget_shuffle_half.yaml": "as written, its 300 samples might fill its share of resources.memory (128MiB), and then it shuffles over fewer: the same samples come out, maybe in another order than with optimize: false",
	} {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		// Copied elsewhere, its read_file("../../examples/…") must still
		// name the photo.
		examples, _ := filepath.Abs(filepath.Join("..", "examples"))
		src := strings.ReplaceAll(strings.Replace(string(b), "optimize: false", "", 1), "../../examples", filepath.ToSlash(examples))
		p := writeSpec(t, dir, filepath.Base(file), src)
		if r := run(t, "validate", p); r.code != 0 || r.stdout != "" {
			t.Errorf("validate %s: got %s\nwant exit 0 and no problems", file, r)
		}
		r := run(t, "plan", p)
		want := `rewritten: shuffle "shuffle" moved above map "img": it holds {index: int64} samples instead of {image: tensor<float32>[224 224 3]} (about 588.25KiB); ` + order + "\n(optimize: false runs the stages as written)\n"
		if r.code != 0 || !strings.Contains(r.stdout, want) || !strings.Contains(r.stdout, "\nshuffle          shuffle         src ") {
			t.Errorf("plan %s: got %s\nwant %q and shuffle reading src", file, r, want)
		}
	}
}

func TestValidateJSONClean(t *testing.T) {
	ok := writeSpec(t, t.TempDir(), "ok.yaml", okSpec)
	r := run(t, "validate", "--format", "json", ok)
	if r.code != 0 || strings.TrimSpace(r.stdout) != "[]" {
		t.Errorf("got %s\nwant exit 0 and []", r)
	}
}

func TestValidateNoEnvironment(t *testing.T) {
	dir := t.TempDir()
	p := writeSpec(t, dir, "missing.yaml", `version: 1
name: missing
stages:
  - {name: files, type: files, pattern: "nothing-here/*.tfrecord"}
  - {name: records, type: tfrecord}
  - {name: out, type: discard}
`)
	r := run(t, "validate", "--no-environment", p)
	if r.code != 0 || r.stdout != "" {
		t.Errorf("--no-environment: got %s\nwant exit 0 and no diagnostics", r)
	}
	r = run(t, "validate", "--format", "json", p)
	if r.code != 1 {
		t.Fatalf("with environment: got %s\nwant exit 1", r)
	}
	got := decodeDiagnostics(t, r.stdout)
	want := diagnostic{Path: "stages[0].pattern", Severity: "error",
		Message: `pattern "nothing-here/*.tfrecord" matches no file (resolved to ` + filepath.Join(dir, "nothing-here/*.tfrecord") + `); folder ` + filepath.Join(dir, "nothing-here") + ` does not exist`}
	want.Pos.File, want.Pos.Line, want.Pos.Column = p, 4, 41
	if len(got) != 1 || got[0] != want {
		t.Errorf("with environment: got %+v\nwant [%+v]", got, want)
	}
}

// TestValidateListsFitWithMachineProblems: a pattern that matches no file
// does not hide a buffer that cannot fit the budget; one run of validate
// lists both (found trying DESIGN.md's showcase spec, whose shuffle of
// 10000 decoded images needs 5.6GiB of its 2GiB).
func TestValidateListsFitWithMachineProblems(t *testing.T) {
	dir := t.TempDir()
	p := writeSpec(t, dir, "both.yaml", `version: 1
name: both
resources: {memory: 1MiB}
stages:
  - {name: files, type: files, pattern: "nothing-here/*.tfrecord"}
  - {name: records, type: tfrecord, cycle_length: 1}
  - {name: prefetch, type: prefetch, buffer: 100000}
  - {name: out, type: discard}
`)
	r := run(t, "validate", p)
	// In line order, though the fit is checked after the pattern.
	want := p + `:5:41: stages[0].pattern: pattern "nothing-here/*.tfrecord" matches no file (resolved to ` + filepath.Join(dir, "nothing-here/*.tfrecord") + "); folder " + filepath.Join(dir, "nothing-here") + " does not exist\n" +
		p + `:7:46: stages[2].buffer: stage "prefetch" buffers 100000 samples of at least 198B each = 18.88MiB, more than resources.memory (1MiB): lower its buffer to 4382 at most (what the other stages leave) or raise resources.memory to at least 19.06MiB` + "\n"
	if r.code != 1 || r.stdout != want || r.stderr != "2 problems\n" {
		t.Errorf("got %s\nwant exit 1, stdout\n%s", r, want)
	}
	// The machine's own checks still run; --probe, which needs the
	// inputs, says it did not.
	huge := writeSpec(t, dir, "huge.yaml", "version: 1\nname: huge\nresources: {memory: 100TiB}\nstages:\n"+
		"  - {name: files, type: files, pattern: \"nothing-here/*.tfrecord\"}\n  - {name: records, type: tfrecord}\n  - {name: out, type: discard}\n")
	r = run(t, "validate", "--probe", "3", huge)
	if r.code != 1 || !strings.Contains(r.stdout, huge+": warning: --probe was not run: it needs the problems above fixed first\n") ||
		!strings.Contains(r.stdout, huge+":3:21: warning: resources.memory: 100TiB is more than the memory this process may use") {
		t.Errorf("--probe with a machine problem: got %s", r)
	}
}

// TestValidateSaysFitNotChecked: a spec whose own problems keep it from
// being planned (a typo in a key) says its memory fit was not checked, so
// that fixing the typo brings no silent surprise.
func TestValidateSaysFitNotChecked(t *testing.T) {
	p := writeSpec(t, t.TempDir(), "typo.yaml", `version: 1
name: typo
resources: {memory: 1MiB}
stages:
  - {name: src, type: range, count: 10}
  - {name: shuffle, type: shuffle, bufer: 100000}
  - {name: out, type: discard}
`)
	r := run(t, "validate", p)
	// At resources.memory, where the spec sets it (with
	// no position, JSON read "line": 0).
	// Last, though its line comes first: it follows from the others.
	want := p + `:6:5: stages[1]: missing required field "buffer"` + "\n" +
		p + `:6:36: stages[1].bufer: unknown field "bufer" (did you mean "buffer"?)` + "\n" +
		p + ":3:21: warning: resources.memory: the memory fit was not checked: it needs the spec's errors fixed first\n"
	if r.code != 1 || r.stdout != want || r.stderr != "2 problems, 1 warning\n" {
		t.Errorf("got %s\nwant exit 1 and\n%s", r, want)
	}
}

func TestSchemaIsCommitted(t *testing.T) {
	r := run(t, "schema")
	if r.code != 0 {
		t.Fatalf("schema: %s", r)
	}
	committed, err := os.ReadFile(filepath.Join("..", "schema.json"))
	if err != nil {
		t.Fatal(err)
	}
	if r.stdout != string(committed) {
		t.Errorf("schema.json is stale: run go run ./cmd/piperun schema > schema.json")
	}
}

func examplePipelines(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("..", "examples", "pipelines", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no examples/pipelines/*.yaml")
	}
	return files
}

func TestExamplesValidate(t *testing.T) {
	for _, f := range examplePipelines(t) {
		t.Run(filepath.Base(f), func(t *testing.T) {
			r := run(t, "validate", f)
			if r.code != 0 || r.stdout != "" {
				t.Errorf("validate %s: %s", f, r)
			}
		})
	}
}

func TestExamplesMatchSchema(t *testing.T) {
	c := jsonschema.NewCompiler()
	const url = "file:///piperun/schema.json"
	b, err := os.ReadFile(filepath.Join("..", "schema.json"))
	if err != nil {
		t.Fatal(err)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.AddResource(url, doc); err != nil {
		t.Fatal(err)
	}
	sch, err := c.Compile(url)
	if err != nil {
		t.Fatalf("compile schema.json: %v", err)
	}
	for _, f := range examplePipelines(t) {
		t.Run(filepath.Base(f), func(t *testing.T) {
			v := yamlAsJSON(t, f)
			if err := sch.Validate(v); err != nil {
				t.Errorf("%s does not match schema.json: %v", f, err)
			}
		})
	}
	// The schema must be able to reject: a spec without stages and with an
	// unknown stage type fails.
	bad := writeSpec(t, t.TempDir(), "bad.yaml", "version: 1\nname: bad\nstages:\n  - {name: x, type: nosuch}\n")
	if err := sch.Validate(yamlAsJSON(t, bad)); err == nil {
		t.Error("schema.json accepts a stage of type nosuch")
	}
	// What validate refuses, the schema refuses too (found by a re-test:
	// an editor accepted these and validate then failed them).
	for _, stage := range []string{
		"{name: b, type: batch, size: 0}",
		"{name: s, type: shuffle, buffer: 0}",
		"{name: r, type: range, count: -1}",
		"{name: t, type: take, count: -2}",
		"{name: w, type: write_tfrecord, path: o.tfrecord, shards: 0}",
		"{name: a.b, type: discard}",
		"{name: '', type: discard}",
		"{name: m, type: map, set: {a: index}, keep: []}",
		// Found by a CI user's fuzzing of the schema against validate.
		"{name: f, type: files}",
		"{name: f, type: files, patterns: []}",
		"{name: c, type: concat, inputs: [src]}",
		"{name: c, type: concat, input: src}",
		"{name: m, type: map, input: src, inputs: [src], set: {a: '1'}}",
		"{name: m, type: map, set: {a: '1'}, keep: [a], drop: [index]}",
		"{name: m, type: map}",
		"{name: p, type: parse_example, features: {}}",
		"{name: j, type: jsonl, max_line_bytes: 0}",
		"{name: m, type: map, inputs: [src, src2], set: {a: '1'}}\n  - {name: src2, type: range, count: 2}",
	} {
		// The sink reads src, so the stage tried is the spec's only error.
		f := writeSpec(t, t.TempDir(), "s.yaml", "version: 1\nname: s\nstages:\n  - {name: src, type: range, count: 3}\n  - "+stage+"\n  - {name: zz_out, type: discard, input: src}\n")
		if err := sch.Validate(yamlAsJSON(t, f)); err == nil {
			t.Errorf("schema.json accepts %s", stage)
		}
		r := run(t, "validate", "--no-environment", f)
		if r.code != 1 {
			t.Errorf("validate accepts %s: %s", stage, r)
		}
		for _, l := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
			if !strings.Contains(l, ": warning: ") && !strings.Contains(l, ": stages[1]") {
				t.Errorf("validate of %s finds another error: %s", stage, l)
			}
		}
	}
	// And what validate takes, the schema takes: tf.data's capitals; an
	// input left empty beside inputs, directly, through a merge or a
	// variable (a review found the schema refusing these).
	for _, stage := range []string{
		"{name: f, type: files, pattern: '*.tfrecord'}\n  - {name: r, type: tfrecord, compression: GZIP}\n  - {name: o, type: discard}",
		"{name: w, type: write_tfrecord, path: o.tfrecord, compression: ZLIB}",
		"{name: src2, type: range, count: 2}\n  - {name: c, type: concat, input: ~, inputs: [src, src2]}\n  - {name: o, type: discard}",
		"{name: src2, type: range, count: 2}\n  - {name: c, type: concat, input: '', inputs: [src, src2]}\n  - {name: o, type: discard}",
		"{name: src2, type: range, count: 2}\n  - {<<: *base, name: c, type: concat, inputs: [src, src2]}\n  - {name: o, type: discard}",
		"{name: m, type: map, input: '${NO_SUCH_VAR_I:-}', inputs: [src], set: {a: '1'}}\n  - {name: o, type: discard}",
	} {
		f := writeSpec(t, t.TempDir(), "s.yaml", "version: 1\nname: s\nx-base: &base {input: ~}\nstages:\n  - {name: src, type: range, count: 3}\n  - "+stage+"\n")
		if err := sch.Validate(yamlAsJSON(t, f)); err != nil {
			t.Errorf("schema.json refuses %s: %v", stage, err)
		}
		if r := run(t, "validate", "--no-environment", f); r.code != 0 {
			t.Errorf("validate refuses %s: %s", stage, r)
		}
	}
	// A key left empty (null) is absent to validate, so the schema takes
	// it too; an empty list key is refused by both.
	nulls := writeSpec(t, t.TempDir(), "n.yaml", `version: 1
name: n
seed:
epochs: ~
deterministic:
resources: {memory: ~, workers: ~}
stages:
  - {name: f, type: files, pattern: '*.jsonl', shuffle: ~, shard: ~, labels: ~}
  - {name: j, type: jsonl, parallelism: ~, block_length: ~, cycle_length: ~, on_error: ~}
  - {name: m, type: map, set: {a: '1'}, drop: [path]}
  - {name: s, type: shuffle, buffer: 4, reshuffle_each_epoch: ~}
  - {name: o, type: discard, input: ~}
`)
	if err := sch.Validate(yamlAsJSON(t, nulls)); err != nil {
		t.Errorf("schema.json refuses keys left empty: %v", err)
	}
	if r := run(t, "validate", "--no-environment", nulls); r.code != 0 {
		t.Errorf("validate refuses keys left empty: %s", r)
	}
	emptyList := writeSpec(t, t.TempDir(), "e.yaml", "version: 1\nname: e\nstages:\n  - {name: src, type: range, count: 3}\n  - {name: m, type: map, set: {a: '1'}, keep: ~}\n")
	if err := sch.Validate(yamlAsJSON(t, emptyList)); err == nil {
		t.Error("schema.json accepts keep: null")
	}
	if r := run(t, "validate", "--no-environment", emptyList); r.code != 1 {
		t.Errorf("validate accepts keep: null: %s", r)
	}
	// Values piperun expands from the environment pass the schema wherever
	// validate takes them: numbers, booleans, byte sizes, auto, word sets
	// (an editor marked `epochs: ${EPOCHS:-2}`).
	vars := writeSpec(t, t.TempDir(), "v.yaml", `version: 1
name: v
seed: ${SEED:-1}
epochs: ${EPOCHS:-2}
deterministic: ${DET:-true}
resources: {memory: "${MEM:-64MiB}", workers: "${WORKERS:-auto}"}
stages:
  - name: src
    type: range
    count: ${N:-10}
  - {name: s, type: shuffle, buffer: "${BUF:-4}", reshuffle_each_epoch: '${RE:-true}'}
  - {name: m, type: map, set: {a: 'index', one: 1, yes: true}, parallelism: "${PAR:-2}", on_error: "${ON_ERROR:-fail}"}
  - {name: f, type: filter, where: true}
  - {name: b, type: batch, size: "${BS:-3}", drop_remainder: "${DROP:-false}"}
  - {name: o, type: discard}
`)
	if err := sch.Validate(yamlAsJSON(t, vars)); err != nil {
		t.Errorf("schema.json refuses ${VAR} values: %v", err)
	}
	if r := run(t, "validate", "--no-environment", vars); r.code != 0 {
		t.Errorf("validate refuses ${VAR} values: %s", r)
	}
	// A misspelt key is reported as that key, under its stage type, not
	// as a stage that matches no type.
	typo := writeSpec(t, t.TempDir(), "t.yaml", "version: 1\nname: t\nstages:\n  - {name: src, type: range, count: 3}\n  - {name: s, type: shuffle, bufer: 4}\n")
	err = sch.Validate(yamlAsJSON(t, typo))
	if err == nil || !strings.Contains(err.Error(), "'bufer'") || !strings.Contains(err.Error(), "missing property 'buffer'") || strings.Contains(err.Error(), "oneOf") {
		t.Errorf("schema.json on a misspelt key: %v, want it to name bufer and buffer, with no oneOf", err)
	}
	for _, top := range []string{"epochs: -1", "resources: {memory: 0}", "epochs: two", "epochs: ${E", "deterministic: yes please"} {
		f := writeSpec(t, t.TempDir(), "s.yaml", "version: 1\nname: s\n"+top+"\nstages:\n  - {name: src, type: range, count: 3}\n")
		if err := sch.Validate(yamlAsJSON(t, f)); err == nil {
			t.Errorf("schema.json accepts %s", top)
		}
	}
}

// yamlAsJSON reads a YAML file into the generic JSON value the validator
// takes (through encoding/json, so numbers are json.Number like the
// validator's own loader makes them).
func yamlAsJSON(t *testing.T, path string) any {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := yaml.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	j, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(j))
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestValidateOutputsOverInputs: a sink may not write what a files source
// reads, nor one output reach another's path through a symlinked
// directory; --probe takes no negative count (found by the re-test).
func TestValidateOutputsOverInputs(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "data"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "data", "in.jsonl"), []byte("{\"a\":1}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "out"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("out", filepath.Join(dir, "lnk")); err != nil {
		t.Fatal(err)
	}
	p := writeSpec(t, dir, "s.yaml", `version: 1
name: s
stages:
  - {name: f, type: files, pattern: 'data/*.jsonl'}
  - {name: r, type: jsonl}
  - {name: over, type: write_jsonl, path: data/in.jsonl}
  - {name: a, type: write_jsonl, input: r, path: out/q.jsonl}
  - {name: b, type: write_jsonl, input: r, path: lnk/q.jsonl}
`)
	r := run(t, "validate", p)
	want := p + `:4:37: stages[0].pattern: pattern "data/*.jsonl" matches ` + filepath.Join(dir, "data", "in.jsonl") + `, which stage "over" writes` + "\n" +
		p + `:8:5: stages[4]: writes ` + filepath.Join(dir, "lnk", "q.jsonl") + `, which stage "a" writes too` + "\n" +
		p + ": warning: resources.memory: the memory fit was not checked: it needs the spec's errors fixed first\n"
	if r.code != 1 || r.stdout != want {
		t.Errorf("got %s\nwant exit 1 and\n%s", r, want)
	}
	if r := run(t, "validate", "--probe", "-3", p); r.code != 2 || !strings.Contains(r.stderr, "--probe must not be negative, got -3") {
		t.Errorf("--probe -3: %s", r)
	}
}

// TestLogLevelSaysTheLevels: a bad --log-level lists the levels (a
// re-test: "unrecognized level" named none).
func TestLogLevelSaysTheLevels(t *testing.T) {
	for _, level := range []string{"loud", "fatal", "WARNING"} {
		r := run(t, "--log-level", level, "version")
		if want := "piperun: --log-level must be debug, info, warn or error, got \"" + level + "\"\n"; r.code != 2 || r.stderr != want {
			t.Errorf("%s\nwant exit 2 and %q", r, want)
		}
	}
}
