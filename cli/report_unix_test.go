//go:build unix

package cli_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestApplyReportRefusesANode: a report is written aside and renamed onto
// its path, which would replace a named pipe (or a device: /dev/full
// became a plain file) with a file.
func TestApplyReportRefusesANode(t *testing.T) {
	dir := t.TempDir()
	p := writeSpec(t, dir, "small.yaml", smallSpec)
	fifo := filepath.Join(dir, "r.fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Skip("no named pipes here:", err)
	}
	r := run(t, "apply", "--report", fifo, p)
	if want := "--report " + fifo + " is a named pipe, not a regular file"; r.code != 2 || !strings.Contains(r.stderr, want) {
		t.Errorf("--report over a pipe: %s\nwant exit 2 and %q", r, want)
	}
	if fi, err := os.Lstat(fifo); err != nil || fi.Mode()&os.ModeNamedPipe == 0 {
		t.Errorf("the pipe was replaced: %v, %v", fi.Mode(), err)
	}
	// Through a link whose target has no name to follow: stdout as a pipe
	// (refused only after the run, its outputs committed).
	if _, err := os.Stat("/proc/self/fd"); err != nil {
		t.Skip("no /proc here")
	}
	cmd := exec.Command(binary, "apply", "--progress", "never", "--report", "/dev/stdout", p)
	out, _ := cmd.CombinedOutput()
	if want := "--report /dev/stdout is one of this process's open files"; cmd.ProcessState.ExitCode() != 2 || !strings.Contains(string(out), want) {
		t.Errorf("--report /dev/stdout onto a pipe: exit %d, %s\nwant exit 2 and %q", cmd.ProcessState.ExitCode(), out, want)
	}
}

// TestApplyReportThroughALinkToAnOutput: a report named by a link whose
// target is a sink's output is refused as the output itself is; it
// replaced a write_jsonl sink's lines, exit 0. So is a report that a
// sink's output link leads to.
func TestApplyReportThroughALinkToAnOutput(t *testing.T) {
	dir := t.TempDir()
	p := writeSpec(t, dir, "small.yaml", smallSpec)
	out := filepath.Join(dir, "out", "small.jsonl")
	link := filepath.Join(dir, "r.json")
	if err := os.Symlink(out, link); err != nil {
		t.Skip("no symlinks here:", err)
	}
	r := run(t, "apply", "--report", link, p)
	if want := "--report " + link + ` leads to what stage "out" writes`; r.code != 2 || !strings.Contains(r.stderr, want) {
		t.Errorf("--report through a link to the output: %s\nwant exit 2 and %q", r, want)
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Errorf("the run wrote its output: %v", err)
	}

	// The other way: the sink's path is a link to the report's file.
	dir2 := t.TempDir()
	p2 := writeSpec(t, dir2, "small.yaml", smallSpec)
	rep := filepath.Join(dir2, "r.json")
	if err := os.MkdirAll(filepath.Join(dir2, "out"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(rep, filepath.Join(dir2, "out", "small.jsonl")); err != nil {
		t.Fatal(err)
	}
	r = run(t, "apply", "--report", rep, p2)
	if want := "--report " + rep + ` is what stage "out" writes`; r.code != 2 || !strings.Contains(r.stderr, want) {
		t.Errorf("--report where the output's link leads: %s\nwant exit 2 and %q", r, want)
	}
}

// TestApplyReportBelowALinkToNowhere: a report's folder that is a link to
// a folder that does not exist is named as such, not "file exists".
func TestApplyReportBelowALinkToNowhere(t *testing.T) {
	dir := t.TempDir()
	p := writeSpec(t, dir, "small.yaml", smallSpec)
	link := filepath.Join(dir, "dl")
	if err := os.Symlink("nowhere/dir", link); err != nil {
		t.Skip("no symlinks here:", err)
	}
	rep := filepath.Join(link, "r.json")
	r := run(t, "apply", "--report", rep, p)
	if want := "--report " + rep + " cannot be written: " + link + " is a link to nowhere/dir, which does not exist"; r.code != 2 || !strings.Contains(r.stderr, want) {
		t.Errorf("--report below a link to nowhere: %s\nwant exit 2 and %q", r, want)
	}
}

// TestApplyReportDotDotAfterALink: ".." in --report is read as text, as a
// sink's path is. With yl a link to x/y, DIR/yl/../../out/small.jsonl is
// out/small.jsonl beside DIR as text, and the sink's own output through
// the link: the checks read the text, and the rename followed the link,
// replacing the sink's lines with the report, exit 0.
func TestApplyReportDotDotAfterALink(t *testing.T) {
	dir := t.TempDir()
	p := writeSpec(t, dir, "small.yaml", smallSpec)
	if err := os.MkdirAll(filepath.Join(dir, "x", "y"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("x/y", filepath.Join(dir, "yl")); err != nil {
		t.Skip("no symlinks here:", err)
	}
	rep := filepath.Join(dir, "yl") + "/../../out/small.jsonl"
	if r := run(t, "apply", "--report", rep, p); r.code != 0 {
		t.Fatalf("apply --report %s: %s", rep, r)
	}
	out, err := os.ReadFile(filepath.Join(dir, "out", "small.jsonl"))
	if err != nil || strings.Contains(string(out), `"ok"`) {
		t.Errorf("the sink's output is now %q (%v): the report replaced it", out, err)
	}
	beside := filepath.Join(filepath.Dir(dir), "out", "small.jsonl")
	if b, err := os.ReadFile(beside); err != nil || !strings.Contains(string(b), `"ok": true`) {
		t.Errorf("no report at %s, where the path reads as text: %q, %v", beside, b, err)
	}
}
