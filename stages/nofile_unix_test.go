//go:build linux || darwin

package stages_test

import (
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/piperun/piperun/spec"
	"github.com/piperun/piperun/stages"
)

// TestWriteTFRecordShardsWithinTheOpenFileLimit: every shard is open
// until the commit, so more shards than the process may open failed at
// the run's start (shards: 100001); validate says so
// first.
func TestWriteTFRecordShardsWithinTheOpenFileLimit(t *testing.T) {
	var orig syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &orig); err != nil {
		t.Skip(err)
	}
	low := orig
	low.Cur = 512
	if orig.Cur < 512 || syscall.Setrlimit(syscall.RLIMIT_NOFILE, &low) != nil {
		t.Skip("cannot set the open file limit to 512")
	}
	defer syscall.Setrlimit(syscall.RLIMIT_NOFILE, &orig)
	dir := t.TempDir()
	for _, tc := range []struct{ shards, want string }{
		{"448", ""},
		{"449", "stages[1].shards: the 449 shards are all open as the run writes them, more than the 512 files this process may open (ulimit -n) less 64 for the rest of the run: write fewer shards, or raise the limit"},
	} {
		src := "version: 1\nname: w\nstages:\n  - {name: r, type: range, count: 3}\n  - {name: out, type: write_tfrecord, path: 'o-{shard}.tfrecord', shards: " + tc.shards + "}\n"
		_, diags := spec.Parse(filepath.Join(dir, "w.yaml"), []byte(src), spec.Options{Catalog: stages.Default(), Environment: true})
		got := ""
		if len(diags) > 0 {
			got = strings.SplitN(diags[0].String(), ": ", 2)[1]
		}
		if len(diags) > 1 || got != tc.want {
			t.Errorf("%s shards: %v\nwant %q", tc.shards, diags, tc.want)
		}
	}
}
