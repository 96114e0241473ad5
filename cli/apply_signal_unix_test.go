//go:build unix

package cli_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestApplySecondSignalQuits: a stage stuck in a system call (here the
// open of a named pipe nobody writes, as a hung mount would be) cannot see
// the first signal; a second one ends the process at once. Both signals
// were swallowed, and only kill -9 ended the run.
func TestApplySecondSignalQuits(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "man.jsonl"), []byte(`{"path": "`+fifo+`"}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	p := writeSpec(t, dir, "hang.yaml", `version: 1
name: hang
stages:
  - {name: m, type: files, pattern: man.jsonl}
  - {name: j, type: jsonl}
  - {name: t, type: tfrecord}
  - {name: out, type: discard}
`)
	var stderr syncBuffer
	cmd := exec.Command(binary, "apply", "--progress", "never", p)
	cmd.Stderr = &stderr
	exited := start(t, cmd).exited
	waitFor := func(what string) {
		t.Helper()
		for deadline := time.Now().Add(30 * time.Second); !strings.Contains(stderr.String(), what); time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("no %q on stderr after 30 s:\n%s", what, stderr.String())
			}
		}
	}
	waitFor("starting")
	inOpen(t, cmd.Process.Pid)
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	waitFor("interrupted: stopping")
	select {
	case err := <-exited:
		t.Fatalf("exited on the first signal (%v), stuck in its open as it was:\n%s", err, stderr.String())
	case <-time.After(300 * time.Millisecond):
	}
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case <-exited:
	case <-time.After(10 * time.Second):
		t.Fatalf("still running 10 s after the second signal:\n%s", stderr.String())
	}
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGINT {
		t.Errorf("ended %v, want by the second SIGINT", cmd.ProcessState)
	}
}

// openat is the number of the openat system call, by architecture.
var openat = map[string]string{"amd64": "257", "arm64": "56"}

// inOpen returns once a thread of process pid is in an openat call, as
// Linux's /proc tells; elsewhere, or if /proc cannot tell, after 200 ms.
// A fixed sleep alone could signal a slow run before it reached the open,
// and the run then stopped at the first signal, as it should.
func inOpen(t *testing.T, pid int) {
	t.Helper()
	nr, ok := openat[runtime.GOARCH]
	if _, err := os.Stat(fmt.Sprintf("/proc/%d/task", pid)); !ok || err != nil {
		time.Sleep(200 * time.Millisecond)
		return
	}
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		calls, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/syscall", pid))
		for _, c := range calls {
			if b, err := os.ReadFile(c); err == nil && strings.HasPrefix(string(b), nr+" ") {
				return
			}
		}
	}
	t.Fatalf("no thread of process %d in openat after 30 s", pid)
}

// TestReadOnlyCommandsEndOnTheFirstSignal: outside a run nothing looks
// at the context, so the first SIGTERM or SIGINT ends the process by that
// signal, as it would without a handler. It was swallowed: inspect of a
// named pipe nobody writes ran on past `timeout`'s SIGTERM, and validate
// walked on through a tree.
func TestReadOnlyCommandsEndOnTheFirstSignal(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		cmd := exec.Command(binary, "inspect", fifo)
		exited := start(t, cmd).exited
		inOpen(t, cmd.Process.Pid)
		if err := cmd.Process.Signal(sig); err != nil {
			t.Fatal(err)
		}
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			t.Fatalf("inspect still running 10 s after %v", sig)
		}
		if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != sig {
			t.Errorf("inspect ended %v, want by %v", cmd.ProcessState, sig)
		}
	}
}

// TestApplyTakesASignalTwiceAtOnceAsOne: GNU timeout (without
// --foreground) signals the process and then its process group, so the
// run gets the same signal twice within microseconds. Taken as the
// second, it ended the process at once, with no report and the writers'
// temporary files left (a soak test: 1 to 5 runs in 30). The repeat is
// swallowed: the run stops as after one signal.
func TestApplyTakesASignalTwiceAtOnceAsOne(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
		dir := t.TempDir()
		p := writeSpec(t, dir, "endless.yaml", `version: 1
name: endless
epochs: 0
stages:
  - {name: src, type: range, count: 1000}
  - {name: slow, type: map, set: {n: 'len(filter(1..900000, # % 7 == 0))'}}
  - {name: out, type: write_jsonl, path: out.jsonl}
`)
		var stderr syncBuffer
		report := filepath.Join(dir, "r.json")
		cmd := exec.Command(binary, "apply", "--progress", "never", "--report", report, p)
		cmd.Stderr = &stderr
		exited := start(t, cmd).exited
		for deadline := time.Now().Add(30 * time.Second); !strings.Contains(stderr.String(), "starting"); time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("no start after 30 s:\n%s", stderr.String())
			}
		}
		time.Sleep(100 * time.Millisecond)
		for range 2 {
			if err := cmd.Process.Signal(sig); err != nil {
				t.Fatalf("%v: %v\n%s", sig, err, stderr.String())
			}
			time.Sleep(5 * time.Millisecond)
		}
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			t.Fatalf("still running 30 s after %v:\n%s", sig, stderr.String())
		}
		if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || ws.Signaled() || ws.ExitStatus() != 1 {
			t.Errorf("%v twice: ended %v, want exit status 1, stopped as by one signal:\n%s", sig, cmd.ProcessState, stderr.String())
		}
		if _, err := os.Stat(report); err != nil {
			t.Errorf("%v twice: no report: %v", sig, err)
		}
		if !regexp.MustCompile(`before the stop, sink "out" had received \d+ samples \(\d+ whole epochs\)\n`).MatchString(stderr.String()) {
			t.Errorf("%v twice: no totals on stderr:\n%s", sig, stderr.String())
		}
		if tmp, _ := filepath.Glob(filepath.Join(dir, ".out.jsonl.tmp-*")); len(tmp) > 0 {
			t.Errorf("%v twice: left %v", sig, tmp)
		}
	}
}
