package stages

import (
	"net"
	"os"
	"path/filepath"
	"runtime"
	"syscall"
	"testing"
)

// TestOutputsOnlyReplaceRegularFiles: an output is renamed onto its path
// at the end of the run, so what is there must be a regular file or
// nothing. A symbolic link is followed (its target is written and the
// link kept); a named pipe, a socket or a device is refused, by validate
// and by the run alike, and left as it was (as
// root, `path: /dev/null` replaced the system's /dev/null with the output).
func TestOutputsOnlyReplaceRegularFiles(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("named pipes, sockets and /dev/null as on Linux")
	}
	dir := t.TempDir()
	at := func(name string) string { return filepath.Join(dir, name) }
	mustWrite := func(name, data string) {
		if err := os.WriteFile(at(name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	mustWrite("old.jsonl", "old\n")
	mustWrite("target.jsonl", "old\n")
	mustOK(t, os.Symlink("target.jsonl", at("link.jsonl")))
	mustOK(t, os.Symlink(at("sub/new.jsonl"), at("dangling.jsonl")))
	mustOK(t, os.Symlink("loop2", at("loop1")))
	mustOK(t, os.Symlink("loop1", at("loop2")))
	mustOK(t, syscall.Mkfifo(at("fifo"), 0o644))
	mustOK(t, os.Symlink(at("fifo"), at("to_fifo")))
	l, err := net.Listen("unix", at("sock"))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()

	for _, tc := range []struct {
		path    string
		want    string // the error, or "" when the output is written
		written string // the file that then holds the output
	}{
		{at("new.jsonl"), "", at("new.jsonl")},
		{at("old.jsonl"), "", at("old.jsonl")},
		{at("link.jsonl"), "", at("target.jsonl")},
		{at("dangling.jsonl"), "", at("sub/new.jsonl")},
		{at("fifo"), at("fifo") + " is a named pipe, not a regular file: an output is written aside and renamed onto its path, which would replace it; write to a file", ""},
		{at("to_fifo"), at("fifo") + " (the target of " + at("to_fifo") + ") is a named pipe, not a regular file: an output is written aside and renamed onto its path, which would replace it; write to a file", ""},
		{at("sock"), at("sock") + " is a socket, not a regular file: an output is written aside and renamed onto its path, which would replace it; write to a file", ""},
		{"/dev/null", "/dev/null is a device, not a regular file: an output is written aside and renamed onto its path, which would replace it; write to a file", ""},
		{at("loop1"), at("loop1") + ": too many levels of symbolic links", ""},
		{dir, dir + " is a directory", ""},
	} {
		t.Run(filepath.Base(tc.path), func(t *testing.T) {
			before, _ := os.Lstat(tc.path)
			check := checkWritable(tc.path)
			f, err := createAtomic(tc.path)
			if err == nil {
				_, err = f.Write([]byte("new\n"))
				mustOK(t, err)
				err = f.commit()
			}
			for _, got := range []error{check, err} {
				if tc.want == "" && got != nil || tc.want != "" && (got == nil || got.Error() != tc.want) {
					t.Errorf("got %v, want %q", got, tc.want)
				}
			}
			if tc.written != "" {
				if b, err := os.ReadFile(tc.written); err != nil || string(b) != "new\n" {
					t.Errorf("%s holds %q, %v; want the output", tc.written, b, err)
				}
			}
			after, _ := os.Lstat(tc.path)
			if before != nil && (after == nil || before.Mode().Type() != after.Mode().Type()) {
				t.Errorf("%s was a %v, now %v", tc.path, before.Mode().Type(), after)
			}
		})
	}
}
