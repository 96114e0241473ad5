package spec_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/piperun/piperun/spec"
	"github.com/piperun/piperun/stages"
)

// FuzzLoad feeds arbitrary bytes to the spec loader, seeded with every spec
// in the repository. It must never panic, every diagnostic must carry the
// file name, and a spec reported clean must be a complete, ordered DAG.
func FuzzLoad(f *testing.F) {
	for _, g := range []string{"testdata/*/*.yaml", "../examples/pipelines/*.yaml", "../cli/testdata/*.yaml"} {
		files, _ := filepath.Glob(g)
		for _, file := range files {
			if b, err := os.ReadFile(file); err == nil {
				f.Add(b)
			}
		}
	}
	f.Add([]byte("version: 1\nname: x\nstages: [{name: a, type: range, count: 1}, {name: b, type: discard}]\n"))
	f.Add([]byte("&a [*a]"))
	f.Add([]byte("version: 1\nstages:\n  - &s {name: a, type: range, count: 1}\n  - *s\n"))
	reg := stages.Default()
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, data []byte) {
		file := filepath.Join(dir, "fuzz.yaml")
		sp, diags := spec.Parse(file, data, spec.Options{Catalog: reg, LookupEnv: noEnv})
		for _, d := range diags {
			if d.Pos.File != file || d.Message == "" {
				t.Fatalf("diagnostic without file or message: %+v", d)
			}
		}
		if diags.HasErrors() {
			return
		}
		if sp == nil {
			t.Fatal("no spec and no errors")
		}
		if len(sp.Order) != len(sp.Stages) {
			t.Fatalf("clean spec with %d stages orders only %d", len(sp.Stages), len(sp.Order))
		}
		seen := map[*spec.Stage]bool{}
		for _, st := range sp.Order {
			for _, in := range st.Inputs {
				if !seen[in] {
					t.Fatalf("stage %q comes before its input %q", st.Name, in.Name)
				}
			}
			seen[st] = true
		}
	})
}

// FuzzParseByteSize: sizes never panic, are never negative, and what
// String prints parses back to within its rounding.
func FuzzParseByteSize(f *testing.F) {
	for _, s := range []string{"512MiB", "2GiB", "1.5GB", "1000", "0", "1e3K", "-1", "9e18TiB", " 3 MiB"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		b, err := spec.ParseByteSize(s)
		if err != nil {
			return
		}
		if b < 0 {
			t.Fatalf("%q parsed to negative %d", s, b)
		}
		back, err := spec.ParseByteSize(b.String())
		if err != nil {
			t.Fatalf("String %q of %d does not parse: %v", b.String(), b, err)
		}
		if diff := float64(back) - float64(b); diff > float64(b)/100+1 || -diff > float64(b)/100+1 {
			t.Fatalf("%d printed as %q reads back as %d", b, b.String(), back)
		}
	})
}

// FuzzParseDuration: durations never panic, are more than zero, print
// as a duration that parses back to the same, and match the schema's
// pattern.
func FuzzParseDuration(f *testing.F) {
	for _, s := range []string{"90s", "10m", "1h30m", "0", "-1s", ".5h", "1.5µs", "2562047h47m16.854775807s", "9999999999h", " 3m "} {
		f.Add(s)
	}
	pattern := regexp.MustCompile(spec.Duration(0).JSONSchema().Pattern)
	f.Fuzz(func(t *testing.T, s string) {
		d, err := spec.ParseDuration(s)
		if err != nil {
			return
		}
		if d <= 0 {
			t.Fatalf("%q parsed to %d, not more than 0", s, d)
		}
		if !pattern.MatchString(strings.TrimSpace(s)) {
			t.Fatalf("%q parsed, but the schema's pattern refuses it", s)
		}
		if back, err := spec.ParseDuration(d.String()); err != nil || back != d {
			t.Fatalf("%d printed as %q reads back as %d, %v", d, d.String(), back, err)
		}
	})
}

// FuzzExpand: interpolation never panics and leaves text without "${"
// unchanged.
func FuzzExpand(f *testing.F) {
	for _, s := range []string{"${A}", "${A:-x}", "$${A}", "${", "a${B:-${C}}b", "plain"} {
		f.Add(s)
	}
	lookup := func(k string) (string, bool) {
		if k == "A" {
			return "v", true
		}
		return "", false
	}
	f.Fuzz(func(t *testing.T, s string) {
		out, err := spec.Expand(s, lookup)
		if err == nil && !containsDollarBrace(s) && out != s {
			t.Fatalf("Expand(%q) = %q, want it unchanged", s, out)
		}
	})
}

func containsDollarBrace(s string) bool {
	for i := 0; i+1 < len(s); i++ {
		if s[i] == '$' && s[i+1] == '{' {
			return true
		}
	}
	return false
}

// FuzzSet applies arbitrary --set overrides to a valid spec. They must
// never panic; a rejected override is a diagnostic that names it, and an
// accepted one leaves a spec that loads or fails with diagnostics.
func FuzzSet(f *testing.F) {
	for _, s := range []string{"seed=99", "stages.src.count=3", "stages.1.parallelism=4", "resources.memory=1GiB",
		"epochs=[1, 2]", "stages.nope.count=1", "stages.9.x=1", "=1", "a", "stages=", "stages.0=null", "a.b.c.d={x: &a [*a]}",
		"stages.-1.count=2", "resources=[1]", "stages.src.count=3=4", "name=\"\\xff\"", `stages.m.set.a\.b=1`, `a\\.=1`, `\.`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, set string) {
		sp, diags := spec.Load("testdata/valid/interp.yaml", spec.Options{Catalog: stages.Default(), LookupEnv: noEnv, Set: []string{set}})
		for _, d := range diags {
			if d.Message == "" {
				t.Fatalf("--set %q: a diagnostic without a message: %+v", set, d)
			}
		}
		if !diags.HasErrors() && sp == nil {
			t.Fatalf("--set %q: no spec and no errors", set)
		}
	})
}
