package cli_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/piperun/piperun/cli"
)

const benchSpec = `version: 1
name: benched
seed: 1
epochs: 2
resources:
  memory: 64MiB
stages:
  - {name: src, type: range, count: 40}
  - name: m
    type: map
    set:
      v: 'shape(one_hot(index % 4, WIDTH))[0]'
  - {name: mix, type: shuffle, buffer: SHUFFLE}
  - {name: batch, type: batch, size: 4}
  - {name: out, type: write_jsonl, path: out/never.jsonl}
  - {name: other, type: write_jsonl, input: batch, path: out/never2.jsonl}
`

// benchReport runs bench on spec with args and a --report beside it, and
// returns what it printed and the report, which it must have written.
func benchReport(t *testing.T, spec string, args ...string) (result, cli.BenchReport) {
	t.Helper()
	report := filepath.Join(filepath.Dir(spec), "bench.json")
	r := run(t, append([]string{"bench", spec, "--report", report}, args...)...)
	b, err := os.ReadFile(report)
	if err != nil {
		t.Fatalf("%s: %v", r, err)
	}
	var br cli.BenchReport
	if err := json.Unmarshal(b, &br); err != nil {
		t.Fatal(err)
	}
	return r, br
}

func benchRun(t *testing.T, width, shuffle string, args ...string) (result, cli.BenchReport) {
	t.Helper()
	dir := t.TempDir()
	p := writeSpec(t, dir, "b.yaml", strings.NewReplacer("WIDTH", width, "SHUFFLE", shuffle).Replace(benchSpec))
	rep := filepath.Join(dir, "bench.json")
	r := run(t, append([]string{"bench", "--report", rep, p}, args...)...)
	var br cli.BenchReport
	if b, err := os.ReadFile(rep); err == nil {
		if err := json.Unmarshal(b, &br); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "out")); !os.IsNotExist(err) {
		t.Errorf("bench wrote output: %v", err)
	}
	return r, br
}

// TestBenchTrainerBound: with a 20ms step and a pipeline that has almost
// nothing to do, the trainer is what everything waits for; every batch of
// both epochs is a step; the shuffle reorders the epochs.
func TestBenchTrainerBound(t *testing.T) {
	r, br := benchRun(t, "4", "40", "--step-time", "20ms")
	if r.code != 0 {
		t.Fatalf("bench: %s", r)
	}
	if !br.OK || br.Error != "" {
		t.Errorf("ok %v, error %q; want ok", br.OK, br.Error)
	}
	if br.Trainer != "out" || br.Steps != 20 || br.Bottleneck != "out" || br.StepTimeS != 0.02 || br.IdealStepsPerS != 50 {
		t.Errorf("trainer %q, %d steps, bottleneck %q, step %v, ideal %v; want out, 20, out, 0.02, 50", br.Trainer, br.Steps, br.Bottleneck, br.StepTimeS, br.IdealStepsPerS)
	}
	if br.Shuffle.Epochs != 2 || br.Shuffle.Positions != 10 || !strings.HasPrefix(br.Shuffle.Verdict, "reshuffled every epoch") {
		t.Errorf("shuffle %+v", br.Shuffle)
	}
	if br.Run == nil || !br.Run.OK || br.Run.Sinks["out"].Batches != 20 || br.Run.Sinks["other"].Batches != 20 {
		t.Errorf("run %+v", br.Run)
	}
	for _, want := range []string{"trainer out: 20 steps", "bottleneck: the trainer (out)", "shuffle: reshuffled every epoch"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("stdout lacks %q:\n%s", want, r.stdout)
		}
	}
}

// TestBenchPipelineBound: with no step time and a map that makes a 4 MB
// tensor per sample (to keep only its length), the map is the busiest stage; a shuffle of one sample keeps
// every epoch in the same order, and bench says so.
func TestBenchPipelineBound(t *testing.T) {
	r, br := benchRun(t, "1000000", "1", "--step-time", "0", "--sink", "other")
	if r.code != 0 {
		t.Fatalf("bench: %s", r)
	}
	if br.Trainer != "other" || br.Steps != 20 || br.Bottleneck != "m" {
		t.Errorf("trainer %q, %d steps, bottleneck %q; want other, 20, m\n%s", br.Trainer, br.Steps, br.Bottleneck, r.stdout)
	}
	if br.Shuffle.Same != 10 || !strings.HasPrefix(br.Shuffle.Verdict, "every epoch comes in the same order") {
		t.Errorf("shuffle %+v", br.Shuffle)
	}
}

