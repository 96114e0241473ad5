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
	if want := "--report /dev/stdout is not a regular file"; cmd.ProcessState.ExitCode() != 2 || !strings.Contains(string(out), want) {
		t.Errorf("--report /dev/stdout onto a pipe: exit %d, %s\nwant exit 2 and %q", cmd.ProcessState.ExitCode(), out, want)
	}
}
