package engine_test

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/piperun/piperun/engine"
	"github.com/piperun/piperun/plan"
	"github.com/piperun/piperun/spec"
	"github.com/piperun/piperun/stages"
)

// startParsed plans and starts a spec parsed by parseSpec.
func startParsed(t *testing.T, sp *spec.Spec) (*engine.Run, error) {
	t.Helper()
	p, err := plan.Compile(sp, stages.Default(), plan.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return engine.Start(context.Background(), p, engine.Options{Registry: stages.Default()})
}

// leftovers lists the files in dir: outputs and hidden temporaries alike.
func leftovers(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		if e.Name() != "spec.yaml" && !e.IsDir() {
			out = append(out, e.Name())
		}
	}
	return out
}

// TestFailedCommitLeavesNoOutput: when one sink cannot commit (a shard's
// final name became a directory after validate), no sink's files are
// renamed into place, and no temporary is left. Found in review: the
// shards were renamed one by one, so shard 0 and the other sink's file
// stayed, beside the error.
func TestFailedCommitLeavesNoOutput(t *testing.T) {
	dir := t.TempDir()
	sp := parseSpec(t, dir, `
version: 1
name: shards
stages:
  - {name: src, type: range, count: 300000}
  - {name: a, type: write_jsonl, path: a.jsonl}
  - {name: out, type: write_tfrecord, input: src, path: 'out-{shard}-of-{shards}.tfrecord', shards: 2}
`)
	run, err := startParsed(t, sp)
	if err != nil {
		t.Fatal(err)
	}
	// After the sinks opened their files (a directory there before is
	// refused when they do), while the run writes 300000 samples.
	if err := os.Mkdir(filepath.Join(dir, "out-00001-of-00002.tfrecord"), 0o755); err != nil {
		t.Fatal(err)
	}
	select {
	case <-run.Done():
		t.Skip("the run ended before the directory was made")
	default:
	}
	rep, err := run.Wait()
	want := `stage "out" (write_tfrecord): commit: ` + filepath.Join(dir, "out-00001-of-00002.tfrecord") + ` is a directory`
	if err == nil || err.Error() != want {
		t.Fatalf("err = %v, want %s", err, want)
	}
	if rep.OK {
		t.Error("report says ok")
	}
	if got := leftovers(t, dir); len(got) != 0 {
		t.Errorf("a failed commit left %v", got)
	}
}

// TestFailedBuildLeavesNoTemporaries: a stage that cannot be built (serve
// on a port in use) fails Start, and the sinks built before it remove the
// temporaries they had opened. Found in review.
func TestFailedBuildLeavesNoTemporaries(t *testing.T) {
	dir := t.TempDir()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	_, err = startParsed(t, parseSpec(t, dir, `
version: 1
name: leak
stages:
  - {name: src, type: range, count: 2}
  - {name: out, type: write_jsonl, path: out.jsonl}
  - {name: srv, type: serve, input: src, listen: 'tcp://`+ln.Addr().String()+`'}
`))
	if err == nil || !strings.Contains(err.Error(), `stage "srv" (serve)`) {
		t.Fatalf("err = %v, want serve failing to listen", err)
	}
	if got := leftovers(t, dir); len(got) != 0 {
		t.Errorf("a failed start left %v", got)
	}
}
