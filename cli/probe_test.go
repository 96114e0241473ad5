package cli_test

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestValidateProbe: the size of a record is unknown until read, so a
// prefetch buffer too large for the budget passes plain validate and fails
// validate --probe, with the measured numbers. A shuffle that large is
// shrunk by the run, and --probe warns of it as the run does.
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
  - {name: sh, type: prefetch, buffer: 100000}
  - {name: out, type: discard}
`)
	if r := run(t, "validate", spec); r.code != 0 {
		t.Fatalf("plain validate: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r := run(t, "validate", "--probe", "32", spec)
	if r.code != 1 {
		t.Fatalf("validate --probe: exit %d, want 1\n%s%s", r.code, r.stdout, r.stderr)
	}
	want := `probe.yaml:8:40: stages[2].buffer: stage "sh" buffers 100000 samples of about `
	if !strings.Contains(r.stdout, want) || !strings.Contains(r.stdout, "more than resources.memory (64MiB)") {
		t.Errorf("stdout:\n%s\nwant it to contain %q", r.stdout, want)
	}
	// plan shows the measured sizes, and rejects the spec as validate does.
	p := run(t, "plan", "--probe", "32", spec)
	if p.code != 3 || !strings.Contains(p.stdout, "~") || !strings.Contains(p.stderr, want) {
		t.Errorf("plan --probe: exit %d, want 3 with measured sizes and %q:\n%s%s", p.code, want, p.stdout, p.stderr)
	}
	b, err := os.ReadFile(spec)
	if err != nil {
		t.Fatal(err)
	}
	shuffle := writeSpec(t, dir, "shuffle.yaml", strings.Replace(string(b), "type: prefetch", "type: shuffle", 1))
	r = run(t, "validate", "--probe", "32", shuffle)
	if r.code != 0 || !strings.Contains(r.stdout, "shuffle.yaml:8:39: warning: stages[2].buffer: 100000 samples of about ") || !strings.Contains(r.stdout, "a shuffle may fill: it will hold about ") {
		t.Errorf("validate --probe of the shuffle: got %s\nwant exit 0 and a warning that it will hold fewer", r)
	}
}

// TestProbeWritesNothing: a probe of a pipeline that ends within it
// commits no output and leaves what was there; a serve sink does not wait
// for a trainer. Found by the re-test: the probe's run committed its sinks
// (overwriting the file), and validate --probe with serve waited forever.
func TestProbeWritesNothing(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "out.jsonl")
	if err := os.WriteFile(out, []byte("OLD\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	spec := writeSpec(t, dir, "p.yaml", `
version: 1
name: probe
stages:
  - {name: src, type: range, count: 10}
  - {name: out, type: write_jsonl, path: out.jsonl}
  - {name: tf, type: write_tfrecord, input: src, path: 'tf-{shard}.tfrecord', shards: 2}
  - {name: srv, type: serve, input: src, listen: 'unix://`+filepath.Join(dir, "s.sock")+`'}
`)
	for _, cmd := range []string{"validate", "plan"} {
		if r := run(t, cmd, "--probe", "5", spec); r.code != 0 {
			t.Fatalf("%s --probe: %s", cmd, r)
		}
	}
	if b, _ := os.ReadFile(out); string(b) != "OLD\n" {
		t.Errorf("out.jsonl now holds %q", b)
	}
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if e.Name() != "p.yaml" && e.Name() != "out.jsonl" {
			t.Errorf("the probe left %s", e.Name())
		}
	}
}

// TestProbeEndsForAStarvedSink: an endless pipeline one of whose sinks
// gets nothing fails the probe, naming the sink, instead of probing for
// ever (the engine's own check saw samples
// reach the other sink).
func TestProbeEndsForAStarvedSink(t *testing.T) {
	dir := t.TempDir()
	spec := writeSpec(t, dir, "starved.yaml", `
version: 1
name: starved
epochs: 0
stages:
  - {name: a, type: range, count: 10}
  - {name: o1, type: write_jsonl, path: o1.jsonl}
  - {name: f, type: filter, input: a, where: 'index > 100'}
  - {name: o2, type: write_jsonl, path: o2.jsonl}
