package cli_test

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// cacheFillSpec fills a cache slowly enough to be interrupted mid-epoch:
// each sample costs a few thousand expression steps.
const cacheFillSpec = `
version: 1
name: fill
seed: 9
epochs: 2
stages:
  - {name: src, type: range, count: 6000}
  - name: work
    type: map
    parallelism: 1
    set:
      v: 'sum(map(1..3000, # * index)) % 1000'
  - {name: c, type: cache, dir: cache, commit_every: 50}
  - {name: sh, type: shuffle, buffer: 100}
  - {name: out, type: write_jsonl, path: out.jsonl}
`

type cacheReport struct {
	OK     bool `json:"ok"`
	Caches map[string]struct {
		FromCache int64 `json:"from_cache"`
		Written   int64 `json:"written"`
		Resumed   int64 `json:"resumed"`
		Complete  bool  `json:"complete"`
	} `json:"caches"`
	Sinks map[string]struct {
		Samples int64 `json:"samples"`
	} `json:"sinks"`
}

func applyReport(t *testing.T, dir string) cacheReport {
	t.Helper()
	spec := filepath.Join(dir, "fill.yaml")
	rep := filepath.Join(dir, "report.json")
	cmd := exec.Command(binary, "apply", "--progress", "never", "--report", rep, spec)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("apply: %v\n%s", err, stderr.String())
	}
	var r cacheReport
	b, err := os.ReadFile(rep)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	return r
}

// committed reads the cache manifest's sample count, 0 before the first
// commit.
func committed(dir string) int64 {
	ms, _ := filepath.Glob(filepath.Join(dir, "cache", "*", "manifest.json"))
	if len(ms) == 0 {
		return 0
	}
	var m struct{ Samples int64 }
	b, _ := os.ReadFile(ms[0])
	json.Unmarshal(b, &m)
	return m.Samples
}

// TestCacheSurvivesInterrupt stops a cache fill about halfway, by SIGINT
// and by SIGKILL, then reruns: the output must equal an uninterrupted
// run's, and the report must show that the stored part came from the cache.
func TestCacheSurvivesInterrupt(t *testing.T) {
	ref := t.TempDir()
	writeSpec(t, ref, "fill.yaml", cacheFillSpec)
	r := applyReport(t, ref)
	if c := r.Caches["c"]; c.Written != 6000 || c.FromCache != 6000 || !c.Complete {
		t.Fatalf("reference run cache: %+v", c)
	}
	want, err := os.ReadFile(filepath.Join(ref, "out.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	if n := bytes.Count(want, []byte("\n")); n != 12000 {
		t.Fatalf("reference output has %d lines, want 12000", n)
	}

	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGKILL} {
		t.Run(sig.String(), func(t *testing.T) {
			dir := t.TempDir()
			spec := writeSpec(t, dir, "fill.yaml", cacheFillSpec)
			cmd := exec.Command(binary, "apply", "--progress", "never", spec)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			exited := start(t, cmd).exited
			deadline := time.Now().Add(60 * time.Second)
			for committed(dir) < 3000 { // about half of the 6000-sample first epoch
				select {
				case err := <-exited:
					t.Fatalf("finished before it could be interrupted: %v\n%s", err, stderr.String())
				default:
				}
				if time.Now().After(deadline) {
					cmd.Process.Kill()
					t.Fatalf("cache did not fill in 60s\n%s", stderr.String())
				}
				time.Sleep(5 * time.Millisecond)
			}
			if err := cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			select {
			case <-exited:
			case <-time.After(10 * time.Second):
				cmd.Process.Kill()
				t.Fatalf("no exit 10s after %v", sig)
			}
			if _, err := os.Stat(filepath.Join(dir, "out.jsonl")); !os.IsNotExist(err) {
				t.Fatalf("interrupted run left out.jsonl: %v", err)
			}
			stored := committed(dir)
			if stored < 3000 || stored >= 6000 {
				t.Fatalf("after %v the cache holds %d samples; want a partial fill", sig, stored)
			}

			r := applyReport(t, dir)
			c := r.Caches["c"]
			if c.Resumed < stored || c.Resumed >= 6000 {
				t.Errorf("resumed %d, want at least the %d committed", c.Resumed, stored)
			}
			if c.Written != 6000-c.Resumed || c.FromCache != c.Resumed+6000 || !c.Complete {
				t.Errorf("rerun cache stats %+v", c)
			}
			got, err := os.ReadFile(filepath.Join(dir, "out.jsonl"))
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("output after %v and a rerun differs from an uninterrupted run", sig)
			}
			if sig == syscall.SIGINT && !strings.Contains(stderr.String(), "interrupted") {
				t.Errorf("stderr: %s", stderr.String())
			}
		})
	}
}

