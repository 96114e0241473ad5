package cli_test

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestApplySummaryAndReportMode: the summary counts "1 sample in 1
// batch", not "1 samples in 1 batches", and the --report file, written aside and renamed, is an
// ordinary 0644 file rather than CreateTemp's 0600.
func TestApplySummaryAndReportMode(t *testing.T) {
	for _, tc := range []struct {
		count int
		want  string
	}{
		{1, "out: 1 sample in 1 batch; "},
		{4, "out: 4 samples in 1 batch; "},
		{10, "out: 10 samples in 3 batches; "},
	} {
		dir := t.TempDir()
		p := writeSpec(t, dir, "s.yaml", fmt.Sprintf(`version: 1
name: s
resources:
  memory: 16MiB
stages:
  - {name: src, type: range, count: %d}
  - {name: batch, type: batch, size: 4}
  - {name: out, type: discard}
`, tc.count))
		report := filepath.Join(dir, "report.json")
		r := run(t, "apply", "--progress", "never", "--report", report, p)
		if r.code != 0 {
			t.Fatalf("count %d: %s", tc.count, r)
		}
		line := regexp.MustCompile(`(?m)^done in [0-9.]+s; (.*)peak memory`).FindStringSubmatch(r.stderr)
		if line == nil || line[1] != tc.want {
			t.Errorf("count %d: summary %q, want %q\n%s", tc.count, line, tc.want, r.stderr)
		}
		st, err := os.Stat(report)
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode() != 0o644 {
			t.Errorf("count %d: report mode %v, want -rw-r--r--", tc.count, st.Mode())
		}
		assertFiles(t, dir, "report.json", "s.yaml")
	}
}

// TestFeatureErrorsInPlainWords: a value write_tfrecord cannot write is
// named as the spec's author knows it (it said "list element []interface
// {}").
func TestFeatureErrorsInPlainWords(t *testing.T) {
	for _, tc := range []struct{ expr, want string }{
		{`[[1, 2], [3]]`, `a list in a list cannot be written as a feature: a feature is one flat list of int64s, floats or bytes`},
		{`[1, "a"]`, `a list of numbers and strings cannot be written as a feature (element 0 is a number, element 1 a string): a feature is one flat list of int64s, floats or bytes`},
	} {
		dir := t.TempDir()
		spec := writeSpec(t, dir, "f.yaml", `
version: 1
name: words
stages:
  - {name: src, type: range, count: 2}
  - {name: m, type: map, set: {y: '`+tc.expr+`'}}
  - {name: out, type: write_tfrecord, path: out.tfrecord}
`)
		r := run(t, "apply", "--progress", "never", spec)
		if r.code != 1 || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("%s: %s\nwant exit 1 and %q", tc.expr, r, tc.want)
		}
	}
}

// TestMixZeroWeightWarns: an input of weight 0 is never read; validate
// says so rather than leave the user to find it missing from the output.
func TestMixZeroWeightWarns(t *testing.T) {
	spec := writeSpec(t, t.TempDir(), "m.yaml", `
version: 1
name: m
stages:
  - {name: a, type: range, count: 3}
  - {name: b, type: range, count: 3}
  - {name: mx, type: mix, inputs: [a, b], weights: [1, 0]}
  - {name: out, type: discard}
`)
	r := run(t, "validate", spec)
	if want := `warning: stages[2].weights[1]: is 0: input "b" is never read`; r.code != 0 || !strings.Contains(r.stdout, want) {
		t.Errorf("%s\nwant exit 0 and %q", r, want)
	}
}

