package cli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/piperun/piperun/cli"
	"github.com/piperun/piperun/gpu"
	"github.com/piperun/piperun/stages"
)

const smallSpec = `version: 1
name: small
seed: 7
resources:
  memory: 16MiB
stages:
  - {name: src, type: range, count: 10}
  - name: sq
    type: map
    set:
      sq: 'index * index'
      even: 'index % 2 == 0'
  - {name: batch, type: batch, size: 4}
  - {name: out, type: write_jsonl, path: out/small.jsonl}
`

// TestApplyReportPathCheckedFirst: a --report that cannot be written, or
// would overwrite the spec or an output, is a usage error before the run,
// not a failure after the outputs were committed (found by the tester; the
// spec, an output and bench's report by the re-test). A missing directory
// is made, as a sink's is.
func TestApplyReportPathCheckedFirst(t *testing.T) {
	dir := t.TempDir()
	p := writeSpec(t, dir, "small.yaml", smallSpec)
	for _, tc := range []struct{ cmd, path, want string }{
		{"apply", "/proc/nodir/r.json", "--report /proc/nodir/r.json cannot be written: no such file or directory"},
		{"apply", dir, "--report " + dir + " is a directory"},
		{"apply", p, "--report " + p + " is the spec itself"},
		{"apply", filepath.Join(dir, "out", "small.jsonl"), "--report " + filepath.Join(dir, "out", "small.jsonl") + ` is what stage "out" writes`},
		{"bench", dir, "--report " + dir + " is a directory"},
		{"apply", "", "--report must name a file, got an empty path"},
		{"bench", "", "--report must name a file, got an empty path"},
		{"apply", filepath.Join(dir, "reports") + "/", "--report: path \"" + filepath.Join(dir, "reports") + "/\" names a folder, not a file"},
		{"apply", "-", "--report - would write a file named -: name a file (a report does not go to stdout)"},
		{"bench", "-", "--report - would write a file named -: name a file (a report does not go to stdout)"},
	} {
		args := []string{tc.cmd, "--report", tc.path, p}
		if tc.cmd == "bench" {
			args = append(args, "--step-time", "0")
		}
		r := run(t, args...)
		if r.code != 2 || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("%s --report %s: %s\nwant exit 2 and %q", tc.cmd, tc.path, r, tc.want)
		}
		if _, err := os.Stat(filepath.Join(dir, "out", "small.jsonl")); !os.IsNotExist(err) {
			t.Errorf("--report %s: the run wrote its output: %v", tc.path, err)
		}
	}
	rep := filepath.Join(dir, "new", "dir", "r.json")
	if r := run(t, "apply", "--report", rep, p); r.code != 0 {
		t.Errorf("--report in a new directory: %s", r)
	} else if _, err := os.Stat(rep); err != nil {
		t.Errorf("no report: %v", err)
	}
}

