package cli_test

import (
	"encoding/json"
	"fmt"
	"github.com/piperun/piperun/internal/testutil"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const photoCacheSpec = `version: 1
name: photos
seed: 1
stages:
  - {name: files, type: files, pattern: 'img/*.jpg'}
  - name: decode
    type: map
    on_error: skip
    set: {img: 'decode_image(read_file(path), 3)'}
  - {name: c, type: cache, dir: cache}
  - {name: batch, type: batch, size: 4}
  - {name: out, type: discard}
`

type skipsReport struct {
	Skipped map[string]int64 `json:"skipped"`
	Caches  map[string]struct {
		FromCache            int64               `json:"from_cache"`
		Written              int64               `json:"written"`
		Complete             bool                `json:"complete"`
		SkippedWhenFilled    map[string]int64    `json:"skipped_when_filled"`
		SkipCausesWhenFilled map[string][]string `json:"skip_causes_when_filled"`
	} `json:"caches"`
}

// TestReplayReportsWhatTheFillSkipped: apply fills a cache, skipping two
// corrupt JPEGs, then replays it. Found by a new-user test: the replay's
// report said skipped {}, so a CI gate reading it could not tell that the
// data behind the cache lacks two samples. The replay's skipped stays
// this run's ({}), its caches.c.skipped_when_filled says decode 2, its
// summary line says so, and so do cache ls and cache info.
func TestReplayReportsWhatTheFillSkipped(t *testing.T) {
	dir := t.TempDir()
	testutil.WritePhotos(t, dir)
	p := writeSpec(t, dir, "photos.yaml", photoCacheSpec)
	reportPath := filepath.Join(dir, "report.json")
	const fromCache = "; from cache c: 2 skipped in decode when it was filled; "
	for i, tc := range []struct {
		skipped, written, fromCache int64
		summary                     string
	}{{2, 10, 0, "; skipped 2 in decode; "}, {0, 0, 10, fromCache}} {
		r := run(t, "apply", "--progress", "never", "--report", reportPath, p)
		if r.code != 0 {
			t.Fatalf("run %d: %s", i+1, r)
		}
		b, err := os.ReadFile(reportPath)
		if err != nil {
			t.Fatal(err)
		}
		var rep skipsReport
		if err := json.Unmarshal(b, &rep); err != nil {
			t.Fatal(err)
		}
		c := rep.Caches["c"]
		if rep.Skipped["decode"] != tc.skipped || len(rep.Skipped) != min(1, int(tc.skipped)) || c.Written != tc.written || c.FromCache != tc.fromCache || !c.Complete {
			t.Errorf("run %d: skipped %v, cache %+v", i+1, rep.Skipped, c)
		}
		if causes := c.SkipCausesWhenFilled["decode"]; len(c.SkippedWhenFilled) != 1 || c.SkippedWhenFilled["decode"] != 2 ||
			len(causes) != 2 || !strings.Contains(causes[0], "01.jpg") || !strings.Contains(causes[1], "10.jpg") {
			t.Errorf("run %d: caches.c.skipped_when_filled %v, causes %q; want decode 2, for 01.jpg and 10.jpg", i+1, c.SkippedWhenFilled, causes)
		}
		if !strings.Contains(r.stderr, tc.summary) || (i == 0) == strings.Contains(r.stderr, "when it was filled") {
			t.Errorf("run %d: summary does not say %q:\n%s", i+1, tc.summary, r.stderr)
		}
	}

	r := run(t, "cache", "ls", "--format", "json", p)
	var ms []struct {
		Fingerprint       string
		SkippedWhenFilled map[string]int64 `json:"skipped_when_filled"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &ms); err != nil || r.code != 0 {
		t.Fatalf("cache ls: %v\n%s", err, r)
	}
	if len(ms) != 1 || fmt.Sprint(ms[0].SkippedWhenFilled) != "map[decode:2]" {
		t.Errorf("cache ls: %+v, want skipped_when_filled decode 2", ms)
	}
	if r := run(t, "cache", "info", p, ms[0].Fingerprint[:6]); r.code != 0 || !strings.Contains(r.stdout, "\"skipped_when_filled\": {\n    \"decode\": 2\n  },") {
		t.Errorf("cache info: %s", r)
	}
	if r := run(t, "cache", "ls", p); r.code != 0 || !strings.Contains(r.stdout, " complete (skipped when filled: decode 2) ") {
		t.Errorf("cache ls: %s", r)
	}
}
