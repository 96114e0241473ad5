package imageops

import (
	"bufio"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// sharedData returns a folder of the shared real-world test data, which lives
// outside the repository (../../shared/data from this package), or skips.
func sharedData(tb testing.TB, sub string) string {
	tb.Helper()
	d := filepath.Join("..", "..", "shared", "data", sub)
	if _, err := os.Stat(d); err != nil {
		tb.Skipf("shared test data %s is absent (it is not part of the repo; see /work/shared/data/README.md): %v", d, err)
	}
	return d
}

// manifestRow is one line of a MANIFEST.tsv, keyed by column name.
type manifestRow map[string]string

func readManifest(tb testing.TB, dir string) []manifestRow {
	tb.Helper()
	f, err := os.Open(filepath.Join(dir, "MANIFEST.tsv"))
	if err != nil {
		tb.Fatalf("read manifest: %v", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	var cols []string
	var rows []manifestRow
	for sc.Scan() {
		fields := strings.Split(sc.Text(), "\t")
		if cols == nil {
			cols = fields
			continue
		}
		r := manifestRow{}
		for i, c := range cols {
			if i < len(fields) {
				r[c] = fields[i]
			}
		}
		rows = append(rows, r)
	}
	if err := sc.Err(); err != nil {
		tb.Fatalf("read manifest: %v", err)
	}
	return rows
}

func readFile(tb testing.TB, path string) []byte {
	tb.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// photos returns the contents of the shared ImageNet sample photos.
func photos(tb testing.TB) ([]string, [][]byte) {
	tb.Helper()
	dir := sharedData(tb, "photos/imagenet")
	var names []string
	var data [][]byte
	for _, r := range readManifest(tb, dir) {
		names = append(names, r["file"])
		data = append(data, readFile(tb, filepath.Join(dir, r["file"])))
	}
	return names, data
}
