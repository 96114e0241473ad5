package spec_test

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/piperun/piperun/spec"
	"github.com/piperun/piperun/stages"
)

var update = flag.Bool("update", false, "rewrite golden files")

// noEnv resolves no environment variable, so tests do not depend on the
// machine's environment.
func noEnv(string) (string, bool) { return "", false }

// wantOnlyDiag fails unless ds is exactly one diagnostic, reading want.
func wantOnlyDiag(t *testing.T, ds spec.Diagnostics, want string) {
	t.Helper()
	if len(ds) != 1 || ds[0].String() != want {
		t.Fatalf("diagnostics:\n%v\nwant exactly:\n%s", ds, want)
	}
}

func diagText(ds spec.Diagnostics) string {
	var b strings.Builder
	for _, d := range ds {
		b.WriteString(d.String())
		b.WriteByte('\n')
	}
	return b.String()
}

// TestInvalidGolden checks that every problem in each invalid spec is
// reported, with its file:line:col and path, against testdata/invalid/*.golden.
func TestInvalidGolden(t *testing.T) {
	files, _ := filepath.Glob("testdata/invalid/*.yaml")
	if len(files) == 0 {
		t.Fatal("no test specs")
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			_, diags := spec.Load(f, spec.Options{Catalog: stages.Default(), LookupEnv: noEnv, Environment: true})
			if !diags.HasErrors() {
				t.Fatalf("no errors for %s", f)
			}
			// Resolved paths are absolute; the checkout's location must not
			// leak into the golden files.
			abs, _ := filepath.Abs(".")
			got := strings.ReplaceAll(diagText(diags), abs, "$PKG")
			golden := strings.TrimSuffix(f, ".yaml") + ".golden"
			if *update {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run go test ./spec -update)", err)
			}
			if got != string(want) {
				t.Errorf("diagnostics differ from %s:\n--- got\n%s--- want\n%s", golden, got, want)
			}
		})
	}
}

func TestInterpolationAndDefaults(t *testing.T) {
	env := map[string]string{"COUNT": "25"}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	sp, diags := spec.Load("testdata/valid/interp.yaml", spec.Options{Catalog: stages.Default(), LookupEnv: lookup})
	if diags.HasErrors() {
		t.Fatalf("unexpected problems:\n%v", diags)
	}
	if *sp.Seed != 7 {
		t.Errorf("seed = %d, want default 7", *sp.Seed)
	}
	if got := sp.Stage("src").Config.(*stages.RangeConfig).Count; got != 25 {
		t.Errorf("count = %d, want 25 from $COUNT", got)
	}
	m := sp.Stage("m")
	if m.Parallelism.N != 2 {
		t.Errorf("parallelism = %v, want 2", m.Parallelism)
	}
	if got, _ := m.Config.(*stages.MapConfig).Set.Get("price"); got != `"${not_a_var}"` {
		t.Errorf("escaped $${ gave %q", got)
	}
	if sp.Epochs != 1 || !sp.Deterministic {
		t.Errorf("defaults: epochs %d deterministic %v, want 1 true", sp.Epochs, sp.Deterministic)
	}
	if m.OnError != "fail" {
		t.Errorf("on_error default = %q", m.OnError)
	}
	if got := sp.Stage("out").Inputs[0].Name; got != "m" {
		t.Errorf("default input of out = %q, want m", got)
	}
	if got := m.Schema.String(); got != "{index: int64, label: int64, price: string}" {
		t.Errorf("schema of m = %s", got)
	}
}

