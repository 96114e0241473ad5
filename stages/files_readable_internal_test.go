package stages

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/piperun/piperun/spec"
)

// TestFilesSaysWhatCannotBeRead: validate warns of a pattern that matches
// files this process cannot read, as DESIGN.md's validate promises, naming
// how many and the first (a warning: under on_error: skip the run reads on
// past them); a folder it cannot list says so rather than only "matches
// no file" (a new-user test: both passed validate without a word). Root reads a
// file of mode 000, so the files are refused by a stand-in for access(2)
// first; the real modes are tried too when the test runs as another user.
func TestFilesSaysWhatCannotBeRead(t *testing.T) {
	dir := t.TempDir()
	for _, f := range []string{"one/a.jpg", "one/b.jpg", "two/a.jpg", "two/b.jpg", "two/c.jpg"} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, f)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	check := func(pattern, want string) {
		t.Helper()
		src := fmt.Sprintf("version: 1\nname: f\nstages:\n  - {name: f, type: files, pattern: '%s'}\n  - {name: out, type: discard}\n", pattern)
		_, diags := spec.Parse(filepath.Join(dir, "f.yaml"), []byte(src), spec.Options{Catalog: Default(), Environment: true})
		var got []string
		for _, d := range diags {
			got = append(got, strings.SplitN(d.String(), ": ", 2)[1])
		}
		if strings.Join(got, "\n") != want {
			t.Errorf("%s:\n got %q\nwant %q", pattern, got, want)
		}
	}
	const skipTail = ": reading one fails the run unless the stage that reads it has on_error: skip"
	real := readable
	t.Cleanup(func() { readable = real })
	readable = func(path string) error {
		if strings.HasSuffix(path, "b.jpg") || strings.HasSuffix(path, "c.jpg") {
			return fs.ErrPermission
		}
		return real(path)
	}
	check("one/*.jpg", `warning: stages[0].pattern: pattern "one/*.jpg" matches a file this process cannot read: read `+filepath.Join(dir, "one/b.jpg")+`: permission denied`+skipTail)
	check("two/*.jpg", `warning: stages[0].pattern: pattern "two/*.jpg" matches 2 files this process cannot read; the first: read `+filepath.Join(dir, "two/b.jpg")+`: permission denied`+skipTail)
	check("one/a.jpg", ``)
	readable = real

	if runtime.GOOS == "windows" || os.Geteuid() == 0 {
		t.Log("the real modes need a user other than root, on Unix")
		return
	}
	if err := os.Chmod(filepath.Join(dir, "one/b.jpg"), 0o000); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(dir, "two"), 0o000); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Chmod(filepath.Join(dir, "two"), 0o755) })
	if err := os.Chmod(filepath.Join(dir, "one"), 0o644); err != nil {
		t.Fatal(err)
	}
	check("one/*.jpg", `stages[0].pattern: pattern "one/*.jpg" matches no file (resolved to `+filepath.Join(dir, "one/*.jpg")+`); folder `+filepath.Join(dir, "one")+` lists 2 names but none can be looked up (permission denied): it needs execute (search) permission`)
	if err := os.Chmod(filepath.Join(dir, "one"), 0o755); err != nil {
		t.Fatal(err)
	}
	check("one/*.jpg", `warning: stages[0].pattern: pattern "one/*.jpg" matches a file this process cannot read: read `+filepath.Join(dir, "one/b.jpg")+`: permission denied`+skipTail)
	check("two/*.jpg", `stages[0].pattern: pattern "two/*.jpg" matches no file (resolved to `+filepath.Join(dir, "two/*.jpg")+`); folder `+filepath.Join(dir, "two")+` cannot be read: permission denied`)
}
