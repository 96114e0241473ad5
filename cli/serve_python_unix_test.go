//go:build unix

package cli_test

import (
	"context"
	"fmt"
	"net"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"

	"github.com/piperun/piperun/serve"
)

// TestPythonClientBoundsAPayload: a frame head claiming a payload beyond
// the limit is refused before anything is allocated, and one within it but
// cut short costs only what was sent: the client allocated the whole
// length up front (2 GiB for a corrupt head, MemoryError beyond), found
// in review.
func TestPythonClientBoundsAPayload(t *testing.T) {
	py := pythonWith(t, "numpy")
	for _, tc := range []struct {
		plen uint64
		want string
	}{
		{1 << 50, `"error": "frame payload of 1125899906842624 bytes is over the limit of 17179869184"`},
		{1 << 31, `"cut": "the stream ended before its end-of-stream frame (after 4 of 2147483648 bytes of a frame): the run failed or was interrupted"`},
	} {
		t.Run(fmt.Sprint(tc.plen), func(t *testing.T) {
			addr := fakeSink(t, func(c net.Conn) {
				hello, _ := serve.EncodeJSON(serve.KindHello, serve.Hello{Protocol: serve.Protocol})
				hdr := []byte(`{"id":0,"epoch":0,"fields":[]}`)
				c.Write(hello)
				c.Write(serve.AppendHead(nil, serve.KindSample, len(hdr), int(tc.plen)))
				c.Write(hdr)
				c.Write([]byte("abcd"))
			})
			cmd := exec.Command(py, "testdata/serve_read.py", addr)
			out, err := cmd.CombinedOutput()
			if err != nil || !strings.Contains(string(out), tc.want) {
				t.Errorf("%v\n%s\nwant it to contain %s", err, out, tc.want)
			}
			if rss := cmd.ProcessState.SysUsage().(*syscall.Rusage).Maxrss; rss > 512<<10 {
				t.Errorf("the client grew to %d KiB", rss)
			}
		})
	}
}

// TestTrainShapesExample runs the README's serve example as written, but
// for 2 epochs: examples/pipelines/serve.yaml streaming to
// clients/python/train_shapes.py, which trains a CNN on the batches and
// prints a line per epoch, then stops at the stream's last epoch without
// reading past it (it did, and every run ended with the client's
// warning of an empty epoch).
func TestTrainShapesExample(t *testing.T) {
	py := pythonWith(t, "numpy, torch")
	sock := filepath.Join(t.TempDir(), "shapes.sock")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := applyInBackground(ctx, "../examples/pipelines/serve.yaml", "--set", "epochs=2", "--set", "stages.trainer.listen=unix://"+sock)
	cmd := exec.Command(py, "../clients/python/train_shapes.py", "unix://"+sock)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	// The client waits for the socket (PiperunDataset's wait).
	if err := cmd.Run(); err != nil {
		t.Fatalf("train_shapes.py: %v\n%s%s", err, stdout.String(), stderr.String())
	}
	line := regexp.MustCompile(`^epoch (\d): 31 batches, loss \d\.\d{3}, accuracy \d\.\d{3}, waited for data \d+\.\d{2}s$`)
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("train_shapes.py printed %d lines, want 2 epochs:\n%s", len(lines), stdout.String())
	}
	for i, l := range lines {
		if m := line.FindStringSubmatch(l); m == nil || m[1] != fmt.Sprint(i) {
			t.Errorf("line %d: %q, want epoch %d in the form %s", i, l, i, line)
		}
	}
	if stderr.Len() > 0 {
		t.Errorf("train_shapes.py wrote to stderr:\n%s", stderr.String())
	}
	if r := <-done; r.code != 0 || !strings.Contains(r.stderr, "trainer: 1984 samples in 62 batches") {
		t.Errorf("apply: %s", r)
	}
}
