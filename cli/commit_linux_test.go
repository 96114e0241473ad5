package cli_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestApplyShardSetCommitsWholeOrNotAtAll: a rename that fails in the
// middle of a set of shards (the second of three is immutable here, as a
// file of another user in a sticky folder would be) puts back the shards
// renamed before it, so the set stays the earlier run's, whole, and no
// temporary file is left. A re-test found shards 0 and 2 new and 1 old,
// the report saying the sink was not committed.
func TestApplyShardSetCommitsWholeOrNotAtAll(t *testing.T) {
	dir := t.TempDir()
	const src = `version: 1
name: s
stages:
  - {name: src, type: range, count: 30}
  - {name: m, type: map, set: {r: 'index * RUN'}}
  - {name: out, type: write_tfrecord, path: 'out/part-{shard}.tfrecord', shards: 3}
`
	p1 := writeSpec(t, dir, "s1.yaml", strings.Replace(src, "RUN", "1", 1))
	p2 := writeSpec(t, dir, "s2.yaml", strings.Replace(src, "RUN", "2", 1))
	if r := run(t, "apply", "--progress", "never", p1); r.code != 0 {
		t.Fatalf("first run: %s", r)
	}
	out := filepath.Join(dir, "out")
	first := readAll(t, out)
	locked := filepath.Join(out, "part-00001.tfrecord")
	if b, err := exec.Command("chattr", "+i", locked).CombinedOutput(); err != nil {
		t.Skipf("cannot make a file immutable here (chattr +i, as root on ext4): %v: %s", err, b)
	}
	t.Cleanup(func() { exec.Command("chattr", "-i", locked).Run() })
	r := run(t, "apply", "--progress", "never", p2)
	if r.code != 1 || !strings.Contains(r.stderr, "part-00001.tfrecord: operation not permitted") {
		t.Errorf("second run: %s\nwant exit 1 naming the shard that could not be replaced", r)
	}
	if !strings.Contains(r.stderr, "no output was replaced") {
		t.Errorf("second run: %s\nwant it to say the shards were put back", r)
	}
	if got := readAll(t, out); !mapsEqual(got, first) {
		t.Errorf("after the failed commit the folder holds %v, want the first run's %v", keys(got), keys(first))
	}
}

// readAll maps each file's name in dir to its content.
func readAll(t *testing.T, dir string) map[string]string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]string{}
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		m[e.Name()] = string(b)
	}
	return m
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

func keys(m map[string]string) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