// TestCacheBelowRandomWithoutSeedWarns: with no seed, a disk cache below a
// random stage is keyed by a new seed every run and never read again;
// validate says so, and says nothing once a seed is set.
func TestCacheBelowRandomWithoutSeedWarns(t *testing.T) {
	spec := writeSpec(t, t.TempDir(), "c.yaml", `
version: 1
name: c
stages:
  - {name: a, type: range, count: 3}
  - {name: b, type: range, count: 3}
  - {name: m, type: mix, inputs: [a, b]}
  - {name: c, type: cache, dir: cdir}
  - {name: out, type: discard}
`)
	want := `stage "m" above this cache is random and the spec sets no seed`
	if r := run(t, "validate", spec); r.code != 0 || !strings.Contains(r.stdout, want) {
		t.Errorf("%s\nwant exit 0 and %q", r, want)
	}
	if r := run(t, "validate", "--set", "seed=1", spec); r.code != 0 || strings.Contains(r.stdout, want) {
		t.Errorf("with a seed: %s", r)
	}
}

// TestZipOfDivergingBranchesWarns: zip(a, filter(a)) pairs different
// samples of a and stalls once a branch is a queue ahead; validate warns,
// naming the stage in between, and stays quiet where both branches keep
// positions (a map, a skip) or pass through the same filter (found in the
// last session's review of what validate lets through).
func TestZipOfDivergingBranchesWarns(t *testing.T) {
	for _, tc := range []struct{ name, stages, want string }{
		{"filter", `
  - {name: r, type: range, count: 10}
  - {name: f, type: filter, input: r, where: 'index % 2 == 0'}
  - {name: m, type: map, input: f, set: {j: index}, keep: [j]}
  - {name: z, type: zip, inputs: [r, m]}`,
			`warning: stages[3].inputs: inputs "r" and "m" both read stage "r", and only "m" passes through filter "f": zip pairs by position, so a pair holds two different samples of "r", and the run stalls once one branch is a queue ahead of the other`},
		{"shuffle on the first input", `
  - {name: r, type: range, count: 10}
  - {name: s, type: shuffle, input: r, buffer: 4}
  - {name: m, type: map, input: r, set: {j: index}, keep: [j]}
  - {name: z, type: zip, inputs: [s, m]}`,
			`warning: stages[3].inputs: inputs "s" and "m" both read stage "r", and only "s" passes through shuffle "s"`},
		{"names the stage both read, not its source", `
  - {name: r, type: range, count: 10}
  - {name: big, type: map, input: r, set: {j: index}}
  - {name: f, type: filter, input: big, where: 'index % 2 == 0'}
  - {name: m, type: map, input: f, set: {k: index}, keep: [k]}
  - {name: z, type: zip, inputs: [big, m]}`,
			`warning: stages[4].inputs: inputs "big" and "m" both read stage "big", and only "m" passes through filter "f"`},
		{"map keeps positions", `
  - {name: r, type: range, count: 10}
  - {name: m, type: map, input: r, set: {j: index}, keep: [j]}
  - {name: z, type: zip, inputs: [r, m]}`, ""},
		{"skip pairs neighbours", `
  - {name: r, type: range, count: 10}
  - {name: s, type: skip, input: r, count: 1}
  - {name: m, type: map, input: s, set: {j: index}, keep: [j]}
  - {name: z, type: zip, inputs: [r, m]}`, ""},
		{"one filter above both", `
  - {name: r, type: range, count: 10}
  - {name: f, type: filter, input: r, where: 'index % 2 == 0'}
  - {name: m, type: map, input: f, set: {j: index}, keep: [j]}
  - {name: z, type: zip, inputs: [f, m]}`, ""},
		{"separate sources", `
  - {name: a, type: range, count: 10}
  - {name: b, type: range, count: 10}
  - {name: f, type: filter, input: b, where: 'index % 2 == 0'}
  - {name: m, type: map, input: f, set: {j: index}, keep: [j]}
  - {name: z, type: zip, inputs: [a, m]}`, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spec := writeSpec(t, t.TempDir(), "z.yaml", "version: 1\nname: z\nstages:"+tc.stages+"\n  - {name: out, type: discard}\n")
			r := run(t, "validate", spec)
			switch {
			case r.code != 0:
				t.Errorf("%s\nwant exit 0", r)
			case tc.want == "" && strings.Contains(r.stdout, "warning"):
				t.Errorf("%s\nwant no warning", r)
			case tc.want != "" && !strings.Contains(r.stdout, tc.want):
				t.Errorf("%s\nwant %q", r, tc.want)
			}
		})
	}
}

