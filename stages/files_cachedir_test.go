package stages

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/piperun/piperun/spec"
)

// TestFilesWouldReadACache: a files pattern that would match the files a
// cache keeps below its dir is refused; the first run passed, and the
// next read Badger's tables as JSON lines (with on_error: skip, every one
// skipped and counted, exit 0).
func TestFilesWouldReadACache(t *testing.T) {
	dir := t.TempDir()
	for _, f := range []string{"data/a.jsonl", "data/x/y/z/a.jsonl"} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, f)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), []byte("{\"x\": 1}\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct{ pattern, cacheDir, want string }{
		{"data/**", "data/cache", `stages[0].pattern: pattern "data/**" would match the files that stage "c" keeps in its folder DIR/data/cache (FINGERPRINT/manifest.json and Badger's tables): the next run would read the cache as input; put the cache's dir outside what the pattern matches`},
		{"data/*/*/*/*", "data/cache", `stages[0].pattern: pattern "data/*/*/*/*" would match the files that stage "c" keeps in its folder DIR/data/cache (FINGERPRINT/manifest.json and Badger's tables): the next run would read the cache as input; put the cache's dir outside what the pattern matches`},
		{"data/*.jsonl", "data/cache", ""},
		{"data/**", "cache", ""},
	} {
		src := "version: 1\nname: c\nstages:\n  - {name: f, type: files, pattern: '" + tc.pattern + "'}\n  - {name: j, type: jsonl}\n  - {name: c, type: cache, dir: " + tc.cacheDir + "}\n  - {name: o, type: discard}\n"
		got := checkErrors(dir, src)
		if want := strings.ReplaceAll(tc.want, "DIR", dir); strings.Join(got, "\n") != want {
			t.Errorf("pattern %s, cache dir %s:\n got %q\nwant %q", tc.pattern, tc.cacheDir, got, want)
		}
	}
}

// TestFilesPassOverTemporaries: the temporary files an unfinished piperun
// write leaves (.NAME.tmp-PID-N, after a kill -9) are not read as data,
// and validate says it passed over them; a pattern such as out/*.rec*
// matched them, and their partial records were read.
func TestFilesPassOverTemporaries(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "out"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"a.rec", ".a.rec.tmp-4242-123456", ".b.rec.tmp-4242-99", ".c.rec.tmp-x"} {
		if err := os.WriteFile(filepath.Join(dir, "out", f), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	src := "version: 1\nname: c\nstages:\n  - {name: f, type: files, pattern: 'out/.*'}\n  - {name: o, type: discard}\n"
	sp, diags := spec.Parse(filepath.Join(dir, "s.yaml"), []byte(src), spec.Options{Catalog: Default(), Environment: true})
	var got []string
	for _, d := range diags {
		got = append(got, strings.SplitN(d.String(), ": ", 2)[1])
	}
	want := `warning: stages[0].pattern: pattern "out/.*" matches 2 temporary files of an unfinished piperun write (such as ` + filepath.Join(dir, "out", ".a.rec.tmp-4242-123456") + `), passed over: a run stopped by kill -9 leaves them, and the next run writing there removes them`
	if strings.Join(got, "\n") != want {
		t.Errorf("diagnostics:\n got %q\nwant %q", got, want)
	}
	// What it reads: the one hidden name that is no temporary file.
	if n := sp.Stages[0].Config.(*FilesConfig).EpochSamples(0); n != 1 {
		t.Errorf("files counted %d, want 1 (.c.rec.tmp-x)", n)
	}
	// A pattern that matches only temporaries says so, not that they
	// are no regular files.
	src = "version: 1\nname: c\nstages:\n  - {name: f, type: files, pattern: 'out/.[ab]*'}\n  - {name: o, type: discard}\n"
	_, diags = spec.Parse(filepath.Join(dir, "s.yaml"), []byte(src), spec.Options{Catalog: Default(), Environment: true})
	got = nil
	for _, d := range diags {
		got = append(got, strings.SplitN(d.String(), ": ", 2)[1])
	}
	want = `warning: stages[0].pattern: pattern "out/.[ab]*" matches 2 temporary files of an unfinished piperun write (such as ` + filepath.Join(dir, "out", ".a.rec.tmp-4242-123456") + `), passed over: a run stopped by kill -9 leaves them, and the next run writing there removes them` + "\n" +
		`stages[0].pattern: pattern "out/.[ab]*" matches no file (resolved to ` + filepath.Join(dir, "out/.[ab]*") + `); 2 names match, all temporary files of an unfinished piperun write, passed over (above)`
	if strings.Join(got, "\n") != want {
		t.Errorf("diagnostics:\n got %q\nwant %q", got, want)
	}
}

// TestFingerprintPassesOverTemporaries: a cache's fingerprint counts the
// files the files stage reads, not the temporary files it passes over: a
// leftover .NAME.tmp-PID-N made the next run fill a new cache.
func TestFingerprintPassesOverTemporaries(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "out"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "out", "a.jsonl"), []byte("{\"x\": 1}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	src := "version: 1\nname: c\nstages:\n  - {name: f, type: files, pattern: 'out/*'}\n  - {name: j, type: jsonl}\n  - {name: c, type: cache, dir: cache}\n  - {name: o, type: discard}\n"
	fingerprint := func() string {
		sp, diags := spec.Parse(filepath.Join(dir, "s.yaml"), []byte(src), spec.Options{Catalog: Default(), Environment: true})
		if diags.HasErrors() {
			t.Fatalf("spec problems:\n%v", diags)
		}
		fp, _, err := Fingerprint(sp, sp.Stages[2], 1)
		if err != nil {
			t.Fatal(err)
		}
		return fp
	}
	before := fingerprint()
	if err := os.WriteFile(filepath.Join(dir, "out", ".a.jsonl.tmp-99999-123"), []byte("{\"x\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if after := fingerprint(); after != before {
		t.Errorf("fingerprint %s with a temporary file beside the input, %s without", after, before)
	}
}

// checkErrors validates src as the spec s.yaml in dir, with the
// environment, and returns its errors without their file:line prefix.
func checkErrors(dir, src string) []string {
	_, diags := spec.Parse(filepath.Join(dir, "s.yaml"), []byte(src), spec.Options{Catalog: Default(), Environment: true})
	var got []string
	for _, d := range diags.Errors() {
		got = append(got, strings.SplitN(d.String(), ": ", 2)[1])
	}
	return got
}
