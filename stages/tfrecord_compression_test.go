package stages

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/piperun/piperun/spec"
	"github.com/piperun/piperun/tfrecord"
)

// TestValidateReadsTheFirstFilesCompression: a compression that the first
// file matched does not start with is refused by validate, as the run
// would fail on it at once (a review: validate passed compression: none
// over gzipped files); under on_error: skip it is a warning, and auto,
// or the right compression, says nothing.
func TestValidateReadsTheFirstFilesCompression(t *testing.T) {
	dir := t.TempDir()
	for name, c := range map[string]tfrecord.Compression{"a.tfrecord.gz": tfrecord.Gzip, "b.tfrecord": tfrecord.None} {
		var buf bytes.Buffer
		w := tfrecord.NewWriter(&buf, c)
		if err := w.Write([]byte("x")); err != nil {
			t.Fatal(err)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	gz, plain := filepath.Join(dir, "a.tfrecord.gz"), filepath.Join(dir, "b.tfrecord")
	// A map between may read other files than those matched: nothing is
	// said (a review: files *.tfrecord, a map adding ".gz" to the path,
	// and compression: gzip was refused). Nor where the reader reads
	// another field than the files' path.
	// A shuffle between passes the paths on as they are, and is looked
	// through.
	for _, tc := range []struct{ mid, field string }{
		{"{name: m, type: map, set: {path: 'path + \".gz\"'}}", "path"},
		{"{name: m, type: map, set: {other: 'path'}}", "other"},
		{"{name: s, type: shuffle, buffer: 4}", "path"},
		// A skip may drop the first file, which is then never read.
		{"{name: k, type: skip, count: 1}", "path"},
		{"{name: w, type: filter, where: 'path != \"x\"'}", "path"},
	} {
		src := "version: 1\nname: c\nstages:\n  - {name: f, type: files, pattern: 'b.*'}\n  - " + tc.mid + "\n  - {name: r, type: tfrecord, field: " + tc.field + ", compression: gzip}\n  - {name: o, type: discard}\n"
		_, diags := spec.Parse(filepath.Join(dir, "s.yaml"), []byte(src), spec.Options{Catalog: Default(), Environment: true})
		if said := len(diags) != 0; said != strings.Contains(tc.mid, "shuffle") {
			t.Errorf("%s: %v, want the compression refused only through the shuffle", tc.mid, diags)
		}
	}
	for _, tc := range []struct{ pattern, reader, want string }{
		{"*.gz", "compression: none", "error: stages[1].compression: " + gz + `, the first file stage "f" matches, is read with compression none (it starts like a gzip file: read it as gzip, or with auto, which detects it)`},
		{"*.gz", "compression: zlib, on_error: skip", "warning: stages[1].compression: " + gz + `, the first file stage "f" matches, is read with compression zlib (it starts like a gzip file: read it as gzip, or with auto, which detects it); under on_error: skip such files are skipped`},
		{"b.*", "compression: gzip", "error: stages[1].compression: " + plain + `, the first file stage "f" matches, is read with compression gzip (it starts like an uncompressed TFRecord: read it as none, or with auto, which detects it)`},
		{"*.gz", "compression: gzip", ""},
		{"*.gz", "compression: auto", ""},
		{"b.*", "compression: none", ""},
	} {
		src := "version: 1\nname: c\nstages:\n  - {name: f, type: files, pattern: '" + tc.pattern + "'}\n  - {name: r, type: tfrecord, " + tc.reader + "}\n  - {name: o, type: discard}\n"
		_, diags := spec.Parse(filepath.Join(dir, "s.yaml"), []byte(src), spec.Options{Catalog: Default(), Environment: true})
		var got []string
		for _, d := range diags {
			sev := "error: "
			if d.Severity != spec.SevError {
				sev = ""
			}
			got = append(got, sev+strings.SplitN(d.String(), ": ", 2)[1])
		}
		if strings.Join(got, "\n") != tc.want {
			t.Errorf("%s, %s:\n got %q\nwant %q", tc.pattern, tc.reader, got, tc.want)
		}
	}
}