// TestBenchFixedShuffle: a shuffle told not to reshuffle gives every epoch
// the same order, and bench names it instead of advising a shuffle stage
// the spec already has.
func TestBenchFixedShuffle(t *testing.T) {
	r, br := benchRun(t, "4", "40", "--step-time", "0", "--set", "stages.mix.reshuffle_each_epoch=false")
	if want := `every epoch comes in the same order: shuffle "mix" has reshuffle_each_epoch: false`; r.code != 0 || br.Shuffle.Same != br.Shuffle.Positions || br.Shuffle.Verdict != want {
		t.Errorf("bench: %s\nshuffle %+v; want %q", r, br.Shuffle, want)
	}
}

// TestBenchSaysARandomSeed: with no seed in the spec, bench says the seed
// it drew and how to repeat the run, as apply does.
func TestBenchSaysARandomSeed(t *testing.T) {
	dir := t.TempDir()
	p := writeSpec(t, dir, "b.yaml", strings.NewReplacer("seed: 1\n", "", "WIDTH", "4", "SHUFFLE", "40").Replace(benchSpec))
	r, br := benchReport(t, p, "--step-time", "0")
	if r.code != 0 || br.Run == nil || !br.Run.SeedRandom || br.Run.Seed == nil {
		t.Fatalf("bench: %s\nrun %+v; want a random seed in the report", r, br.Run)
	}
	if want := fmt.Sprintf("seed: random seed %d (--set seed=%d repeats the run)\n", *br.Run.Seed, *br.Run.Seed); !strings.Contains(r.stdout, want) {
		t.Errorf("stdout lacks %q:\n%s", want, r.stdout)
	}
	r, _ = benchRun(t, "4", "40", "--step-time", "0")
	if strings.Contains(r.stdout, "seed") {
		t.Errorf("a spec's own seed was called random:\n%s", r.stdout)
	}
	// With nothing random to repeat, as apply says nothing of it.
	p = writeSpec(t, dir, "c.yaml", strings.NewReplacer("seed: 1\n", "", "WIDTH", "4", "  - {name: mix, type: shuffle, buffer: SHUFFLE}\n", "").Replace(benchSpec))
	if r, br = benchReport(t, p, "--step-time", "0"); r.code != 0 || !br.Run.SeedRandom || strings.Contains(r.stdout, "seed") {
		t.Errorf("bench of a spec with nothing random: %s\nwant no word of its seed", r)
	}
}

// TestBenchSteps: --steps stops the run after that many steps, which an
// endless spec needs.
func TestBenchSteps(t *testing.T) {
	r, br := benchRun(t, "4", "40", "--step-time", "1ms", "--steps", "7", "--set", "epochs=0")
	if r.code != 0 || br.Steps != 7 || br.Run == nil || !br.Run.OK || br.Run.Error != "" || br.Run.Sinks["out"].Batches != 7 || br.Run.Sinks["out"].Samples != 28 {
		t.Errorf("bench: %s\n%d steps, run %+v; want 7 steps, the run ok and its sink at 7 batches of 4", r, br.Steps, br.Run)
	}
}

// TestBenchUsage: what bench refuses, with exit 2.
func TestBenchUsage(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--step-time", "-1s"}, "--step-time must not be negative"},
		{[]string{"--step-time", "1ms", "--set", "epochs=0"}, "runs until stopped (epochs: 0): give --steps"},
		{[]string{"--step-time", "1ms", "--sink", "nope"}, `--sink "nope": `},
		{[]string{"--step-time", "1ms", "--sink", "m"}, `has a map stage of that name, not a sink (its sinks: out, other)`},
		{[]string{}, `required flag(s) "step-time" not set`},
	} {
		r, _ := benchRun(t, "4", "40", tc.args...)
		if r.code != 2 || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("%v: %s\nwant exit 2 and %q", tc.args, r, tc.want)
		}
	}
}

