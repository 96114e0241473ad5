package cli_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/piperun/piperun/cache"
)

// damagedSpec and damagedOther fill two caches in one directory, so that
// the damage of one can be seen not to spread to the other.
const damagedSpec = `
version: 1
name: fill
seed: 9
epochs: 2
stages:
  - {name: src, type: range, count: 300}
  - {name: c, type: cache, dir: cache, commit_every: 50}
  - {name: out, type: write_jsonl, path: out.jsonl}
`

var damagedOther = strings.NewReplacer("name: fill", "name: other", "count: 300", "count: 200", "out.jsonl", "other.jsonl").Replace(damagedSpec)

// fillTwo applies both specs in dir and returns the cache directory and
// the fingerprints of fill's cache and other's.
func fillTwo(t *testing.T, dir string) (cacheDir, fill, other string) {
	t.Helper()
	cacheDir = filepath.Join(dir, "cache")
	for _, s := range []struct{ name, body string }{{"fill.yaml", damagedSpec}, {"other.yaml", damagedOther}} {
		p := writeSpec(t, dir, s.name, s.body)
		if r := run(t, "apply", "--progress", "never", p); r.code != 0 {
			t.Fatalf("apply %s: %s", s.name, r)
		}
	}
	ms, err := cache.List(cacheDir)
	if err != nil || len(ms) != 2 {
		t.Fatalf("caches %+v, %v; want two", ms, err)
	}
	for _, m := range ms {
		switch m.Pipeline {
		case "fill":
			fill = m.Fingerprint
		case "other":
			other = m.Fingerprint
		}
	}
	if fill == "" || other == "" {
		t.Fatalf("caches %+v", ms)
	}
	return cacheDir, fill, other
}

// damagedMsg is the error naming the damaged cache dir/fp and the way out.
func damagedMsg(dir, fp, reason string) string {
	p := filepath.Join(dir, fp)
	return "cache " + p + " is damaged: " + reason + "; remove it (rm -r " + p + `) or run "piperun cache prune ` + dir +
		` --damaged", then run again to refill it`
}

// lsRow matches the text row of one cache in "cache ls": its fingerprint,
// then the other columns as given, up to STATE.
func lsRow(fp string, cols ...string) *regexp.Regexp {
	return regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(fp) + ` +` + strings.Join(quoteAll(cols), ` +`) + ` +\d{4}-`)
}

func quoteAll(s []string) []string {
	out := make([]string, len(s))
	for i, x := range s {
		out[i] = regexp.QuoteMeta(x)
	}
	return out
}