`)
	for _, tc := range []struct {
		cmd  string
		code int
	}{{"validate", 1}, {"plan", 1}} {
		r := run(t, tc.cmd, "--probe", "5", spec)
		want := `probe: sink "o2" got 0 of 5 samples and nothing more while the sources above it read `
		if r.code != tc.code || !strings.Contains(r.stdout+r.stderr, want) {
			t.Errorf("%s --probe: %s\nwant exit %d and %q", tc.cmd, r, tc.code, want)
		}
		// plan still shows the plan, unprobed (a re-test got an empty
		// stdout).
		if tc.cmd == "plan" && !strings.HasPrefix(r.stdout, "pipeline starved: ") {
			t.Errorf("plan --probe that fails printed no plan:\n%s", r)
		}
	}
}

// TestInterruptedProbeIsNotValid: a probe stopped by a signal (Ctrl-C, a CI
// job's timeout) is a problem, exit 1, never "1 spec valid" and exit 0.
func TestInterruptedProbeIsNotValid(t *testing.T) {
	dir := t.TempDir()
	spec := writeSpec(t, dir, "endless.yaml", `
version: 1
name: endless
epochs: 0
stages:
  - {name: a, type: range, count: 1000}
  - {name: out, type: write_jsonl, path: out.jsonl}
