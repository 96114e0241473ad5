package imageops

import (
	"github.com/piperun/piperun/internal/testutil"

	"bufio"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func sharedData(tb testing.TB, sub string) string { return testutil.SharedData(tb, sub) }

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