// TestDamagedManifestCommands replaces the manifest of a real cache with
// garbage, next to a healthy cache in the same directory: apply fails
// naming the file and the way out, ls lists both (the damaged one as
// such, why on stderr, exit 0), prune removes the damaged one alone, and
// apply then refills it.
func TestDamagedManifestCommands(t *testing.T) {
	dir := t.TempDir()
	cacheDir, fill, other := fillTwo(t, dir)
	man := filepath.Join(cacheDir, fill, "manifest.json")
	if err := os.WriteFile(man, []byte("garbage\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	reason := "manifest " + man + " does not parse (invalid character 'g' looking for beginning of value)"

	spec := filepath.Join(dir, "fill.yaml")
	r := run(t, "apply", "--progress", "never", spec)
	if want := `piperun: stage "c" (cache): ` + damagedMsg(cacheDir, fill, reason) + "\n"; r.code != 1 || !strings.HasSuffix(r.stderr, want) {
		t.Errorf("apply: %s\nwant exit 1 and\n%s", r, want)
	}
	if b, err := os.ReadFile(man); err != nil || string(b) != "garbage\n" {
		t.Errorf("apply changed the damaged manifest: %q, %v", b, err)
	}

	for _, arg := range []string{cacheDir, spec} {
		r = run(t, "cache", "ls", arg)
		if r.code != 0 {
			t.Errorf("ls %s: %s", arg, r)
		}
		if want := "piperun: " + damagedMsg(cacheDir, fill, reason) + "\n"; r.stderr != want {
			t.Errorf("ls %s stderr:\n%s\nwant\n%s", arg, r.stderr, want)
		}
		if !lsRow(fill, "-", "-", "-", "-", "damaged").MatchString(r.stdout) {
			t.Errorf("ls %s: no damaged row for %s:\n%s", arg, fill, r.stdout)
		}
		if arg == cacheDir && (!lsRow(other, "other", "c", "200", "3KiB", "complete").MatchString(r.stdout) || strings.Count(r.stdout, "\n") != 3) {
			t.Errorf("ls %s: the healthy cache is not listed as it was:\n%s", arg, r.stdout)
		}
	}
	r = run(t, "cache", "ls", "--format", "json", cacheDir)
	var ms []struct {
		Fingerprint, Damaged string
		Complete             bool
	}
	if err := json.Unmarshal([]byte(r.stdout), &ms); err != nil || r.code != 0 {
		t.Fatalf("ls --format json: %v\n%s", err, r)
	}
	if len(ms) != 2 {
		t.Fatalf("ls --format json: %+v", ms)
	}
	for _, m := range ms {
		if (m.Fingerprint == fill) != (m.Damaged == reason) || (m.Fingerprint == other) != m.Complete {
			t.Errorf("ls --format json: %+v", m)
		}
	}

	// Without a limit prune still refuses; --damaged alone removes the
	// damaged cache and nothing else, however old the healthy one.
	if r := run(t, "cache", "prune", cacheDir); r.code != 2 || !strings.Contains(r.stderr, "give --older-than and/or --keep-last, or --damaged") {
		t.Errorf("prune without limits: %s", r)
	}
	r = run(t, "cache", "prune", "--damaged", cacheDir)
	if want := "removed " + filepath.Join(cacheDir, fill) + ": damaged: " + reason + "\n"; r.code != 0 || r.stdout != want || r.stderr != "" {
		t.Errorf("prune --damaged: %s\nwant stdout %q", r, want)
	}
	left, _ := filepath.Glob(filepath.Join(cacheDir, "*"))
	if len(left) != 1 || filepath.Base(left[0]) != other {
		t.Errorf("after prune: %v, want %s alone", left, other)
	}
	if r := run(t, "cache", "prune", "--damaged", cacheDir); r.code != 0 || r.stdout != cacheDir+": nothing to remove\n" {
		t.Errorf("second prune --damaged: %s", r)
	}

	r = run(t, "apply", "--progress", "never", spec)
	if r.code != 0 {
		t.Fatalf("apply after prune: %s", r)
	}
	if r := run(t, "cache", "ls", cacheDir); r.code != 0 || r.stderr != "" || !lsRow(fill, "fill", "c", "300", "4.56KiB", "complete").MatchString(r.stdout) {
		t.Errorf("ls after the refill: %s", r)
	}
}

// TestPruneOlderThanZeroWithDamagedManifest is the command a corrupt
// sample's error recommends: it must work with a damaged manifest in the
// directory, removing every cache there.
func TestPruneOlderThanZeroWithDamagedManifest(t *testing.T) {
	cacheDir, fill, other := fillTwo(t, t.TempDir())
	if err := os.WriteFile(filepath.Join(cacheDir, fill, "manifest.json"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	r := run(t, "cache", "prune", "--older-than", "0", cacheDir)
	// Caches come most recently used first; an unreadable manifest's file
	// time stands in for its use, so the order is no part of the check.
	want := []string{
		"removed " + filepath.Join(cacheDir, fill) + ": damaged: manifest " + filepath.Join(cacheDir, fill, "manifest.json") +
			" does not parse (unexpected end of JSON input)",
		"removed " + filepath.Join(cacheDir, other) + " (other/c, 200 samples, 3KiB)",
	}
	got := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
	slices.Sort(got)
	slices.Sort(want)
	if r.code != 0 || !slices.Equal(got, want) {
		t.Errorf("prune: %s\nwant stdout lines\n%s", r, strings.Join(want, "\n"))
	}
	if left, _ := filepath.Glob(filepath.Join(cacheDir, "*")); len(left) != 0 {
		t.Errorf("left %v", left)
	}
}

// TestPruneKeepsDamagedCacheInUse holds a real cache open, as a running
// reader does, while its manifest is damaged: ls shows it damaged and in
// use, and prune keeps it and says so.
func TestPruneKeepsDamagedCacheInUse(t *testing.T) {
	cacheDir, fill, _ := fillTwo(t, t.TempDir())
	c, err := cache.Open(cacheDir, fill, cache.Manifest{}, cache.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := os.WriteFile(filepath.Join(cacheDir, fill, "manifest.json"), []byte("{"), 0o644); err != nil {
		t.Fatal(err)
	}
	if r := run(t, "cache", "ls", cacheDir); r.code != 0 || !lsRow(fill, "-", "-", "-", "-", "damaged, being read (1 process)").MatchString(r.stdout) {
		t.Errorf("ls: %s", r)
	}
	r := run(t, "cache", "prune", "--damaged", cacheDir)
	if want := "kept " + filepath.Join(cacheDir, fill) + " (damaged): in use by another piperun process\n"; r.code != 0 || r.stdout != want {
		t.Errorf("prune: %s\nwant stdout %q", r, want)
	}
	if _, err := os.Stat(filepath.Join(cacheDir, fill, "badger")); err != nil {
		t.Errorf("prune touched the cache in use: %v", err)
	}
}

// TestDamagedStoreCommands deletes the table file of a real cache: apply
// fails saying which store is damaged and what to do, instead of Badger's
// bare "file does not exist for table 1"; ls then shows the cache damaged
// with what its manifest says, and prune removes it.
func TestDamagedStoreCommands(t *testing.T) {
	dir := t.TempDir()
	cacheDir, fill, other := fillTwo(t, dir)
	store := filepath.Join(cacheDir, fill, "badger")
	if err := os.Remove(filepath.Join(store, "000001.sst")); err != nil {
		t.Fatal(err)
	}
	reason := "its Badger store " + store + " does not open (file does not exist for table 1)"
	r := run(t, "apply", "--progress", "never", filepath.Join(dir, "fill.yaml"))
	if want := `piperun: stage "c" (cache): ` + damagedMsg(cacheDir, fill, reason) + "\n"; r.code != 1 || !strings.HasSuffix(r.stderr, want) {
		t.Errorf("apply: %s\nwant exit 1 and\n%s", r, want)
	}
	r = run(t, "cache", "ls", cacheDir)
	if r.code != 0 || r.stderr != "piperun: "+damagedMsg(cacheDir, fill, reason)+"\n" ||
		!lsRow(fill, "fill", "c", "300", "4.56KiB", "damaged").MatchString(r.stdout) {
		t.Errorf("ls: %s", r)
	}
	// A limit that keeps every healthy cache still removes the damaged one.
	r = run(t, "cache", "prune", "--keep-last", "5", cacheDir)
	if want := "removed " + filepath.Join(cacheDir, fill) + " (fill/c): damaged: " + reason + "\n"; r.code != 0 || r.stdout != want {
		t.Errorf("prune --keep-last 5: %s\nwant stdout %q", r, want)
	}
	if left, _ := filepath.Glob(filepath.Join(cacheDir, "*")); len(left) != 1 || filepath.Base(left[0]) != other {
		t.Errorf("left %v, want %s", left, other)
	}
}

// TestUnreadableManifestCommands puts a directory where a real cache's
// manifest should be, next to a healthy cache: its read fails (EISDIR,
// even as root) as one refused by permissions or a failing disk does,
// which says nothing about the cache. ls lists it unreadable, not
// damaged, saying why on stderr and under "unreadable" in JSON; no prune
// removes it, and each says it kept it; apply fails with the read's error
// and leaves it as it is.
func TestUnreadableManifestCommands(t *testing.T) {
	dir := t.TempDir()
	cacheDir, fill, other := fillTwo(t, dir)
	man := filepath.Join(cacheDir, fill, "manifest.json")
	if err := os.Remove(man); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(man, 0o755); err != nil {
		t.Fatal(err)
	}
	reason := "read " + man + ": is a directory"
	why := "its manifest cannot be read (" + reason + "); prune keeps it"

	r := run(t, "cache", "ls", cacheDir)
	if want := "piperun: cache " + filepath.Join(cacheDir, fill) + ": " + why + "\n"; r.code != 0 || r.stderr != want {
		t.Errorf("ls: %s\nwant exit 0 and stderr %q", r, want)
	}
	if !lsRow(fill, "-", "-", "-", "-", "unreadable").MatchString(r.stdout) ||
		!lsRow(other, "other", "c", "200", "3KiB", "complete").MatchString(r.stdout) {
		t.Errorf("ls:\n%s", r.stdout)
	}
	r = run(t, "cache", "ls", "--format", "json", cacheDir)
	var ms []struct{ Fingerprint, Damaged, Unreadable string }
	if err := json.Unmarshal([]byte(r.stdout), &ms); err != nil || r.code != 0 || len(ms) != 2 {
		t.Fatalf("ls --format json: %v\n%s", err, r)
	}
	for _, m := range ms {
		if m.Damaged != "" || (m.Fingerprint == fill) != (m.Unreadable == reason) {
			t.Errorf("ls --format json: %+v", m)
		}
	}

	kept := "kept " + filepath.Join(cacheDir, fill) + ": " + why + "\n"
	if r := run(t, "cache", "prune", "--damaged", cacheDir); r.code != 0 || r.stdout != kept {
		t.Errorf("prune --damaged: %s\nwant stdout %q", r, kept)
	}
	r = run(t, "cache", "prune", "--older-than", "0", cacheDir)
	if want := "removed " + filepath.Join(cacheDir, other) + " (other/c, 200 samples, 3KiB)\n" + kept; r.code != 0 || r.stdout != want {
		t.Errorf("prune --older-than 0: %s\nwant stdout %q", r, want)
	}
	if left, _ := filepath.Glob(filepath.Join(cacheDir, "*")); len(left) != 1 || filepath.Base(left[0]) != fill {
		t.Errorf("left %v, want %s alone", left, fill)
	}

	r = run(t, "apply", "--progress", "never", filepath.Join(dir, "fill.yaml"))
	if r.code != 1 || !strings.Contains(r.stderr, reason) || strings.Contains(r.stderr, "damaged") {
		t.Errorf("apply: %s\nwant exit 1 naming the read's error, not damage", r)
	}
	if fi, err := os.Stat(man); err != nil || !fi.IsDir() {
		t.Errorf("the unreadable manifest was touched: %v", err)
	}
	if _, err := os.Stat(filepath.Join(cacheDir, fill, "badger")); err != nil {
		t.Errorf("the unreadable cache lost its store: %v", err)
	}
}