// TestApplyReportReplacesOnlyAReport: a report replaces the file it
// names, so a file holding anything else is refused before the run (an
// adversarial test: --report named an input the run read, which held the
// report afterwards); an earlier report and an empty file are replaced,
// and a link is followed to its target and kept, as a sink's is.
func TestApplyReportReplacesOnlyAReport(t *testing.T) {
	dir := t.TempDir()
	p := writeSpec(t, dir, "small.yaml", smallSpec)
	data := filepath.Join(dir, "data.jsonl")
	if err := os.WriteFile(data, []byte(`{"x": 1}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r := run(t, "apply", "--report", data, p)
	if want := "--report " + data + " holds something other than a piperun report, and a report replaces the file it names: name a new file, or remove this one"; r.code != 2 || !strings.Contains(r.stderr, want) {
		t.Errorf("--report over data: %s\nwant exit 2 and %q", r, want)
	}
	if b, _ := os.ReadFile(data); string(b) != `{"x": 1}`+"\n" {
		t.Errorf("the data file now holds %q", b)
	}
	empty, target, link := filepath.Join(dir, "empty.json"), filepath.Join(dir, "target.json"), filepath.Join(dir, "link.json")
	for _, f := range []string{empty, target} {
		if err := os.WriteFile(f, nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("target.json", link); err != nil {
		t.Skip("no symlinks here:", err)
	}
	for _, path := range []string{empty, empty, link, link} { // the second time over a report
		if r := run(t, "apply", "--report", path, p); r.code != 0 {
			t.Fatalf("--report %s: %s", path, r)
		}
	}
	if fi, err := os.Lstat(link); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Errorf("the link was replaced: %v, %v", fi.Mode(), err)
	}
	for _, f := range []string{empty, target} {
		var rep map[string]any
		if b, err := os.ReadFile(f); err != nil || json.Unmarshal(b, &rep) != nil || rep["ok"] != true {
			t.Errorf("%s holds no report of a run that went well: %v", f, err)
		}
	}
}

func TestApplyReport(t *testing.T) {
	dir := t.TempDir()
	p := writeSpec(t, dir, "small.yaml", smallSpec)
	reportPath := filepath.Join(dir, "report.json")
	r := run(t, "apply", "--report", reportPath, p)
	if r.code != 0 {
		t.Fatalf("apply: %s", r)
	}
	b, err := os.ReadFile(reportPath)
	if err != nil {
		t.Fatal(err)
	}
	var rep map[string]json.RawMessage
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatalf("%v\n%s", err, b)
	}
	// DESIGN.md §3 requires these keys; the engine adds seed and stages,
	// apply adds gpu (the NVML monitor, --gpu auto), and skip_causes, error
	// and extra come when they have content. Anything else is a rename or
	// an undocumented addition.
	var keys []string
	for k := range rep {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	if got, want := strings.Join(keys, ","), "elapsed_s,gpu,memory_budget_bytes,ok,peak_memory_bytes,seed,sinks,skipped,stages"; got != want {
		t.Errorf("report keys %s, want %s", got, want)
	}
	var got struct {
		OK      bool    `json:"ok"`
		Elapsed float64 `json:"elapsed_s"`
		Sinks   map[string]map[string]any
		Skipped map[string]int64 `json:"skipped"`
		Peak    int64            `json:"peak_memory_bytes"`
		Budget  int64            `json:"memory_budget_bytes"`
		Seed    uint64           `json:"seed"`
		Stages  map[string]map[string]int64
		Error   string `json:"error"`
	}
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	if !got.OK || got.Error != "" {
		t.Errorf("ok %v, error %q; want ok true and no error", got.OK, got.Error)
	}
	if got.Elapsed <= 0 {
		t.Errorf("elapsed_s %v, want > 0", got.Elapsed)
	}
	sink := map[string]float64{}
	for k, v := range got.Sinks["out"] {
		if f, ok := v.(float64); ok {
			sink[k] = f
		}
	}
	if out := sink; len(got.Sinks) != 1 || out["samples"] != 10 || out["batches"] != 3 || out["epochs"] != 1 ||
		out["waited_share"] < 0 || out["waited_share"] > 1 || out["waited_s"] < 0 || out["waited_s"] > out["active_s"] ||
		out["active_s"] <= 0 || out["active_s"] > got.Elapsed || len(out) != 6 || got.Sinks["out"]["committed"] != true || len(got.Sinks["out"]) != 7 {
		t.Errorf("sinks %v, want out: 10 samples in 3 batches, 1 epoch, its wait, committed", got.Sinks)
	}
	if got.Skipped == nil || len(got.Skipped) != 0 {
		t.Errorf("skipped %v, want {}", got.Skipped)
	}
	if got.Budget != 16<<20 {
		t.Errorf("memory_budget_bytes %d, want %d", got.Budget, 16<<20)
	}
	if got.Peak <= 0 || got.Peak > got.Budget {
		t.Errorf("peak_memory_bytes %d, want in (0, %d]", got.Peak, got.Budget)
	}
	if got.Seed != 7 {
		t.Errorf("seed %d, want 7", got.Seed)
	}
	wantStages := map[string]map[string]int64{"src": {"in": 0, "out": 10}, "sq": {"in": 10, "out": 10}, "batch": {"in": 10, "out": 3}}
	for name, w := range wantStages {
		if g := got.Stages[name]; g["in"] != w["in"] || g["out"] != w["out"] || g["bytes"] <= 0 || len(g) != 3 {
			t.Errorf("stages.%s = %v, want %v", name, g, w)
		}
	}
	out, err := os.ReadFile(filepath.Join(dir, "out", "small.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "apply_small.jsonl", string(out))
	// Only the committed output and the report: no temporary files left.
	assertFiles(t, filepath.Join(dir, "out"), "small.jsonl")
	if !strings.Contains(r.stderr, "done in ") || !strings.Contains(r.stderr, "out: 10 samples in 3 batches") {
		t.Errorf("summary missing from stderr:\n%s", r.stderr)
	}
}

// TestApplyGPU: the report's gpu key. Without an NVIDIA driver (CI's
// machines) it says the GPUs could not be watched and why, and the run
// goes on; with one (bench/gpu_check.sh runs this test on a GPU machine)
// it lists the devices it read; --gpu off says it did not watch; any other
// mode is a usage error.
// (gpu/'s tests read a mock DGX H200 through the same NVML adapter.)
func TestApplyGPU(t *testing.T) {
	src, openErr := gpu.Open()
	wantAuto := ""
	if openErr == nil {
		src.Close()
	} else {
		why, _ := json.Marshal(openErr.Error()) // no driver, or a build without cgo
		wantAuto = `{"available":false,"why":` + string(why) + `,"starving":false}`
	}
	dir := t.TempDir()
	p := writeSpec(t, dir, "small.yaml", smallSpec)
	for _, tc := range []struct {
		mode string
		want string
	}{
		{"auto", wantAuto},
		{"off", `{"available":false,"why":"not watched (--gpu off)","starving":false}`},
	} {
		reportPath := filepath.Join(dir, tc.mode+".json")
		if r := run(t, "apply", "--progress", "never", "--gpu", tc.mode, "--report", reportPath, p); r.code != 0 {
			t.Fatalf("--gpu %s: %s", tc.mode, r)
		}
		b, err := os.ReadFile(reportPath)
		if err != nil {
			t.Fatal(err)
		}
		var rep map[string]json.RawMessage
		if err := json.Unmarshal(b, &rep); err != nil {
			t.Fatal(err)
		}
		var compact bytes.Buffer
		if rep["gpu"] != nil {
			if err := json.Compact(&compact, rep["gpu"]); err != nil {
				t.Fatal(err)
			}
		}
		if tc.want == "" { // a real GPU: what it read, not fixed figures
			var got gpu.Summary
			if err := json.Unmarshal(rep["gpu"], &got); err != nil {
				t.Fatal(err)
			}
			t.Logf("--gpu auto on a GPU machine: %s", compact.String())
			if !got.Available || len(got.Devices) == 0 || got.Devices[0].Readings == 0 || got.Devices[0].Name == "" || got.Verdict == "" {
				t.Errorf("--gpu auto with a driver: gpu = %s", compact.String())
			}
			continue
		}
		if got := compact.String(); got != tc.want {
			t.Errorf("--gpu %s: gpu = %s, want %s", tc.mode, got, tc.want)
		}
	}
	if r := run(t, "apply", "--gpu", "on", p); r.code != 2 || !strings.Contains(r.stderr, "--gpu must be auto or off, got \"on\"") {
		t.Errorf("--gpu on: %s\nwant exit 2 and the modes", r)
	}
}

// TestEmptySinkWarns: a run whose sink gets nothing succeeds, as tf.data's
// empty dataset does, but says so (an empty
// TFRecord file gave "out: 0 samples" and nothing else).
func TestEmptySinkWarns(t *testing.T) {
	p := writeSpec(t, t.TempDir(), "empty.yaml", `version: 1
name: empty
stages:
  - {name: r, type: range, count: 5}
  - {name: f, type: filter, where: 'index > 10'}
  - {name: out, type: discard}
  - {name: all, type: discard, input: r}
`)
	r := run(t, "apply", "--progress", "never", "--gpu", "off", p)
	if r.code != 0 || !strings.Contains(r.stderr, `sink "out" got no samples`) || strings.Contains(r.stderr, `sink "all" got no samples`) {
		t.Errorf("got %s\nwant exit 0 and a warning for out alone", r)
	}
	// In JSON logs too (the warning came after the JSON
	// summary's return).
	r = run(t, "--log-format", "json", "apply", "--progress", "never", "--gpu", "off", p)
	if r.code != 0 || !strings.Contains(r.stderr, `"msg":"sink \"out\" got no samples"`) {
		t.Errorf("json: got %s\nwant exit 0 and the warning", r)
	}
	// Every sample skipped: the warning says so, and comes before the
	// summary, which stays the last line.
	p = writeSpec(t, t.TempDir(), "skipped.yaml", `version: 1
name: skipped
stages:
  - {name: r, type: range, count: 5}
  - {name: m, type: map, on_error: skip, set: {x: 'int(string(index) + "x")'}}
  - {name: out, type: discard}
`)
	r = run(t, "apply", "--progress", "never", "--gpu", "off", p)
	lines := strings.Split(strings.TrimSpace(r.stderr), "\n")
	if r.code != 0 || !strings.Contains(r.stderr, `sink "out" got no samples (samples were skipped`) ||
		!strings.HasPrefix(lines[len(lines)-1], "done in ") || !strings.Contains(lines[len(lines)-1], "skipped 5 in m") {
		t.Errorf("every sample skipped: got %s\nwant exit 0, the warning saying samples were skipped, then the summary with the 5 skips last", r)
	}
}

func TestApplyFailureReport(t *testing.T) {
	// A run that fails writes a report with ok false and the error, and
	// commits no output. 10/(index-5) is +Inf for sample 5, which JSON
	// cannot hold, so the sink fails on it.
	dir := t.TempDir()
	p := writeSpec(t, dir, "fail.yaml", `version: 1
name: fail
resources: {memory: 16MiB}
stages:
  - {name: src, type: range, count: 10}
  - {name: m, type: map, set: {y: '10 / (index - 5)'}}
  - {name: out, type: write_jsonl, path: out/fail.jsonl}
  - {name: all, type: write_jsonl, input: src, path: out/all.jsonl}
`)
	reportPath := filepath.Join(dir, "report.json")
	r := run(t, "apply", "--report", reportPath, p)
	if r.code != 1 {
		t.Fatalf("apply: %s\nwant exit 1", r)
	}
	got, b := readReport(t, reportPath)
	const want = `stage "out" (write_jsonl): sample 5 (epoch 0): field "y": +Inf cannot be written as JSON`
	if got.OK == nil || *got.OK || got.Error != want {
		t.Errorf("report %s: want ok false and error %q", b, want)
	}
	// A sink's samples were received, not put anywhere: committed says
	// so (the report of a stopped run read as
	// if its samples were written).
	if len(got.Sinks) != 2 {
		t.Errorf("report %s: want both sinks", b)
	}
	for name, s := range got.Sinks {
		if s.Committed == nil || *s.Committed {
			t.Errorf("report %s: sink %s of a failed run is committed or does not say", b, name)
		}
	}
	if !strings.Contains(r.stderr, "piperun: "+want+"\n") {
		t.Errorf("stderr lacks the error:\n%s", r.stderr)
	}
	// Nor the directory the sinks made for them (found by a new-user
	// test: an interrupted run left it, empty); one that was there before,
	// empty, stays.
	if _, err := os.Stat(filepath.Join(dir, "out")); !os.IsNotExist(err) {
		t.Errorf("the failed run left its new output directory: %v", err)
	}
	if err := os.Mkdir(filepath.Join(dir, "out"), 0o755); err != nil {
		t.Fatal(err)
	}
	if r := run(t, "apply", p); r.code != 1 {
		t.Fatalf("apply: %s\nwant exit 1", r)
	}
	if st, err := os.Stat(filepath.Join(dir, "out")); err != nil || !st.IsDir() {
		t.Errorf("the failed run removed the output directory that was there before it: %v", err)
	}
	assertFiles(t, filepath.Join(dir, "out"))
	// The same sink, in a run that succeeds, is committed.
	p = writeSpec(t, dir, "ok.yaml", `version: 1
name: ok
stages:
  - {name: src, type: range, count: 10}
  - {name: all, type: write_jsonl, path: out/all.jsonl}
`)
	if r := run(t, "apply", "--report", reportPath, p); r.code != 0 {
		t.Fatalf("apply: %s", r)
	}
	if got, b := readReport(t, reportPath); got.Sinks["all"].Samples != 10 || got.Sinks["all"].Committed == nil || !*got.Sinks["all"].Committed {
		t.Errorf("report %s: want sink all committed with 10 samples", b)
	}
}

// assertFiles checks that dir holds exactly the named files (a missing dir
// holds none).
func assertFiles(t *testing.T, dir string, want ...string) {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	var got []string
	for _, e := range ents {
		got = append(got, e.Name())
	}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("%s holds %v, want %v", dir, got, want)
	}
}

const slowSpec = `version: 1
name: slow
seed: 1
resources:
  memory: 16MiB
stages:
  - {name: src, type: range, count: 1000000000}
  - name: twice
    type: map
    set:
      twice: 'index * 2'
  - {name: out, type: write_tfrecord, path: out/slow.tfrecord}
`

// TestApplySignals: SIGINT, SIGTERM and SIGHUP (a closed terminal, which
// ended the run at once, its temporary files left) stop
// a run: it says so at once, commits nothing, and exits 1.
func TestApplySignals(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP} {
		t.Run(sig.String(), func(t *testing.T) {
			dir := t.TempDir()
			p := writeSpec(t, dir, "slow.yaml", slowSpec)
			outDir := filepath.Join(dir, "out")
			var stdout, stderr bytes.Buffer
			cmd := exec.Command(binary, "apply", "--progress", "never", p)
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			exited := start(t, cmd).exited

			// Wait until the sink has its temporary file, so the signal
			// lands mid-write.
			deadline := time.Now().Add(30 * time.Second)
			for {
				tmps, _ := filepath.Glob(filepath.Join(outDir, ".slow.tfrecord.tmp-*"))
				if len(tmps) > 0 {
					break
				}
				select {
				case err := <-exited:
					t.Fatalf("piperun exited before it was signalled: %v\n%s", err, stderr.String())
				default:
				}
				if time.Now().After(deadline) {
					t.Fatalf("no temporary output in %s after 30s\n%s", outDir, stderr.String())
				}
				time.Sleep(10 * time.Millisecond)
			}
			if err := cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			select {
			case <-exited:
			case <-time.After(5 * time.Second):
				t.Fatalf("piperun did not exit within 5s of %v\n%s", sig, stderr.String())
			}
			if code := cmd.ProcessState.ExitCode(); code != 1 {
				t.Errorf("exit code %d, want 1\n%s", code, stderr.String())
			}
			said := regexp.MustCompile(`WARN\tinterrupted: stopping \(interrupt again to quit at once; the next run removes the temporary files left\)\n` +
				`.*INFO\tbefore the stop, sink "out" had received \d+ samples \(0 whole epochs\)\n` +
				`piperun: interrupted at (\d+\.\d)s, stopped at (\d+\.\d)s; no output was committed\n`).FindStringSubmatch(stderr.String())
			if said == nil {
				t.Errorf("stderr does not say it was interrupted:\n%s", stderr.String())
			} else if parseFloat(said[1]) > parseFloat(said[2]) {
				// One clock for both (a cache operator saw "interrupted at
				// 1.5s, stopped at 1.4s").
				t.Errorf("stopped before it was interrupted: %s", said[0])
			}
			if _, err := os.Stat(filepath.Join(outDir, "slow.tfrecord")); !os.IsNotExist(err) {
				t.Errorf("output file exists after %v: %v", sig, err)
			}
			assertFiles(t, outDir)
		})
	}
}

// TestApplyUnderNohup: a run started with SIGHUP ignored (nohup) keeps
// running when its terminal goes; piperun's handler for SIGHUP had undone
// nohup's ignoring it.
func TestApplyUnderNohup(t *testing.T) {
	nohup, err := exec.LookPath("nohup")
	if err != nil {
		t.Skip("no nohup")
	}
	dir := t.TempDir()
	p := writeSpec(t, dir, "slow.yaml", slowSpec)
	var stderr syncBuffer
	cmd := exec.Command(nohup, binary, "apply", "--progress", "never", p)
	cmd.Stdout, cmd.Stderr = &stderr, &stderr
	exited := start(t, cmd).exited
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if tmps, _ := filepath.Glob(filepath.Join(dir, "out", ".slow.tfrecord.tmp-*")); len(tmps) > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no temporary output after 30 s:\n%s", stderr.String())
		}
	}
	if err := cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		t.Fatalf("exited on SIGHUP under nohup (%v):\n%s", err, stderr.String())
	case <-time.After(time.Second):
	}
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case <-exited:
	case <-time.After(10 * time.Second):
		t.Fatalf("still running 10 s after SIGINT:\n%s", stderr.String())
	}
	if code := cmd.ProcessState.ExitCode(); code != 1 || !strings.Contains(stderr.String(), "no output was committed") {
		t.Errorf("exit %d, want 1 and the interrupt's message:\n%s", code, stderr.String())
	}
}

// syncBuffer is a bytes.Buffer a process writes while a test reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// started is a piperun process a test signals, and the result of its
// Wait once it ends.
type started struct {
	cmd    *exec.Cmd
	exited chan error
	done   chan struct{}
}

// start starts cmd, which is killed when the test ends if it still runs.
func start(t *testing.T, cmd *exec.Cmd) *started {
	t.Helper()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s := &started{cmd: cmd, exited: make(chan error, 1), done: make(chan struct{})}
	go func() {
		err := cmd.Wait()
		s.exited <- err
		close(s.done)
	}()
	t.Cleanup(func() {
		select {
		case <-s.done:
		default:
			_ = cmd.Process.Kill()
			<-s.done
		}
	})
	return s
}

// TestApplyWarnsOfAnEmptyShard: a data-parallel rank whose shard of the
// files is empty is told so, once (found by the tester: it ran with no
// data and no word, which would leave the other ranks waiting for it).
func TestApplyWarnsOfAnEmptyShard(t *testing.T) {
	p := shardSpec(t, 1)
	t.Setenv("RANK", "3")
	t.Setenv("WORLD_SIZE", "4")
	r := run(t, "apply", "--progress", "never", p)
	want := "shard 3 of 4 gets no files: the 1 files matched all go to other shards (sharding is by file), so this process emits no samples"
	if r.code != 0 || strings.Count(r.stderr, want) != 1 || strings.Contains(r.stderr, "has no files") {
		t.Errorf("apply: %s\nwant exit 0 and %q once", r, want)
	}
	// Files that do not divide into the shards put DDP ranks out of
	// step, said once; a take of the smaller shards' count evens them (a
	// new-user test's DDP job, told the ranks would wait at the end,
	// averaged two epochs' gradients, then failed).
	p = shardSpec(t, 5)
	t.Setenv("RANK", "1")
	t.Setenv("WORLD_SIZE", "2")
	r = run(t, "apply", "--progress", "never", p)
	if want := "the 5 files matched do not divide into 2 shards: shard 0 gets 3 files, the others 2 (this one, 1: 2), so the ranks see different numbers of samples an epoch: ranks that step together (DDP) fall out of step"; r.code != 0 || strings.Count(r.stderr, want) != 1 {
		t.Errorf("apply, 5 files in 2 shards: %s\nwant exit 0 and %q once", r, want)
	}
	body, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	p = writeSpec(t, filepath.Dir(p), "take.yaml", strings.Replace(string(body), "  - {name: out", "  - {name: even, type: take, count: 2}\n  - {name: out", 1))
	if r = run(t, "apply", "--progress", "never", p); r.code != 0 || strings.Contains(r.stderr, "do not divide") || !strings.Contains(r.stderr, "out: 2 samples") {
		t.Errorf("apply with a take of 2: %s\nwant exit 0, 2 samples and no warning", r)
	}
}

// TestApplyJSONLogsAreAllJSON: with --log-format json every line apply
// writes to stderr is a JSON object, the final summary too (found by the
// tester: it was plain text).
func TestApplyJSONLogsAreAllJSON(t *testing.T) {
	dir := t.TempDir()
	p := writeSpec(t, dir, "small.yaml", smallSpec)
	r := run(t, "--log-format", "json", "apply", "--progress", "never", p)
	if r.code != 0 {
		t.Fatalf("apply: %s", r)
	}
	lines := strings.Split(strings.TrimSpace(r.stderr), "\n")
	for _, l := range lines {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Errorf("not JSON: %q", l)
		}
	}
	if last := lines[len(lines)-1]; !strings.Contains(last, `"msg":"done in `) || !strings.Contains(last, `"peak_memory_bytes":`) {
		t.Errorf("last line %q, want the summary", last)
	}
	// So are the problems of an invalid spec and the error of a failed run
	// (found by the re-test: they were plain text).
	bad := writeSpec(t, dir, "bad.yaml", strings.Replace(smallSpec, "size: 4", "size: 0", 1))
	fails := writeSpec(t, dir, "fails.yaml", strings.Replace(smallSpec, "'index * index'", "'index / (index - 3)'", 1))
	for _, args := range [][]string{{"apply", bad}, {"apply", fails}, {"apply", "--bogus", bad}, {"validate", bad}, {"bench", p}} {
		f := args[len(args)-1]
		r := run(t, append([]string{"--log-format", "json"}, args...)...)
		for _, l := range strings.Split(strings.TrimSpace(r.stderr), "\n") {
			var m map[string]any
			if err := json.Unmarshal([]byte(l), &m); err != nil {
				t.Errorf("%s: not JSON: %q", filepath.Base(f), l)
			}
		}
		if r.code == 0 || args[0] != "validate" && !strings.Contains(r.stderr, `"level":"error"`) {
			t.Errorf("%v: %s\nwant a failure logged as an error", args, r)
		}
	}
}

// TestShardAutoSaysWhichShard: shard: auto logs which shard the process
// reads and from which variables, or that none was set and it reads all:
// a job whose every rank reads every file otherwise looks fine (found by
// a new-user test: shard: auto logged nothing).
func TestShardAutoSaysWhichShard(t *testing.T) {
	p := shardSpec(t, 5)
	for _, k := range []string{"PIPERUN_SHARD_INDEX", "PIPERUN_SHARD_COUNT", "RANK", "WORLD_SIZE", "SLURM_PROCID", "SLURM_NTASKS", "JOB_COMPLETION_INDEX"} {
		t.Setenv(k, "") // restored after the test
		os.Unsetenv(k)
	}
	r := run(t, "apply", "--progress", "never", "--gpu", "off", p)
	if want := "shard: auto: this process reads shard 0 of 1 (none of PIPERUN_SHARD_INDEX, RANK, SLURM_PROCID or JOB_COMPLETION_INDEX is set, so one shard): 5 of the 5 files matched"; r.code != 0 || !strings.Contains(r.stderr, want) {
		t.Errorf("no launcher variables: %s\nwant %q", r, want)
	}
	t.Setenv("RANK", "1")
	t.Setenv("WORLD_SIZE", "2")
	r = run(t, "apply", "--progress", "never", "--gpu", "off", p)
	if want := "shard: auto: this process reads shard 1 of 2 (RANK and WORLD_SIZE): 2 of the 5 files matched"; r.code != 0 || !strings.Contains(r.stderr, want) || !strings.Contains(r.stderr, "out: 2 samples") {
		t.Errorf("RANK=1 WORLD_SIZE=2: %s\nwant %q and 2 samples", r, want)
	}
}

// shardSpec writes n small files and a spec that lists them with shard:
// auto into a discard, and returns the spec's path.
func shardSpec(t *testing.T, n int) string {
	t.Helper()
	dir := t.TempDir()
	for i := range n {
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("f%d.txt", i)), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return writeSpec(t, dir, "shard.yaml", `version: 1
name: shard
stages:
  - {name: files, type: files, pattern: '*.txt', shard: auto}
  - {name: out, type: discard}
`)
}

// TestBatchWarnsOfAChangingDType: a jsonl key holding integers in one
// batch and other numbers in another is batched as int64, then float64:
// the run says so once, with the fix (one file
// held the key as both int64_list and float_list without a word).
func TestBatchWarnsOfAChangingDType(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "d.jsonl"), []byte("{\"k\": 1}\n{\"k\": 2}\n{\"k\": 2.5}\n{\"k\": 3}\n{\"k\": 4}\n{\"k\": 5}\n{\"k\": 6.5}\n{\"k\": 7}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	p := writeSpec(t, dir, "j.yaml", `version: 1
name: j
stages:
  - {name: files, type: files, pattern: d.jsonl}
  - {name: lines, type: jsonl}
  - {name: b, type: batch, size: 2}
  - {name: out, type: discard}
`)
	r := run(t, "apply", "--progress", "never", p)
	want := `field "k" was batched as int64 before, and as float64 in batch 1 (epoch 0) of ` + filepath.Join(dir, "d.jsonl") + `:3`
	if r.code != 0 || !strings.Contains(r.stderr, want) || strings.Count(r.stderr, `field "k" was batched as`) != 1 || !strings.Contains(r.stderr, "set it with float(x) in a map") {
		t.Errorf("apply: %s\nwant exit 0 and one warning: %s…", r, want)
	}
}

// TestWriteTFRecordWarnsOfMixedKinds: a jsonl key holding 1 in one line
// and 2.5 in another is written as int64_list in one record and float_list
// in the other, which a reader declaring one dtype fails on; the sink says
// so once, naming both records (it was silent).
// An empty list (no kind) and a key that keeps its kind say nothing. With
// shards, the records are numbered within their file, as inspect does; a
// list's advice is map(x, float(#)), since float(x) refuses a list.
func TestWriteTFRecordWarnsOfMixedKinds(t *testing.T) {
	for _, tc := range []struct {
		name, lines, path string
		shards            int
		want              func(dir, src string) string
	}{
		{
			name:  "scalars",
			lines: "{\"k\": 1, \"s\": \"a\", \"l\": []}\n{\"k\": 2, \"s\": \"b\", \"l\": [1.5]}\n{\"k\": 2.5, \"s\": \"c\", \"l\": [2.5]}\n{\"k\": 3.5, \"s\": \"d\", \"l\": []}\n",
			path:  "out/d.tfrecord", shards: 1,
			want: func(dir, src string) string {
				return `field "k" is written as int64_list in record 0 (` + src + `:1) and as float_list in record 2 (` + src + `:3), so the output mixes kinds for one key: its values are integers in some samples and other numbers in others (a jsonl key, say); for one kind, set it with float(x) in a map`
			},
		},
		{
			name:  "a list in shards",
			lines: "{\"l\": [1, 2]}\n{\"l\": [3]}\n{\"l\": [4]}\n{\"l\": [1.5]}\n",
			path:  "out/d-{shard}.tfrecord", shards: 2,
			want: func(dir, src string) string {
				return `field "l" is written as int64_list in record 0 of ` + filepath.Join(dir, "out", "d-00000.tfrecord") + ` (` + src + `:1) and as float_list in record 1 of ` + filepath.Join(dir, "out", "d-00001.tfrecord") + ` (` + src + `:4), so the output mixes kinds for one key: its values are integers in some samples and other numbers in others (a jsonl key, say); for one kind, set it with map(x, float(#)) in a map`
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "d.jsonl"), []byte(tc.lines), 0o644); err != nil {
				t.Fatal(err)
			}
			p := writeSpec(t, dir, "j.yaml", fmt.Sprintf(`version: 1
name: j
stages:
  - {name: files, type: files, pattern: d.jsonl}
  - {name: lines, type: jsonl}
  - {name: out, type: write_tfrecord, path: '%s', shards: %d}
`, tc.path, tc.shards))
			r := run(t, "apply", "--progress", "never", p)
			want := tc.want(dir, filepath.Join(dir, "d.jsonl"))
			if r.code != 0 || !strings.Contains(r.stderr, want) || strings.Count(r.stderr, "mixes kinds") != 1 {
				t.Errorf("apply: %s\nwant exit 0 and one warning: %s", r, want)
			}
			if _, err := os.Stat(filepath.Join(dir, stages.ShardPath(tc.path, 0, tc.shards))); err != nil {
				t.Errorf("the file is still written: %v", err)
			}
		})
	}
}