func TestSetOverrides(t *testing.T) {
	tests := []struct {
		set  []string
		want func(*spec.Spec) bool
		desc string
	}{
		{[]string{"seed=99"}, func(s *spec.Spec) bool { return *s.Seed == 99 }, "seed 99"},
		{[]string{"stages.src.count=3"}, func(s *spec.Spec) bool { return s.Stage("src").Config.(*stages.RangeConfig).Count == 3 }, "count by name"},
		{[]string{"stages.1.parallelism=4"}, func(s *spec.Spec) bool { return s.Stage("m").Parallelism.N == 4 }, "parallelism by index"},
		{[]string{"stages.0.count=3"}, func(s *spec.Spec) bool { return s.Stage("src").Config.(*stages.RangeConfig).Count == 3 }, "count by index"},
		{[]string{"stages.m.parallelism=3.0"}, func(s *spec.Spec) bool { return s.Stage("m").Parallelism.N == 3 }, "parallelism written as a float"},
		{[]string{"resources.memory=1GiB"}, func(s *spec.Spec) bool { return s.Resources.Memory == 1<<30 }, "new nested key"},
		{[]string{"epochs=3", "deterministic=false"}, func(s *spec.Spec) bool { return s.Epochs == 3 && !s.Deterministic }, "two overrides"},
	}
	for _, tc := range tests {
		sp, diags := spec.Load("testdata/valid/interp.yaml", spec.Options{Catalog: stages.Default(), LookupEnv: noEnv, Set: tc.set})
		if diags.HasErrors() {
			t.Errorf("%s: %v", tc.desc, diags)
			continue
		}
		if !tc.want(sp) {
			t.Errorf("%s: override %v not applied", tc.desc, tc.set)
		}
	}
	_, diags := spec.Load("testdata/valid/interp.yaml", spec.Options{Catalog: stages.Default(), LookupEnv: noEnv, Set: []string{"stages.nope.count=1"}})
	if got := diagText(diags); !strings.Contains(got, `testdata/valid/interp.yaml (--set stages.nope.count=1): no element "nope" in stages (known: src, m, out)`) {
		t.Errorf("bad override: %s", got)
	}
	_, diags = spec.Load("testdata/valid/interp.yaml", spec.Options{Catalog: stages.Default(), LookupEnv: noEnv, Set: []string{"stages..count=1"}})
	if got := diagText(diags); !strings.Contains(got, `(--set stages..count=1): empty name after stages. (two dots?)`) {
		t.Errorf("bad override: %s", got)
	}
	// A key holding a dot is reached with \. (it made a mapping x
	// holding y, "expected a string, got a mapping").
	dotted := []byte("version: 1\nname: t\nstages:\n  - {name: src, type: range, count: 3}\n  - {name: m, type: map, set: {x.y: '1'}}\n  - {name: out, type: discard}\n")
	sp, diags := spec.Parse("d.yaml", dotted, spec.Options{Catalog: stages.Default(), LookupEnv: noEnv, Set: []string{`stages.m.set.x\.y=index + 2`}})
	if diags.HasErrors() {
		t.Errorf("dotted key: %v", diags)
	} else if set := sp.Stage("m").Config.(*stages.MapConfig).Set; set.Len() != 1 || set.Entries[0].Key != "x.y" || set.Entries[0].Value != "index + 2" {
		t.Errorf("dotted key: set is %+v", set.Entries)
	}
	// A path that fails names the keys as they are written.
	_, diags = spec.Parse("d.yaml", dotted, spec.Options{Catalog: stages.Default(), LookupEnv: noEnv, Set: []string{`stages.m.set.x\.y.z=1`}})
	if got := diagText(diags); !strings.Contains(got, `stages.m.set.x\.y is not a mapping or list`) {
		t.Errorf("dotted key, a level too deep: %s", got)
	}
	// An empty value is refused, not read as null: "--set seed=${SEED}"
	// with SEED unset in a CI matrix made a pinned seed random, quietly;
	// so is a value of only a comment or a document marker.
	for _, set := range []string{"seed= ", "seed=\t", "seed=#x", "seed=---"} {
		_, diags = spec.Load("testdata/valid/interp.yaml", spec.Options{Catalog: stages.Default(), LookupEnv: noEnv, Set: []string{set}})
		if got := diagText(diags); !strings.Contains(got, `(--set `+set+`): no value after "=": write seed=null to remove the setting, or seed='""' for an empty string`) {
			t.Errorf("empty override %q: %s", set, got)
		}
	}
	// null removes a key, as written.
	if sp, diags := spec.Load("testdata/valid/interp.yaml", spec.Options{Catalog: stages.Default(), LookupEnv: noEnv, Set: []string{"seed=null"}}); diags.HasErrors() || sp.Seed != nil {
		t.Errorf("seed=null: %v", diags)
	}
	// An index past the end says how many there are; no name is guessed
	// for a number (stages.9 was asked "did you mean \"m\"?").
	_, diags = spec.Load("testdata/valid/interp.yaml", spec.Options{Catalog: stages.Default(), LookupEnv: noEnv, Set: []string{"stages.9.count=1"}})
	if got := diagText(diags); !strings.Contains(got, `(--set stages.9.count=1): no element 9 in stages, which has 3 (0 to 2, or their names: src, m, out)`) {
		t.Errorf("bad override: %s", got)
	}
	// One element is one: "0", not "0 to 0".
	_, diags = spec.Parse("one.yaml", []byte("version: 1\nname: o\nstages:\n  - {name: f, type: files, patterns: ['*.x']}\n  - {name: o, type: discard}\n"),
		spec.Options{Catalog: stages.Default(), LookupEnv: noEnv, Set: []string{"stages.f.patterns.3=y"}})
	if got := diagText(diags); !strings.Contains(got, `(--set stages.f.patterns.3=y): no element 3 in stages.f.patterns, which has 1 (0)`) {
		t.Errorf("bad override: %s", got)
	}
	// A near miss is named.
	_, diags = spec.Load("testdata/valid/interp.yaml", spec.Options{Catalog: stages.Default(), LookupEnv: noEnv, Set: []string{"stages.srx.count=1"}})
	if got := diagText(diags); !strings.Contains(got, `(--set stages.srx.count=1): no element "srx" in stages (did you mean "src"?)`) {
		t.Errorf("bad override: %s", got)
	}
	// A bad value given with --set is reported as the override's, not at
	// line 1 of the file (found by the tester).
	_, diags = spec.Load("testdata/valid/interp.yaml", spec.Options{Catalog: stages.Default(), LookupEnv: noEnv,
		Set: []string{"seed=2", "resources.memory=abc", "nope=1"}})
	want := []string{
		`testdata/valid/interp.yaml (--set resources.memory=abc): resources.memory: invalid byte size "abc" (want e.g. 512MiB, 2GiB, 1000000)`,
		`testdata/valid/interp.yaml (--set nope=1): nope: unknown field "nope" (did you mean "name"?)`,
	}
	if got := diagText(diags); got != strings.Join(want, "\n")+"\n" {
		t.Errorf("override positions:\n%s\nwant\n%s", got, strings.Join(want, "\n"))
	}
	// An override replaces a value whose variable is unset: that is no
	// problem, and the override's own is reported (the
	// unset variable hid it, and was reported although replaced).
	dir := t.TempDir()
	file := filepath.Join(dir, "s.yaml")
	if err := os.WriteFile(file, []byte("version: 1\nname: s\nstages:\n  - {name: r, type: range, count: \"${PIPERUN_TEST_UNSET_VAR}\"}\n  - {name: out, type: discard}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, diags = spec.Load(file, spec.Options{Catalog: stages.Default(), LookupEnv: noEnv, Set: []string{"stages.r.count=2.5"}})
	if got, want := diagText(diags), file+" (--set stages.r.count=2.5): stages[0].count: expected an integer, got number 2.5\n"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	if _, diags = spec.Load(file, spec.Options{Catalog: stages.Default(), LookupEnv: noEnv, Set: []string{"stages.r.count=3"}}); diags.HasErrors() {
		t.Errorf("with the count set: %v", diags)
	}
}

func TestExpand(t *testing.T) {
	env := map[string]string{"A": "x", "EMPTY": ""}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	tests := []struct{ in, want, err string }{
		{"plain", "plain", ""},
		{"${A}/b", "x/b", ""},
		{"${B:-def}", "def", ""},
		{"${EMPTY:-def}", "def", ""},
		// Set but empty, no default: an empty value would be null, absent,
		// so MEM= would silently drop memory: ${MEM} to the default.
		{"${EMPTY}", "", "environment variable EMPTY is set but empty, which leaves the value empty (write ${EMPTY:-} to leave the key at its default, or ${EMPTY:-VALUE})"},
		{"${EMPTY}/b", "/b", ""},
		{"${EMPTY:-}", "", ""},
		{"$${A}", "${A}", ""},
		{"${A}${A}", "xx", ""},
		{"${B}", "", "environment variable B is not set (write ${B:-default} to give a default)"},
		// Every unset variable of a value at once, each named once.
		{"${B}/${B}-${C}", "", "environment variables B, C are not set (write ${B:-default} to give a default)"},
		{"${A", "", `unterminated ${ in "${A"`},
		{"${}", "", "empty variable name in ${}"},
		// A shell's check: the message where the variable is unset or
		// empty (it read a variable "X:?must set").
		{"${A:?say}", "x", ""},
		{"${B:?must set B}", "", "environment variable B is not set or empty: must set B"},
		{"${EMPTY:?}", "", "environment variable EMPTY is not set or empty: it must be set"},
		{"${B:?set B:-x or go}", "", "environment variable B is not set or empty: set B:-x or go"},
		{"${X:+a}", "", "${X:+a} is not a form piperun expands: write ${VAR}, ${VAR:-default} or ${VAR:?message}, VAR being letters, digits and _ (not starting with a digit)"},
		{"${X-d}", "", "${X-d} is not a form piperun expands: write ${VAR}, ${VAR:-default} or ${VAR:?message}, VAR being letters, digits and _ (not starting with a digit)"},
		{"${1X}", "", "${1X} is not a form piperun expands: write ${VAR}, ${VAR:-default} or ${VAR:?message}, VAR being letters, digits and _ (not starting with a digit)"},
		// It gave the literal "${Y:-n}".
		{"${X:-${Y:-n}}", "", "${X:-${Y:-n}}: a default cannot hold another variable (piperun does not nest them)"},
		// It made a folder named "$PWD".
		{"${OUT:-$PWD/o.jsonl}", "", "${OUT:-$PWD/o.jsonl}: the default holds $PWD, which piperun does not expand (it expands ${VAR} forms, and none inside a default): write the value out"},
		{"${OUT:-cost$5}", "cost$5", ""},
		{"${A:-$PWD/o.jsonl}", "x", ""}, // set: the default is not read
		{`${W:-"a" in $env}`, `"a" in $env`, ""},
	}
	for _, tc := range tests {
		got, err := spec.Expand(tc.in, lookup)
		if tc.err != "" {
			if err == nil || err.Error() != tc.err {
				t.Errorf("Expand(%q) error = %v, want %q", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("Expand(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
}

func TestByteSize(t *testing.T) {
	bad := func(s string) string { return fmt.Sprintf("invalid byte size %q (want e.g. 512MiB, 2GiB, 1000000)", s) }
	whole := func(s string) string { return fmt.Sprintf("byte size %q is not a whole number of bytes", s) }
	tests := []struct {
		in   string
		want spec.ByteSize
		err  string
	}{
		{"512MiB", 512 << 20, ""}, {"2GiB", 2 << 30, ""}, {"1.5GB", 1500000000, ""},
		{"1000", 1000, ""}, {"64 KiB", 64 << 10, ""}, {"1G", 1 << 30, ""},
		{"lots", 0, bad("lots")}, {"-1MiB", 0, bad("-1MiB")}, {"", 0, bad("")},
		// docker's --memory takes lowercase units.
		{"2g", 2 << 30, ""}, {"512m", 512 << 20, ""}, {"64k", 64 << 10, ""}, {"100b", 100, ""}, {"1e9", 1e9, ""}, {".5G", 1 << 29, ""},
		// What the schema's pattern refuses, so is refused here.
		{"1.2.3GiB", 0, bad("1.2.3GiB")}, {".", 0, bad(".")}, {"..MiB", 0, bad("..MiB")}, {"0x10", 0, bad("0x10")}, {"Inf", 0, bad("Inf")}, {"2gib", 0, bad("2gib")},
		{"2.5", 0, whole("2.5")}, {"2.5B", 0, whole("2.5B")}, {"1.4GiB", 1503238553, ""}, {"1e3", 1000, ""},
	}
	for _, tc := range tests {
		got, err := spec.ParseByteSize(tc.in)
		msg := ""
		if err != nil {
			msg = err.Error()
		}
		if msg != tc.err || got != tc.want {
			t.Errorf("ParseByteSize(%q) = %d, %q; want %d, %q", tc.in, got, msg, tc.want, tc.err)
		}
	}
	if s := spec.ByteSize(3 << 29).String(); s != "1.5GiB" {
		t.Errorf("String = %s", s)
	}
}

func TestDuration(t *testing.T) {
	tests := []struct {
		in   string
		want time.Duration
		err  string
	}{
		{"90s", 90 * time.Second, ""}, {"10m", 10 * time.Minute, ""}, {"1h30m", 90 * time.Minute, ""},
		{" 250ms ", 250 * time.Millisecond, ""}, {"1.5h", 90 * time.Minute, ""}, {".5s", 500 * time.Millisecond, ""},
		{"0", 0, `invalid duration "0" (want e.g. 90s, 10m, 1h30m)`},
		{"0s", 0, `duration "0s" must be more than 0`},
		{"-1m", 0, `invalid duration "-1m" (want e.g. 90s, 10m, 1h30m)`},
		{"+1m", 0, `invalid duration "+1m" (want e.g. 90s, 10m, 1h30m)`},
		{"10", 0, `invalid duration "10" (want e.g. 90s, 10m, 1h30m)`},
		{"1d", 0, `invalid duration "1d" (want e.g. 90s, 10m, 1h30m)`},
		{"", 0, `invalid duration "" (want e.g. 90s, 10m, 1h30m)`},
	}
	for _, tc := range tests {
		got, err := spec.ParseDuration(tc.in)
		if tc.err != "" {
			if err == nil || err.Error() != tc.err {
				t.Errorf("ParseDuration(%q) = %v, %v; want error %q", tc.in, got, err, tc.err)
			}
			continue
		}
		if err != nil || time.Duration(got) != tc.want {
			t.Errorf("ParseDuration(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
}

func TestApplySetOnNode(t *testing.T) {
	var n yaml.Node
	if err := yaml.Unmarshal([]byte("a: {b: 1}\nl: [x, y]\n"), &n); err != nil {
		t.Fatal(err)
	}
	doc := n.Content[0]
	for _, s := range []string{"a.b=2", "a.c=[1, 2]", "l.1=z"} {
		if err := spec.ApplySet(doc, s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
	out, _ := yaml.Marshal(doc)
	want := "a: {b: 2, c: [1, 2]}\nl: [x, z]\n"
	if string(out) != want {
		t.Errorf("got\n%s\nwant\n%s", out, want)
	}
	if err := spec.ApplySet(doc, "novalue"); err == nil {
		t.Error("missing = accepted")
	}
	if err := spec.ApplySet(doc, "a.b.c=1"); err == nil {
		t.Error("path through a scalar accepted")
	}
	// A stage named with digits is found by its name before its index.
	if err := yaml.Unmarshal([]byte("stages: [{name: '3', n: 0}, {name: b, n: 0}, {name: c, n: 0}, {name: d, n: 0}]\n"), &n); err != nil {
		t.Fatal(err)
	}
	doc = n.Content[0]
	for _, s := range []string{"stages.3.n=1", "stages.1.n=2"} {
		if err := spec.ApplySet(doc, s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
	out, _ = yaml.Marshal(doc)
	want = "stages: [{name: '3', n: 1}, {name: b, n: 2}, {name: c, n: 0}, {name: d, n: 0}]\n"
	if string(out) != want {
		t.Errorf("got\n%s\nwant\n%s", out, want)
	}
}

// TestConcatOfOneSourceWarns: concat reads its inputs one after the other,
// so inputs fed by one stage stop the run once the second one's queue is
// full; validate says so, naming the stages, at the inputs key.
func TestConcatOfOneSourceWarns(t *testing.T) {
	const src = `version: 1
name: concat-shared
stages:
  - {name: src, type: range, count: 1000}
  - {name: a, type: map, input: src, set: {x: 'index'}}
  - {name: b, type: map, input: src, set: {x: 'index + 1000'}}
  - {name: c, type: concat, inputs: [a, b]}
  - {name: out, type: discard, input: c}
  - {name: own, type: range, count: 5}
  - {name: ownx, type: map, input: own, set: {x: 'index'}}
  - {name: d, type: concat, inputs: [ownx, a]}
  - {name: out2, type: discard, input: d}
`
	_, diags := spec.Parse("concat.yaml", []byte(src), spec.Options{Catalog: stages.Default()})
	if diags.HasErrors() {
		t.Fatalf("errors: %v", diags)
	}
	want := `concat.yaml:7:37: warning: stages[3].inputs: inputs "a" and "b" both read from stage "src", and concat reads "a" to its end before it reads "b": unless an epoch of "a" fits in the queue to "b" (a few chunks of samples), the run stops. Use mix or zip, or give each input its own source`
	wantOnlyDiag(t, diags, want)
	_, diags = spec.Parse("twice.yaml", []byte(`version: 1
name: concat-twice
stages:
  - {name: r, type: range, count: 1000}
  - {name: c, type: concat, inputs: [r, r]}
  - {name: out, type: discard}
`), spec.Options{Catalog: stages.Default()})
	want = `twice.yaml:5:37: warning: stages[1].inputs: inputs name "r" twice, and concat reads it to its end before it reads it again: unless an epoch of "r" fits in the queue to the second input (a few chunks of samples), the run stops. To see every sample twice, use a second source stage, or epochs`
	wantOnlyDiag(t, diags, want)
	// Two maps of one map of the source: the stage they share is the map.
	_, diags = spec.Parse("near.yaml", []byte(`version: 1
name: concat-near
stages:
  - {name: r, type: range, count: 1000}
  - {name: big, type: map, set: {x: 'index'}}
  - {name: m1, type: map, input: big, set: {y: 'x'}}
  - {name: m2, type: map, input: big, set: {y: 'x + 1'}}
  - {name: c, type: concat, inputs: [m1, m2]}
  - {name: out, type: discard}
`), spec.Options{Catalog: stages.Default()})
	if len(diags) != 1 || !strings.Contains(diags[0].String(), `inputs "m1" and "m2" both read from stage "big"`) {
		t.Fatalf("diagnostics:\n%v\nwant the nearest shared stage, big", diags)
	}
}

// TestMixOfOneSourceWarns: a mix draws its inputs at random, so of two
// branches of one stage one runs ahead of the other by a random walk's
// reach, and the run stalls once that passes the queue between them (a
// re-test: 2 runs of 3 at 50000 samples). validate said nothing, where it
// warns of the same shape for concat and zip.
func TestMixOfOneSourceWarns(t *testing.T) {
	_, diags := spec.Parse("mix.yaml", []byte(`version: 1
name: mix-shared
seed: 1
stages:
  - {name: src, type: range, count: 50000}
  - {name: m1, type: map, input: src, set: {x: 'index'}}
  - {name: m2, type: map, input: src, set: {x: 'index + 1'}}
  - {name: z, type: mix, inputs: [m1, m2]}
  - {name: out, type: discard}
`), spec.Options{Catalog: stages.Default()})
	want := `mix.yaml:8:34: warning: stages[3].inputs: inputs "m1" and "m2" both read from stage "src", and mix draws them at random: one branch runs ahead of the other, by more the longer the epoch, and once that passes the queue between them (a few chunks of samples) the run stops. Give each input its own source, or use zip`
	wantOnlyDiag(t, diags, want)
	// One input named twice ("inputs a and a both read from
	// stage a").
	_, diags = spec.Parse("twice.yaml", []byte(`version: 1
name: mix-twice
seed: 1
stages:
  - {name: a, type: range, count: 50000}
  - {name: z, type: mix, inputs: [a, a]}
  - {name: out, type: discard}
`), spec.Options{Catalog: stages.Default()})
	wantOnlyDiag(t, diags, `twice.yaml:6:34: warning: stages[1].inputs: inputs name "a" twice, and mix draws them at random: one runs ahead of the other, by more the longer the epoch, and once that passes the queue between them (a few chunks of samples) the run stops. To draw each sample twice, use a second source stage`)
}

// TestOneDiagnosticPerProblem: a config field the decoder reports, missing
// or of the wrong type, is not reported again by the stage's own check of
// the zero value it is left with; a bad value that decodes still is.
func TestOneDiagnosticPerProblem(t *testing.T) {
	for _, tc := range []struct{ stage, want string }{
		{`{name: s, type: shuffle}`, `d.yaml:5:5: stages[1]: missing required field "buffer"` + "\n"},
		{`{name: s, type: shuffle, buffer: ten}`, `d.yaml:5:38: stages[1].buffer: expected an integer, got string "ten"` + "\n"},
		{`{name: s, type: shuffle, buffer: 0}`, `d.yaml:5:38: stages[1].buffer: must be at least 1, got 0` + "\n"},
		{`{name: s, type: batch}`, `d.yaml:5:5: stages[1]: missing required field "size"` + "\n"},
		{`{name: s, type: batch, size: [1]}`, `d.yaml:5:34: stages[1].size: expected an integer, got a list` + "\n"},
		// A repeated key is no undecoded value: the first one's problem
		// is reported too.
		{`{name: s, type: shuffle, buffer: 0, buffer: 2}`, `d.yaml:5:38: stages[1].buffer: must be at least 1, got 0` + "\n" +
			`d.yaml:5:41: stages[1].buffer: duplicate key "buffer"` + "\n"},
		// A required number left empty is no 0 (count: made an
		// empty range).
		{`{name: s, type: shuffle, buffer: }`, `d.yaml:5:38: stages[1].buffer: required field "buffer" has no value` + "\n"},
	} {
		src := "version: 1\nname: d\nstages:\n  - {name: src, type: range, count: 10}\n  - " + tc.stage + "\n  - {name: out, type: discard}\n"
		_, diags := spec.Parse("d.yaml", []byte(src), spec.Options{Catalog: stages.Default(), LookupEnv: noEnv})
		if got := diagText(diags); got != tc.want {
			t.Errorf("%s:\ngot\n%swant\n%s", tc.stage, got, tc.want)
		}
	}
}

// TestEmptyInterpolationIsAbsent: a value that expands to nothing is
// null, absent like an unset key: an absent seed is random, an absent
// string is empty and the stage judges it (a path must not be empty).
func TestEmptyInterpolationIsAbsent(t *testing.T) {
	_, diags := spec.Parse("s.yaml", []byte("version: 1\nname: e\nseed: ${SEED:-}\nstages:\n  - {name: src, type: range, count: 1}\n  - name: out\n    type: write_jsonl\n    path: ${OUT:-}\n"),
		spec.Options{Catalog: stages.Default(), LookupEnv: noEnv})
	if got, want := diagText(diags), "s.yaml:8:11: stages[1].path: must not be empty\n"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

// TestQuotedVariables: a quoted value that is one variable alone is read as
// the variable's value written plain, since inside a flow mapping YAML
// needs the quotes around `${`; a quoted value with more around the
// variable stays a string.
func TestQuotedVariables(t *testing.T) {
	env := map[string]string{"RANK": "1", "WORLD": "3", "BUF": "8", "NAME": "007"}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	for _, tc := range []struct{ stages, want string }{
		{`{name: f, type: files, pattern: '*.jsonl', shard: {index: "${RANK}", count: '${WORLD:-1}'}}
  - {name: j, type: jsonl}
  - {name: s, type: shuffle, buffer: "${BUF}"}`, ""},
		{`{name: src, type: range, count: "${BUF}0"}
  - {name: s, type: shuffle, buffer: "${BUF}"}`, `q.yaml:4:37: stages[0].count: expected an integer, got string "80"` + "\n"},
		// A string field keeps the text as written by the variable.
		{`{name: src, type: range, count: 3}
  - {name: m, type: map, set: {n: "'${NAME}'"}}`, ""},
		// Empty, it is absent like an unset key: a required one is missing.
		{`{name: src, type: range, count: 3}
  - {name: s, type: shuffle, buffer: "${EMPTY:-}"}`, `q.yaml:5:38: stages[1].buffer: required field "buffer" has no value` + "\n"},
		// In block style the plain form parses, so quotes ask for a
		// string, as YAML has them.
		{`name: src
    type: range
    count: "${BUF}"`, `q.yaml:6:12: stages[0].count: expected an integer, got string "8"` + "\n"},
		{`{name: src, type: range, count: 3}
  - name: m
    type: map
    set: {n: "'x'"}
    keep:
      - "${NAME}"`, `q.yaml:9:9: stages[1].keep[0]: unknown field "007" (fields here: index, n)` + "\n"},
	} {
		src := "version: 1\nname: q\nstages:\n  - " + tc.stages + "\n  - {name: out, type: discard}\n"
		sp, diags := spec.Parse("q.yaml", []byte(src), spec.Options{Catalog: stages.Default(), LookupEnv: lookup})
		if got := diagText(diags.Errors()); got != tc.want {
			t.Errorf("%s:\ngot\n%swant\n%s", tc.stages, got, tc.want)
			continue
		}
		if tc.want != "" {
			continue
		}
		if s := sp.Stage("s"); s != nil && s.Config.(*stages.ShuffleConfig).Buffer != 8 {
			t.Errorf("buffer = %d, want 8", s.Config.(*stages.ShuffleConfig).Buffer)
		}
		if f := sp.Stage("f"); f != nil {
			sh := f.Config.(*stages.FilesConfig).Shard
			if sh.Index != 1 || sh.Count != 3 {
				t.Errorf("shard = %+v, want index 1 of 3", sh)
			}
		}
		if m := sp.Stage("m"); m != nil {
			mc := m.Config.(*stages.MapConfig)
			if got, _ := mc.Set.Get("n"); got != "'007'" {
				t.Errorf("set n = %q, want '007'", got)
			}
		}
	}
}

// TestLoadBoundsWhatItReads: a file larger than any spec is refused
// without reading it all (`validate /dev/zero` ran out of memory), and a
// folder is named as one.
func TestLoadBoundsWhatItReads(t *testing.T) {
	dir := t.TempDir()
	big := filepath.Join(dir, "big.yaml")
	if err := os.WriteFile(big, make([]byte, spec.MaxSpecBytes+1), 0o644); err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]string{
		big: big + ": cannot read spec: " + big + " is larger than 16MiB, more than a spec can be",
		dir: dir + ": cannot read spec: " + dir + " is a folder",
	} {
		_, diags := spec.Load(path, spec.Options{})
		if len(diags) != 1 || diags[0].String() != want {
			t.Errorf("Load(%s) = %v\nwant %s", path, diags, want)
		}
	}
}

// TestMergeKeys: YAML merge keys share settings between stages, from
// anchors under x- keys; a stage's own key wins over a merged one, an
// earlier merge over a later, and an override changes only the stage it
// names (the merged pairs are copies).
func TestMergeKeys(t *testing.T) {
	sp, diags := spec.Load("testdata/valid/merge.yaml", spec.Options{Catalog: stages.Default(), LookupEnv: noEnv, Set: []string{"stages.m.parallelism=1"}})
	if diags.HasErrors() || len(diags) != 0 {
		t.Fatalf("diagnostics:\n%s", diagText(diags))
	}
	for _, tc := range []struct {
		name    string
		par     string
		onError string
	}{{"m", "1", "skip"}, {"m2", "2", "skip"}, {"m3", "3", "fail"}} {
		st := sp.Stage(tc.name)
		if st == nil || st.Type != "map" || fmt.Sprint(st.Parallelism) != tc.par || st.OnError != tc.onError {
			t.Errorf("stage %s: %+v; want a map, parallelism %s, on_error %s", tc.name, st, tc.par, tc.onError)
		}
	}
	// An override of an anchor would change nothing: refused.
	if _, diags := spec.Load("testdata/valid/merge.yaml", spec.Options{Catalog: stages.Default(), LookupEnv: noEnv, Set: []string{"x-defaults.parallelism=1"}}); !strings.Contains(diagText(diags), "x-defaults holds anchors that stages merge, and the merges are made before overrides: set the stage's own key (stages.NAME.KEY)") {
		t.Errorf("--set of an anchor: %s", diagText(diags))
	}
	if got := sp.PosOf("stages[2].type"); got.Line != 4 {
		t.Errorf("m2's merged type is placed at %v; want line 4, where the anchor writes it", got)
	}
}

// TestDiagnosticIsOneLine: a message holding a line break (a ${VAR:?...}
// message written in a double-quoted string) prints on one line, so that
// line-based problem matchers in CI read one problem as one.
func TestDiagnosticIsOneLine(t *testing.T) {
	_, diags := spec.Parse("nl.yaml", []byte("version: 1\nname: nl\nstages:\n  - {name: src, type: range, count: \"${COUNT:?set COUNT\\r\\nplease}\"}\n  - {name: out, type: discard}\n"),
		spec.Options{Catalog: stages.Default(), LookupEnv: noEnv})
	wantOnlyDiag(t, diags, `nl.yaml:4:37: stages[0].count: environment variable COUNT is not set or empty: set COUNT\r\nplease`)
	if m := diags[0].Message; m != "environment variable COUNT is not set or empty: set COUNT\r\nplease" {
		t.Errorf("the message itself was changed: %q", m)
	}
	// A break in a --set, which the position quotes, too.
	_, diags = spec.Parse("nl.yaml", []byte("version: 1\nname: nl\nstages:\n  - {name: src, type: range, count: 1}\n  - {name: out, type: discard}\n"),
		spec.Options{Catalog: stages.Default(), LookupEnv: noEnv, Set: []string{"seed=\n"}})
	wantOnlyDiag(t, diags, `nl.yaml (--set seed=\n): no value after "=": write seed=null to remove the setting, or seed='""' for an empty string`)
}