// TestBenchEndsForAStarvedTrainer: in an endless spec whose trainer sink
// gets nothing (another sink gets everything), bench fails naming the sink
// instead of waiting for ever.
func TestBenchEndsForAStarvedTrainer(t *testing.T) {
	spec := writeSpec(t, t.TempDir(), "b.yaml", `
version: 1
name: bst
epochs: 0
stages:
  - {name: a, type: range, count: 10}
  - {name: o1, type: write_jsonl, path: o1.jsonl}
  - {name: f, type: filter, input: a, where: 'index > 100'}
  - {name: b, type: write_jsonl, path: b.jsonl}
`)
	r := run(t, "bench", spec, "--step-time", "1ms", "--steps", "5", "--sink", "b")
	want := `trainer sink "b" got 0 samples and nothing more while the sources above it read `
	if r.code != 1 || !strings.Contains(r.stderr, want) {
		t.Errorf("%s\nwant exit 1 and %q", r, want)
	}
}

// TestBenchOfAFailingRun: a run that fails part-way says so before its
// figures, which cover the steps taken, and its report has ok false and
// the error (a healthy-looking result, the
// failure only in run.error).
func TestBenchOfAFailingRun(t *testing.T) {
	dir := t.TempDir()
	spec := writeSpec(t, dir, "f.yaml", `version: 1
name: failing
stages:
  - {name: src, type: range, count: 20}
  - {name: m, type: map, set: {v: 'index < 7 ? index : int("nope")'}}
  - {name: out, type: discard}
`)
	report := filepath.Join(dir, "bench.json")
	r := run(t, "bench", "--step-time", "1ms", "--report", report, spec)
	if r.code != 1 || !strings.Contains(r.stderr, `stage "m"`) {
		t.Fatalf("%s\nwant exit 1 naming stage m", r)
	}
	first, _, _ := strings.Cut(r.stdout, "\n")
	if want := "the run failed after "; !strings.HasPrefix(first, want) || !strings.HasSuffix(first, " steps (the error follows): the figures below cover those steps only") {
		t.Errorf("first line %q, want the failure first", first)
	}
	b, err := os.ReadFile(report)
	if err != nil {
		t.Fatal(err)
	}
	var br cli.BenchReport
	if err := json.Unmarshal(b, &br); err != nil {
		t.Fatal(err)
	}
	if br.OK || !strings.Contains(br.Error, `int("nope")`) || br.Steps > 7 {
		t.Errorf("report %s: want ok false, the error and at most 7 steps", b)
	}
}

// TestBenchTimesTheTrainersBranch: beside a branch the trainer does not
// read, 100 bicubic resizes to 2000×2000 on one worker (some hundred
// times the trainer's own work), bench times the trainer over its span,
// ranks only the stages that feed it, and leaves the other branch out of
// the baseline's CPU, naming it. A new-user test got the whole run's
// steps/s, that branch named the bottleneck, and its CPU in the baseline.
// It checks names and how the figures are made, not timings.
func TestBenchTimesTheTrainersBranch(t *testing.T) {
	dir := t.TempDir()
	spec := writeSpec(t, dir, "b.yaml", `version: 1
name: indep
seed: 1
epochs: 1
resources: {memory: 128MiB}
stages:
  - {name: src, type: range, count: 100}
  - {name: batch, type: batch, size: 10}
  - {name: trainer, type: discard}
  - {name: side, type: range, count: 100}
  - name: slowside
    type: map
    input: side
    parallelism: 1
    set: {x: 'resize(cast([[[1.0]]], "float32"), 2000, 2000, "bicubic")'}
  - {name: sideout, type: discard}
`)
	r, br := benchReport(t, spec, "--step-time", "1ms", "--sink", "trainer")
	var ranked []string
	for _, s := range br.Stages {
		ranked = append(ranked, s.Name)
	}
	slices.Sort(ranked)
	if r.code != 0 || br.Steps != 10 || br.Bottleneck == "slowside" || !slices.Equal(ranked, []string{"batch", "src", "trainer"}) || !slices.Equal(br.Sequential.Others, []string{"side", "slowside"}) {
		t.Errorf("%s\n%d steps, bottleneck %q, stages %v, baseline %+v; want 10 steps, not slowside, batch src trainer, side and slowside left out", r, br.Steps, br.Bottleneck, ranked, br.Sequential)
	}
	// No timings compared (the machine is shared): how the figures are
	// made, each within the next.
	if br.TrainerS <= 0 || br.StepsPerS != float64(br.Steps)/br.TrainerS || br.TrainerS > br.ElapsedS || br.Sequential.CPUS > br.TrainerCPUS || br.TrainerCPUS > br.CPUS {
		t.Errorf("trainer %vs of %vs, %v steps/s, baseline %vs of %vs CPU in the span, %vs in all; want steps/s over the trainer's span, within the run, and the baseline's CPU within the span's",
			br.TrainerS, br.ElapsedS, br.StepsPerS, br.Sequential.CPUS, br.TrainerCPUS, br.CPUS)
	}
	want := "less the share of stages that do not feed the trainer: side, slowside)"
	if !strings.Contains(r.stdout, want) {
		t.Errorf("stdout lacks %q:\n%s", want, r.stdout)
	}
}

