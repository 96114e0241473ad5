package stages_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/piperun/piperun/expression"
	"github.com/piperun/piperun/spec"
	"github.com/piperun/piperun/stages"
)

// fingerprintOf returns the fingerprint of the last cache stage of body.
func fingerprintOf(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "s.yaml")
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	sp, diags := spec.Load(p, spec.Options{Catalog: stages.Default()})
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	var st *spec.Stage
	for _, s := range sp.Stages {
		if s.Type == "cache" {
			st = s
		}
	}
	fp, _, err := stages.Fingerprint(sp, st, 7)
	if err != nil {
		t.Fatal(err)
	}
	return fp
}

// TestFingerprintFollowsTheSamplesOnly: a cache's key changes with what
// changes the samples above it, and not with what does not: a prefetch's
// buffer, an upstream cache's directory and commit interval, parallelism,
// or a stage's name when nothing above is random (tuning
// a prefetch recomputed everything upstream). With randomness above, a
// name seeds the generators, so renaming does change it.
func TestFingerprintFollowsTheSamplesOnly(t *testing.T) {
	const base = `version: 1
name: p
seed: 1
stages:
  - {name: src, type: range, count: 10}
  - {name: m, type: map, parallelism: 1, set: {x: 'index * 2'}}
  - {name: pf, type: prefetch, buffer: 4}
  - {name: c1, type: cache, dir: c1, commit_every: 100}
  - {name: c, type: cache, dir: cache}
  - {name: out, type: discard}
`
	const random = `version: 1
name: p
seed: 1
stages:
  - {name: src, type: range, count: 10}
  - {name: m, type: map, set: {x: 'index * 2'}}
  - {name: sh, type: shuffle, buffer: 4}
  - {name: c, type: cache, dir: cache}
  - {name: out, type: discard}
`
	for _, tc := range []struct {
		name, from, to string
		random, same   bool
	}{
		{"prefetch buffer", "buffer: 4", "buffer: 8", false, true},
		{"upstream cache commit_every", "commit_every: 100", "commit_every: 7", false, true},
		{"upstream cache dir", "dir: c1", "dir: elsewhere", false, true},
		{"parallelism", "parallelism: 1", "parallelism: 2", false, true},
		{"a stage's name", "name: m,", "name: renamed,", false, true},
		{"an expression", "'index * 2'", "'index * 3'", false, false},
		{"the source", "count: 10", "count: 11", false, false},
		{"a name above randomness", "name: m,", "name: renamed,", true, false},
		// With deterministic: false the stages above number samples in
		// the order they finish: a deterministic run must not resume, or
		// replay, such a fill (250 samples twice and 250
		// lost, for good once the cache completed).
		{"deterministic: false", "seed: 1\n", "seed: 1\ndeterministic: false\n", false, false},
		{"deterministic: true written out", "seed: 1\n", "seed: 1\ndeterministic: true\n", false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := base
			if tc.random {
				body = random
			}
			changed := strings.Replace(body, tc.from, tc.to, 1)
			if changed == body {
				t.Fatalf("%q is not in the spec", tc.from)
			}
			a, b := fingerprintOf(t, body), fingerprintOf(t, changed)
			if (a == b) != tc.same {
				t.Errorf("%s → %s: fingerprints %s and %s, want same %v", tc.from, tc.to, a, b, tc.same)
			}
		})
	}
}

// TestFingerprintFollowsLiteralFiles: a file an expression names as text
// (read_file("data.txt")) joins the fingerprint of a cache below, by its
// resolved path, size and modification time: a copy of the spec in another
// folder, next to other data, and a change to the file, fill caches of
// their own (a shared cache dir replayed folder A's data for
// folder B's spec, and the old data after the file changed).
func TestFingerprintFollowsLiteralFiles(t *testing.T) {
	const body = `version: 1
name: p
stages:
  - {name: src, type: range, count: 3}
  - {name: m, type: map, set: {x: 'string(read_file("data.txt"))'}}
  - {name: f, type: filter, where: 'len(read_file("keep.txt")) > 0'}
  - {name: c, type: cache, dir: /nonexistent/cache}
  - {name: out, type: discard}
`
	fpIn := func(dir string) string {
		t.Helper()
		p := filepath.Join(dir, "s.yaml")
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		sp, diags := spec.Load(p, spec.Options{Catalog: stages.Default()})
		if diags.HasErrors() {
			t.Fatal(diags)
		}
		fp, _, err := stages.Fingerprint(sp, sp.Stages[3], 7)
		if err != nil {
			t.Fatal(err)
		}
		return fp
	}
	write := func(path, text string) {
		t.Helper()
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	a, b := t.TempDir(), t.TempDir()
	for _, d := range []string{a, b} {
		write(filepath.Join(d, "data.txt"), "AAA")
		write(filepath.Join(d, "keep.txt"), "y")
	}
	fa := fpIn(a)
	if again := fpIn(a); again != fa {
		t.Fatalf("the same spec and files: %s, then %s", fa, again)
	}
	if fb := fpIn(b); fb == fa {
		t.Errorf("the spec in another folder, reading its own data.txt, has the same fingerprint %s", fa)
	}
	write(filepath.Join(a, "data.txt"), "ZZZZ")
	if fz := fpIn(a); fz == fa {
		t.Errorf("data.txt changed, and the fingerprint did not")
	}
	fz := fpIn(a)
	write(filepath.Join(a, "keep.txt"), "yes")
	if fk := fpIn(a); fk == fz {
		t.Errorf("keep.txt, read by a filter, changed, and the fingerprint did not")
	}
}

// TestEveryRandomFunctionMakesAStageRandom: a map calling any function
// the expression registry marks Random makes the stage random, so that a
// cache below keys on the seed and bench does not advise caching it. The
// list was written out by hand and missed the functions added later
// (flip_up_down, color_jitter): a cache after a colour jitter replayed
// one seed's jitter under another.
func TestEveryRandomFunctionMakesAStageRandom(t *testing.T) {
	reg := expression.Default()
	random := 0
	for _, name := range reg.Names() {
		f, _ := reg.Lookup(name)
		src := "version: 1\nname: p\nstages:\n  - {name: src, type: range, count: 10}\n" +
			"  - {name: m, type: map, set: {x: '" + name + "(index)'}}\n  - {name: out, type: discard}\n"
		sp, _ := spec.Parse("p.yaml", []byte(src), spec.Options{Catalog: stages.Default()})
		if sp == nil {
			t.Fatalf("%s: the spec did not parse", name)
		}
		st := sp.Stages[1]
		if got := stages.IsRandom(st); got != f.Random {
			t.Errorf("a map calling %s: IsRandom %v, want %v", name, got, f.Random)
		}
		if f.Random {
			random++
		}
	}
	if random < 5 {
		t.Errorf("only %d random functions in the registry", random)
	}
	// The marks themselves, for the functions that draw.
	for _, name := range []string{"random_crop", "random_resized_crop", "flip_left_right", "flip_up_down", "color_jitter"} {
		if f, ok := reg.Lookup(name); !ok || !f.Random {
			t.Errorf("%s is not registered as random", name)
		}
	}
}
