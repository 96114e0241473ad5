package cache

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSkippedWhenFilled: MarkComplete writes the skips it was given into
// the manifest, {} for none, where a reopen and List find them; a cache
// completed without them records nothing (unknown), and a partial one
// holds none, even if an earlier complete pass had them.
func TestSkippedWhenFilled(t *testing.T) {
	dir := t.TempDir()
	fill := func(fp string, n int64, skipped map[string]int64, causes map[string][]string, complete bool) {
		t.Helper()
		c := openT(t, dir, fp, Options{})
		for id := range n {
			if err := c.Put(id, testSample(id)); err != nil {
				t.Fatal(err)
			}
		}
		if skipped != nil {
			c.SetSkippedWhenFilled(skipped, causes)
		}
		if complete {
			if err := c.MarkComplete(); err != nil {
				t.Fatal(err)
			}
		}
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
	}
	fill("lost", 3, map[string]int64{"decode": 2}, map[string][]string{"decode": {"a.jpg: bad", "b.jpg: bad"}}, true)
	fill("clean", 3, map[string]int64{}, nil, true)
	fill("older", 3, nil, nil, true)
	fill("partial", 3, map[string]int64{"decode": 1}, nil, false)

	manifest := func(fp string) string {
		b, err := os.ReadFile(filepath.Join(dir, fp, manifestName))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	for fp, want := range map[string]string{
		"lost":    "\"skipped_when_filled\": {\n    \"decode\": 2\n  },\n  \"skip_causes_when_filled\": {\n    \"decode\": [\n      \"a.jpg: bad\",",
		"clean":   "\"skipped_when_filled\": {}\n",
		"older":   "",
		"partial": "",
	} {
		m := manifest(fp)
		if got := strings.Contains(m, "when_filled"); got != (want != "") || !strings.Contains(m, want) {
			t.Errorf("%s: manifest\n%s\nwant it to hold %q", fp, m, want)
		}
	}
	ms, err := List(dir)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, m := range ms {
		got[m.Fingerprint] = fmt.Sprintf("%v %v %d", m.SkippedWhenFilled, m.SkippedWhenFilled == nil, len(m.SkipCausesWhenFilled["decode"]))
	}
	if want := "map[clean:map[] false 0 lost:map[decode:2] false 2 older:map[] true 0 partial:map[] true 0]"; fmt.Sprint(got) != want {
		t.Errorf("List: %v\nwant %s", got, want)
	}

	// A reopen keeps a complete cache's record.
	c := openT(t, dir, "lost", Options{})
	if m := c.Manifest(); m.SkippedWhenFilled["decode"] != 2 || !m.Complete {
		t.Errorf("reopened: %+v", m)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	// One whose manifest claims more samples than the store holds is
	// partial again: its record goes with its completeness.
	b := strings.Replace(manifest("lost"), `"samples": 3`, `"samples": 4`, 1)
	if err := os.WriteFile(filepath.Join(dir, "lost", manifestName), []byte(b), 0o644); err != nil {
		t.Fatal(err)
	}
	c = openT(t, dir, "lost", Options{})
	if m := c.Manifest(); m.Complete || m.SkippedWhenFilled != nil || m.SkipCausesWhenFilled != nil {
		t.Errorf("reopened as partial: %+v", m)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if m := manifest("lost"); strings.Contains(m, "when_filled") {
		t.Errorf("partial again, the manifest keeps a record:\n%s", m)
	}
}
