package cli

import (
	"testing"

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