// TestBenchStepsBeyondTheData: --steps past what the spec's epochs give
// says the data ran out, instead of reporting fewer steps in silence.
func TestBenchStepsBeyondTheData(t *testing.T) {
	r, br := benchRun(t, "4", "40", "--step-time", "0", "--steps", "100")
	want := "--steps 100: the data ran out after 20 steps\n"
	if r.code != 0 || br.Steps != 20 || br.StepsAsked != 100 || !strings.Contains(r.stdout, want) {
		t.Errorf("%s\n%d of %d steps; want 20 of 100 and %q", r, br.Steps, br.StepsAsked, want)
	}
	r, _ = benchRun(t, "4", "40", "--step-time", "0", "--steps", "20")
	if strings.Contains(r.stdout, "ran out") {
		t.Errorf("--steps 20 of 20 said the data ran out:\n%s", r.stdout)
	}
}

// TestBenchChecksNoSinkOutput: bench replaces every sink, so an output
// folder it cannot make or an address it cannot listen on does not stop
// it (a new-user test was refused with exit 3); a sink's problem of the
// spec itself, and a missing input, still do.
func TestBenchChecksNoSinkOutput(t *testing.T) {
	data, _ := filepath.Abs("../examples/data/shapes")
	for _, tc := range []struct {
		name, source, sink string
		code               int
		want               string
	}{
		{"an output folder it cannot make", "{name: src, type: range, count: 8}", "{name: out, type: write_jsonl, path: /proc/nope/o.jsonl}", 0, ""},
		{"a serve sink off this machine", "{name: src, type: range, count: 8}", "{name: out, type: serve, listen: 'tcp://192.0.2.1:7070'}", 0, ""},
		{"a placeholder write_jsonl leaves", "{name: src, type: range, count: 8}", "{name: out, type: write_jsonl, path: '/proc/nope/o-{shard}.jsonl'}", 3,
			"stages[1].path: write_jsonl writes one file and fills in no placeholders"},
		{"an input file missing", "{name: src, type: files, pattern: " + data + "/nope-*.tfrecord}", "{name: out, type: discard}", 3,
			"stages[0].pattern: "},
		{"an input file there", "{name: src, type: files, pattern: " + data + "/train-*.tfrecord}", "{name: out, type: write_jsonl, path: /proc/nope/o.jsonl}", 0, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spec := writeSpec(t, t.TempDir(), "b.yaml", "version: 1\nname: sinks\nstages:\n  - "+tc.source+"\n  - "+tc.sink+"\n")
			r := run(t, "bench", spec, "--step-time", "0")
			if r.code != tc.code || !strings.Contains(r.stderr, tc.want) {
				t.Errorf("%s\nwant exit %d and %q", r, tc.code, tc.want)
			}
		})
	}
}
