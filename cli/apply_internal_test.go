package cli

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"go.uber.org/zap"

	"github.com/piperun/piperun/engine"
)

// TestProgressLine: the live line counts "1 batch", not "1 batches", and
// "1 sample" in a column as wide as "samples".
func TestProgressLine(t *testing.T) {
	for _, tc := range []struct {
		s    engine.SinkReport
		want string
	}{
		{engine.SinkReport{Samples: 4, Batches: 1}, "out                   4 samples         2/s  0:00:02  1 batch"},
		{engine.SinkReport{Samples: 8, Batches: 2}, "out                   8 samples         4/s  0:00:02  2 batches"},
		{engine.SinkReport{Samples: 8}, "out                   8 samples         4/s  0:00:02"},
		{engine.SinkReport{Samples: 1, Batches: 1}, "out                   1 sample          0/s  0:00:02  1 batch"},
		// A serve sink between trainers says so; its rate only falls.
		{engine.SinkReport{Samples: 8, Batches: 2, Idle: true}, "out                   8 samples         4/s  0:00:02  2 batches  waiting for a trainer"},
	} {
		if got := progressLine("out", tc.s, 2, 0); got != tc.want {
			t.Errorf("%+v:\ngot  %q\nwant %q", tc.s, got, tc.want)
		}
	}
}

// TestReportOrFail: apply and bench fail a run that succeeded when its
// report cannot be written (bench exited 0), and keep a failed run's own
// error.
func TestReportOrFail(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("needs /proc, where no folder can be made")
	}
	g := &globals{log: zap.NewNop()}
	const bad = "/proc/piperun-nope/r.json"
	var ee *exitError
	if err := reportOrFail(g, bad, map[string]bool{"ok": true}, nil); !errors.As(err, &ee) || ee.code != ExitFailed {
		t.Errorf("report to %s after a good run: %v, want exit %d", bad, err, ExitFailed)
	}
	if err := reportOrFail(g, bad, map[string]bool{"ok": false}, errors.New("the run failed")); err != nil {
		t.Errorf("report to %s after a failed run: %v, want nil (the run's error stands)", bad, err)
	}
	good := filepath.Join(t.TempDir(), "r.json")
	if err := reportOrFail(g, good, map[string]bool{"ok": true}, nil); err != nil {
		t.Errorf("report to %s: %v", good, err)
	}
	if b, err := os.ReadFile(good); err != nil || !strings.Contains(string(b), `"ok": true`) {
		t.Errorf("report written: %q, %v", b, err)
	}
}