func TestCacheCommands(t *testing.T) {
	dir := t.TempDir()
	writeSpec(t, dir, "fill.yaml", strings.Replace(cacheFillSpec, "count: 6000", "count: 300", 1))
	applyReport(t, dir)
	spec := filepath.Join(dir, "fill.yaml")
	r := run(t, "cache", "ls", "--format", "json", spec)
	if r.code != 0 {
		t.Fatalf("cache ls: %d %s", r.code, r.stderr)
	}
	var ms []struct {
		Fingerprint, Pipeline, Stage string
		Samples                      int64
		Complete                     bool
	}
	if err := json.Unmarshal([]byte(r.stdout), &ms); err != nil {
		t.Fatal(err)
	}
	if len(ms) != 1 || ms[0].Pipeline != "fill" || ms[0].Stage != "c" || ms[0].Samples != 300 || !ms[0].Complete || len(ms[0].Fingerprint) != 16 {
		t.Fatalf("cache ls: %+v", ms)
	}
	if r := run(t, "cache", "info", filepath.Join(dir, "cache"), ms[0].Fingerprint[:6]); r.code != 0 || !strings.Contains(r.stdout, `"samples": 300`) {
		t.Errorf("cache info: %d %s %s", r.code, r.stdout, r.stderr)
	}
	missing := filepath.Join(t.TempDir(), "nope")
	if r := run(t, "cache", "ls", missing); r.code != 1 || !strings.Contains(r.stderr, "cache directory "+missing+" does not exist") {
		t.Errorf("ls of a missing directory: %s", r)
	}
	if r := run(t, "cache", "ls", spec); r.code != 0 {
		t.Errorf("ls of a spec: %s", r)
	}
	// What a prune that died left aside is named, and the next prune
	// removes it.
	left := filepath.Join(dir, "cache", ".pruning-0123456789abcdef-99")
	if err := os.MkdirAll(filepath.Join(left, "badger"), 0o755); err != nil {
		t.Fatal(err)
	}
	if r := run(t, "cache", "ls", filepath.Join(dir, "cache")); r.code != 0 || !strings.Contains(r.stderr, left+": left by a cache prune that did not finish; the next cache prune "+filepath.Join(dir, "cache")+" removes it") {
		t.Errorf("ls with a prune's leftover: %s", r)
	}
	if r := run(t, "cache", "prune", "--keep-last", "5", filepath.Join(dir, "cache")); r.code != 0 {
		t.Errorf("prune: %s", r)
	}
	if _, err := os.Stat(left); !os.IsNotExist(err) {
		t.Errorf("the leftover is still there after a prune: %v", err)
	}
	notDir := filepath.Join(dir, "file")
	if err := os.WriteFile(notDir, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if r := run(t, "cache", "ls", notDir); r.code != 1 || !strings.Contains(r.stderr, notDir+" is not a cache directory (or a spec ending in .yaml)") {
		t.Errorf("ls of a file: %s", r)
	}
	for _, flag := range [][]string{{"--older-than", "-1h"}, {"--keep-last", "-3"}} {
		if r := run(t, append([]string{"cache", "prune"}, append(flag, spec)...)...); r.code != 2 {
			t.Errorf("prune %v: %s, want exit 2", flag, r)
		}
	}
	// Days, as people say it; a bad value names both forms.
	if r := run(t, "cache", "prune", "--older-than", "7d", filepath.Join(t.TempDir())); r.code != 0 {
		t.Errorf("prune --older-than 7d: %s", r)
	}
	if r := run(t, "cache", "prune", "--older-than", "7days", filepath.Join(t.TempDir())); r.code != 2 ||
		!strings.Contains(r.stderr, `want a number of days (7d) or a duration (36h), got "7days"`) {
		t.Errorf("prune --older-than 7days: %s", r)
	}
	// --older-than 0s is a limit (any age), not a missing flag.
	if r := run(t, "cache", "prune", "--older-than", "0s", filepath.Join(t.TempDir())); r.code != 0 {
		t.Errorf("prune --older-than 0s: %s", r)
	}
	if r := run(t, "cache", "prune", spec); r.code != 2 {
		t.Errorf("prune without limits: exit %d", r.code)
	}
	if r := run(t, "cache", "prune", "--keep-last", "1", spec); r.code != 0 || !strings.HasSuffix(r.stdout, "/cache: nothing to remove\n") || strings.Count(r.stdout, "\n") != 1 {
		t.Errorf("prune keeping the only cache: %q, want it to say it removed nothing", r.stdout)
	}
	if r := run(t, "cache", "prune", "--keep-last", "0", spec); r.code != 0 || !strings.Contains(r.stdout, "removed ") {
		t.Errorf("prune: %d %q %q", r.code, r.stdout, r.stderr)
	}
	if r := run(t, "cache", "ls", spec); r.code != 0 || strings.Count(r.stdout, "\n") != 1 {
		t.Errorf("after prune: %q", r.stdout)
	}
}

// TestCacheUnknownCommand: `cache rm DIR` is a usage error, as `piperun
// foo` is; it printed the help and exited 0, so a script calling it
// seemed to succeed.
func TestCacheUnknownCommand(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"cache", "rm", "out/cache"}, "piperun: unknown command \"rm\" for \"piperun cache\" (its commands: info, ls, prune; did you mean prune?)\n"},
		{[]string{"cache", "stats", "out/cache"}, "piperun: unknown command \"stats\" for \"piperun cache\" (its commands: info, ls, prune)\n"},
		{[]string{"cache", "lss", "out/cache"}, "piperun: unknown command \"lss\" for \"piperun cache\" (its commands: info, ls, prune; did you mean ls?)\n"},
		{[]string{"cache"}, "piperun: cache needs a command: info, ls or prune\n"},
	} {
		r := run(t, tc.args...)
		if r.code != 2 || r.stderr != tc.want {
			t.Errorf("%v: %s\nwant exit 2 and %q", tc.args, r, tc.want)
		}
	}
}
