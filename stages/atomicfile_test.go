package stages

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// TestCheckWritable: the directory a sink would write to, or the one it
// would be made in, is named with what stands in the way.
func TestCheckWritable(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "f")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct{ path, want string }{
		{filepath.Join(dir, "out.jsonl"), ""},
		{filepath.Join(dir, "new", "deeper", "out.jsonl"), ""},
		{filepath.Join(file, "out.jsonl"), file + " is not a directory"},
		// An output whose name is taken by a directory: rename would say
		// only "file exists", at the end of the run.
		{dir, dir + " is a directory"},
	}
	if runtime.GOOS == "linux" {
		cases = append(cases, struct{ path, want string }{"/proc/nope/x", "output directory /proc/nope cannot be made in /proc: "})
	}
	for _, tc := range cases {
		err := checkWritable(tc.path)
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.HasPrefix(err.Error(), tc.want)) {
			t.Errorf("checkWritable(%s) = %v, want %q", tc.path, err, tc.want)
		}
	}
	if runtime.GOOS == "linux" {
		// serve's unix socket: the directory is named as a socket's.
		want := "socket directory /proc is not writable: "
		if err := checkDirFor("/proc/x.sock", "socket directory"); err == nil || !strings.HasPrefix(err.Error(), want) {
			t.Errorf("checkDirFor(/proc/x.sock) = %v, want %q", err, want)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "new")); !os.IsNotExist(err) {
		t.Errorf("the check made a directory: %v", err)
	}
}
