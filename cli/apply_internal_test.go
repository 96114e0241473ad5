package cli

import (
	"errors"
	"math"
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
		if got := progressLine("out", tc.s, 2, 0, float64(tc.s.Samples)/2); got != tc.want {
			t.Errorf("%+v:\ngot  %q\nwant %q", tc.s, got, tc.want)
		}
	}
	// A long name gives way to the figures.
	if got, want := progressLine("a_sink_with_a_long_name", engine.SinkReport{Samples: 8}, 2, 0, 4), "a_sink_with_a_l…          8 samples         4/s  0:00:02"; got != want {
		t.Errorf("long name:\ngot  %q\nwant %q", got, want)
	}
}

// TestRecentRate: the progress rate is taken over the last rateWindow,
// so that a slowdown late in a long run shows (a soak test: the rate
// since the start, shown before, would barely move for a halving after a
// day); before the window has passed, it is the rate since the start.
func TestRecentRate(t *testing.T) {
	var r recentRates
	for _, tc := range []struct {
		at   float64
		n    int64
		want float64
	}{
		{2, 200, 100},     // since the start
		{10, 1000, 100},   // since the start: the window is 10 s
		{20, 2000, 100},   // 10 s back is the point at 10 s
		{30, 2500, 50},    // halved: (2500-2000) / 10
		{35, 2750, 50},    // back to the point at 20 s: 750 / 15
		{3600, 2750, 0},   // stopped: nothing in the last 10 s
		{3610, 3750, 100}, // the point 10 s back
	} {
		if got := r.add("out", tc.at, tc.n); got != tc.want {
			t.Errorf("at %vs, %d samples: rate %v, want %v", tc.at, tc.n, got, tc.want)
		}
	}
	if got := r.add("other", 4, 40); got != 10 {
		t.Errorf("a second sink: rate %v, want 10", got)
	}
	// Log lines every 10 s, their ticks a little early or late: each
	// rate is over the 10 s since the line before, not 20 (a review saw
	// 1500/19.997 where 500/10 was meant).
	var logged recentRates
	for _, tc := range []struct {
		at   float64
		n    int64
		want float64
	}{{10.003, 1000, 1000 / 10.003}, {20.001, 2000, 1000 / 9.998}, {30.000, 2500, 500 / 9.999}} {
		if got := logged.add("out", tc.at, tc.n); math.Abs(got-tc.want) > 1e-9 {
			t.Errorf("at %vs: rate %v, want %v", tc.at, got, tc.want)
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