`)
	for _, cmd := range []string{"validate", "plan"} {
		t.Run(cmd, func(t *testing.T) {
			var stdout bytes.Buffer
			c := exec.Command(binary, "--log-level", "debug", cmd, "--probe", "1000000000000", spec)
			c.Stdout = &stdout
			pipe, err := c.StderrPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := c.Start(); err != nil {
				t.Fatal(err)
			}
			// The signal goes once the probe runs: a fixed sleep could
			// send it before, on a slow machine.
			var stderr strings.Builder
			running, copied := make(chan struct{}), make(chan struct{})
			go func() {
				defer close(copied)
				sc := bufio.NewScanner(pipe)
				for sc.Scan() {
					stderr.WriteString(sc.Text() + "\n")
					if strings.Contains(sc.Text(), "probe running") {
						close(running)
					}
				}
			}()
			select {
			case <-running:
			case <-copied:
				t.Fatalf("%s --probe ended before its probe ran: %s", cmd, stderr.String())
			case <-time.After(time.Minute):
				c.Process.Kill()
				t.Fatalf("%s --probe did not say its probe runs within a minute", cmd)
			}
			if err := c.Process.Signal(syscall.SIGINT); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() { <-copied; done <- c.Wait() }() // Wait after the last read of the pipe
			select {
			case <-done:
			case <-time.After(30 * time.Second):
				c.Process.Kill()
				t.Fatalf("%s --probe did not end 30 s after SIGINT", cmd)
			}
			out := stdout.String() + stderr.String()
			if c.ProcessState.ExitCode() != 1 || !strings.Contains(out, "probe interrupted before every sink had 1000000000000 samples") || strings.Contains(out, "valid") {
				t.Errorf("%s --probe after SIGINT: exit %d\n%s", cmd, c.ProcessState.ExitCode(), out)
			}
		})
	}
}

// TestProbeWaitsForSlowAndFinishedSinks: a sink behind a slow branch is
// not called starved because another branch's tiny source read many
// epochs, and a sink whose input ended (a take above it) has all it gets
// (both found in review of the starved-sink check).
func TestProbeWaitsForSlowAndFinishedSinks(t *testing.T) {
	for name, stages := range map[string]string{
		"slow branch beside a tiny source": `
  - {name: a, type: range, count: 1}
  - {name: o1, type: write_jsonl, path: o1.jsonl}
  - {name: b, type: range, count: 100000000}
  - {name: f, type: filter, input: b, where: 'index % 50000 == 0'}
  - {name: o2, type: write_jsonl, path: o2.jsonl}`,
		"take above a sink": `
  - {name: a, type: range, count: 100}
  - {name: o1, type: write_jsonl, path: o1.jsonl}
  - {name: t, type: take, input: a, count: 3}
  - {name: o2, type: write_jsonl, path: o2.jsonl}`,
	} {
		spec := writeSpec(t, t.TempDir(), "p.yaml", "version: 1\nname: p\nepochs: 0\nstages:"+stages+"\n")
		if r := run(t, "validate", "--probe", "5", spec); r.code != 0 {
			t.Errorf("%s: %s", name, r)
		}
	}
}

// TestPlanProbeOfAMisfit: a spec whose buffers do not fit is shown and
// rejected with exit 3 before any probe, which would stall (a new-user
// test: the probe hung, failed "stuck" and showed no plan).
func TestPlanProbeOfAMisfit(t *testing.T) {
	spec, _ := filepath.Abs("../examples/pipelines/quickstart.yaml")
	r := run(t, "plan", spec, "--set", "resources.memory=3MiB", "--probe", "10")
	for _, want := range []string{"--probe was not run: the buffers do not fit the budget even as far as they are known, and a run of them would stall", "the pipeline's buffers do not fit in resources.memory"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("stderr lacks %q", want)
		}
	}
	if r.code != 3 || !strings.HasPrefix(r.stdout, "pipeline quickstart: ") || strings.Contains(r.stdout, "~") || strings.Contains(r.stderr, "stuck") {
		t.Errorf("%s\nwant exit 3, the plan unprobed and no stuck run", r)
	}
	// validate --probe likewise: the fit's error, no stuck probe.
	r = run(t, "validate", spec, "--set", "resources.memory=3MiB", "--probe", "10")
	for _, want := range []string{"--probe was not run: the buffers do not fit the budget even as far as they are known, and a run of them would stall", "stages[7].buffer: stage \"prefetch\" buffers 4 samples of at least 864.71KiB each = 3.38MiB, more than resources.memory (3MiB): the other stages leave no room for one sample; raise resources.memory to at least 9.49MiB"} {
		if !strings.Contains(r.stdout+r.stderr, want) {
			t.Errorf("validate: output lacks %q", want)
		}
	}
	if r.code != 1 || strings.Contains(r.stdout+r.stderr, "stuck") {
		t.Errorf("validate: %s\nwant exit 1 and no stuck run", r)
	}
}

// TestProbeCountsAFullBatch: a batch without drop_remainder is counted as
// a full one, also where the probe saw a short last batch: 65 samples in
// batches of 64 are measured as 64 of them, not as the mean of a batch of
// 64 and one of 1 (a new-user test saw half a batch).
func TestProbeCountsAFullBatch(t *testing.T) {
	const src = `version: 1
name: short
seed: 1
resources: {memory: 64MiB}
stages:
  - {name: src, type: range, count: COUNT}
  - {name: m, type: map, set: {s: 'repeat("x", 10000)'}}
  - {name: batch, type: batch, size: 64, drop_remainder: DROP}
  - {name: out, type: discard}
`
	// With drop_remainder every batch is full; without, the short one's
	// own overhead makes the measure a little larger, never half.
	for _, tc := range []struct{ count, drop, want string }{
		{"65", "false", "batch batch m 1 64 ~627.21KiB 1.24MiB"},
		{"128", "true", "batch batch m 1 64 ~626.88KiB 1.24MiB"},
	} {
		spec := writeSpec(t, t.TempDir(), "p.yaml", strings.NewReplacer("COUNT", tc.count, "DROP", tc.drop).Replace(src))
		r := run(t, "plan", spec, "--probe", "64")
		if r.code != 0 {
			t.Fatalf("plan --probe: %s", r)
		}
		row := ""
		for _, l := range strings.Split(r.stdout, "\n") {
			if f := strings.Fields(l); len(f) > 6 && f[0] == "batch" {
				row = strings.Join(f[:7], " ")
			}
		}
		if row != tc.want {
			t.Errorf("%s samples, drop_remainder %s: batch row %q, want %q", tc.count, tc.drop, row, tc.want)
		}
	}
}
