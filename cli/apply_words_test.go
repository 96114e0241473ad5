package cli_test

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
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