// TestFromDirInValidateAndApply: labels: from_dir is ImageFolder's
// convention, the class being the folder directly below the pattern's
// root, so x/images/1.jpg and y/images/1.jpg under data/**/*.jpg are
// classes x and y (they were one class "images", with a warning: a
// new-user test found torchvision sees two). What it cannot label is said
// by validate and by apply, which runs validate's checks first: a file
// beside the class folders is left out with a warning, and a class folder
// with no file matched, or files with no class folder, stop both (a
// later new-user test ran apply alone). stages/files_labels_test.go has
// the cases against torchvision.
func TestFromDirInValidateAndApply(t *testing.T) {
	dir := t.TempDir()
	for _, f := range []string{"data/x/images/1.jpg", "data/y/images/1.jpg", "beside/a/1.jpg", "beside/b/1.jpg", "beside/NOTES.txt",
		"empty/a/1.jpg", "empty/b/", "flat/1.jpg", "flat/2.jpg"} {
		p := filepath.Join(dir, f)
		if strings.HasSuffix(f, "/") {
			if err := os.MkdirAll(p, 0o755); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		pattern string
		code    int
		want    string // in validate's output and apply's stderr
		labels  string // what apply writes
	}{
		{"data/**/*.jpg", 0, "", `{"class_name":"x","label":0}` + "\n" + `{"class_name":"y","label":1}` + "\n"},
		{"beside/**", 0, `warning: stages[0].labels: 1 file (` + filepath.Join(dir, "beside", "NOTES.txt") + `) that pattern "beside/**" matches sits directly in ` + filepath.Join(dir, "beside") + `, the folder it starts from, outside the class folders: labels: from_dir leaves it out`,
			`{"class_name":"a","label":0}` + "\n" + `{"class_name":"b","label":1}` + "\n"},
		{"empty/*/*.jpg", 3, `stages[0].labels: class folder b in ` + filepath.Join(dir, "empty") + ` holds no file that pattern "empty/*/*.jpg" matches`, ""},
		{"flat/*.jpg", 3, `stages[0].labels: every file pattern "flat/*.jpg" matches sits directly in ` + filepath.Join(dir, "flat"), ""},
	} {
		out := filepath.Join(dir, "out.jsonl")
		os.Remove(out)
		spec := writeSpec(t, dir, "l.yaml", `version: 1
name: l
stages:
  - {name: f, type: files, pattern: '`+tc.pattern+`', labels: from_dir}
  - {name: m, type: map, keep: [label, class_name]}
  - {name: out, type: write_jsonl, path: out.jsonl}
`)
		r := run(t, "validate", spec)
		switch {
		case tc.code == 0 && r.code != 0, tc.code != 0 && r.code == 0:
			t.Errorf("validate %s: %s\nwant exit %d", tc.pattern, r, tc.code)
		case tc.want == "" && strings.Contains(r.stdout+r.stderr, "warning"):
			t.Errorf("validate %s: %s\nwant no warning", tc.pattern, r)
		case tc.want != "" && !strings.Contains(r.stdout+r.stderr, tc.want):
			t.Errorf("validate %s: %s\nwant %q", tc.pattern, r, tc.want)
		}
		r = run(t, "apply", "--progress", "never", spec)
		switch {
		case r.code != tc.code:
			t.Errorf("apply %s: %s\nwant exit %d", tc.pattern, r, tc.code)
		case tc.want == "" && strings.Contains(r.stderr, "warning"):
			t.Errorf("apply %s: %s\nwant no warning", tc.pattern, r)
		case tc.want != "" && !strings.Contains(r.stderr, tc.want):
			t.Errorf("apply %s: %s\nwant %q", tc.pattern, r, tc.want)
		}
		got, _ := os.ReadFile(out)
		if string(got) != tc.labels {
			t.Errorf("apply %s wrote %q, want %q", tc.pattern, got, tc.labels)
		}
	}
}