// TestApplyFailureSaysHowToSkip: a run stopped by one bad sample in a
// stage that takes on_error says how to skip such samples; one stopped in
// a stage that cannot skip (a sink) does not.
func TestApplyFailureSaysHowToSkip(t *testing.T) {
	const hint = `to skip such samples and count them in the report instead of stopping, set on_error: skip on stage "m"`
	for _, tc := range []struct {
		name, stage string
		hint        bool
	}{
		{"map", `{name: m, type: map, set: {v: 'one_hot(index, 3)'}}`, true},
		{"sink", `{name: m, type: map, set: {v: 'index == 4 ? 1.0 / 0 : 1.0'}}`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			p := writeSpec(t, dir, "s.yaml", `version: 1
name: s
stages:
  - {name: src, type: range, count: 6}
  - `+tc.stage+`
  - {name: out, type: write_jsonl, path: out.jsonl}
`)
			r := run(t, "apply", "--progress", "never", p)
			if r.code != 1 || strings.Contains(r.stderr, hint) != tc.hint {
				t.Errorf("apply: %s\nwant exit 1, hint %v", r, tc.hint)
			}
		})
	}
}

// TestApplySaysARandomSeed: a spec with no seed runs with one drawn for the
// run, which the summary line and the report give, under --log-level warn
// too, where the starting line is not printed; setting it repeats the run
// (the seed could vanish). A set seed is not repeated.
func TestApplySaysARandomSeed(t *testing.T) {
	dir := t.TempDir()
	file := writeSpec(t, dir, "s.yaml", `version: 1
name: s
stages:
  - {name: src, type: range, count: 20}
  - {name: sh, type: shuffle, buffer: 20}
  - {name: out, type: write_jsonl, path: out.jsonl}
`)
	seedOf := regexp.MustCompile(`; random seed (\d+) \(--set seed=(\d+) repeats the run\)\n$`)
	r := run(t, "--log-level", "warn", "apply", file, "--report", filepath.Join(dir, "r.json"))
	m := seedOf.FindStringSubmatch(r.stderr)
	if r.code != 0 || m == nil || m[1] != m[2] {
		t.Fatalf("got %s\nwant the summary to end with the random seed", r)
	}
	var rep struct {
		Seed       uint64 `json:"seed"`
		SeedRandom bool   `json:"seed_random"`
	}
	b, err := os.ReadFile(filepath.Join(dir, "r.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(rep.Seed) != m[1] || !rep.SeedRandom {
		t.Errorf("report seed %d, seed_random %v; want %s, true", rep.Seed, rep.SeedRandom, m[1])
	}
	first, err := os.ReadFile(filepath.Join(dir, "out.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	r = run(t, "--log-level", "warn", "apply", file, "--set", "seed="+m[1])
	again, err := os.ReadFile(filepath.Join(dir, "out.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	if r.code != 0 || strings.Contains(r.stderr, "random seed") || string(again) != string(first) {
		t.Errorf("rerun with --set seed=%s: %s\nsame output: %v", m[1], r, string(again) == string(first))
	}
	// A failed run says it too: it is the one most worth repeating.
	bad := writeSpec(t, dir, "bad.yaml", `version: 1
name: bad
stages:
  - {name: src, type: range, count: 20}
  - {name: sh, type: shuffle, buffer: 4}
  - {name: m, type: map, set: {v: 'one_hot(index, 5)'}}
  - {name: out, type: discard}
`)
	r = run(t, "--log-level", "warn", "apply", bad)
	if r.code != 1 || !regexp.MustCompile(`random seed (\d+) \(--set seed=(\d+) repeats the run\)`).MatchString(r.stderr) {
		t.Errorf("a failed run: %s\nwant exit 1 and the random seed", r)
	}
	// Nothing random: the seed draws nothing, and is not named (a
	// newcomer test found the line noise).
	plain := writeSpec(t, dir, "plain.yaml", `version: 1
name: plain
stages:
  - {name: src, type: range, count: 20}
  - {name: out, type: discard}
`)
	if r = run(t, "--log-level", "warn", "apply", plain); r.code != 0 || strings.Contains(r.stderr, "seed") {
		t.Errorf("nothing random: %s\nwant no seed named", r)
	}
}

// TestApplyInterruptSaidBeforeItReturns: a run cancelled as it starts
// has printed its "interrupted: stopping" line by the time Run returns.
// The line was printed from the context's AfterFunc, which Run did not
// wait for: it could come after Run returned, racing with the caller's
// read of stderr (CI's race detector found it in a serve test). It shows
// on a busy host, as CI's is: with three busy loops beside it, repeated
// for 160 s this test failed 28 times before the fix, and none in 100 s
// after.
func TestApplyInterruptSaidBeforeItReturns(t *testing.T) {
	dir := t.TempDir()
	p := writeSpec(t, dir, "s.yaml", strings.Replace(smallSpec, "count: 10", "count: 100000", 1))
	for i := range 40 {
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(time.Duration(i%8)*time.Millisecond, cancel)
		var out, errb strings.Builder
		code := cli.Run(ctx, []string{"apply", "--progress", "never", "--gpu", "off", p}, &out, &errb)
		if code != 1 || !strings.Contains(errb.String(), "interrupted: stopping") {
			t.Fatalf("run %d: exit %d, stderr:\n%s\nwant exit 1 and the interrupted line", i, code, errb.String())
		}
	}
}

// TestApplyLateInterruptIsExplained: an interrupt as a run finishes, after
// the engine's last step but before apply reads whether it came, leaves a
// run that exits 0; its "interrupted: stopping" line must then come with
// the note that the run finished whole, and before the summary. apply
// waited for the line only as it returned, so it could follow the summary
// with no note (5 of 300 runs cancelled at 0.5–2× a run's time).
func TestApplyLateInterruptIsExplained(t *testing.T) {
	dir := t.TempDir()
	p := writeSpec(t, dir, "s.yaml", smallSpec)
	args := []string{"apply", "--progress", "never", "--gpu", "off", p}
	t0 := time.Now()
	if code := cli.Run(context.Background(), args, io.Discard, io.Discard); code != 0 {
		t.Fatalf("exit %d", code)
	}
	d := time.Since(t0)
	for i := range 300 {
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(time.Duration(float64(d)*(0.5+float64(i%60)/40)), cancel)
		var errb strings.Builder
		code := cli.Run(ctx, args, io.Discard, &errb)
		cancel()
		s := errb.String()
		stop := strings.Index(s, "interrupted: stopping")
		if code != 0 || stop < 0 {
			continue
		}
		note, done := strings.Index(s, "were being committed"), strings.Index(s, "done in")
		if note < stop || done < note {
			t.Fatalf("run %d exited 0, stderr:\n%s\nwant the interrupted line, then the note that the run finished whole, then the summary", i, s)
		}
	}
}

// parseFloat is strconv.ParseFloat of a number a regexp matched.
func parseFloat(s string) float64 {
	f, _ := strconv.ParseFloat(s, 64)
	return f
}
