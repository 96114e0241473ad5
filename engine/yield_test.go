package engine

import (
	"testing"
	"time"
)

// phase is n samples of cost each.
type phase struct {
	n    int
	cost time.Duration
}

// TestYielder: a stage yields every yieldEvery of its time whether its
// samples are slow or cheap, and reads the clock rarely on cheap ones.
func TestYielder(t *testing.T) {
	for _, tc := range []struct {
		name                  string
		phases                []phase
		yields, reads, stride int
		slow                  bool // at the end
	}{
		{
			// A photo's decode: every sample is past yieldEvery, so
			// every sample after the first yields, one read each (plus
			// the read after each yield).
			name:   "slow",
			phases: []phase{{10, 2 * time.Millisecond}},
			yields: 9, reads: 10 + 9, stride: 1,
		},
		{
			// 100 ns samples: reads at samples 1, 2 and 4 (the stride
			// doubles while reads are under yieldEvery/8 apart), then
			// every 4th. 10,000 samples are 1 ms: yields at the first
			// reads 250 µs after the last yield, samples 2504, 5004 and
			// 7504, each followed by a read.
			name:   "cheap",
			phases: []phase{{10000, 100 * time.Nanosecond}},
			yields: 3, reads: 3 + 2499 + 3, stride: maxYieldStride,
		},
		{
			// Cheap, then slow: 1,000 cheap samples (252 reads, no
			// yield: 100 µs); the next read, 4 slow samples later, finds
			// the gap past yieldEvery, yields and drops the stride to
			// one, and each of the last 96 samples yields.
			name: "cheap then slow",
			phases: []phase{
				{1000, 100 * time.Nanosecond},
				{100, time.Millisecond},
			},
			yields: 1 + 96, reads: 252 + 2 + 96*2, stride: 1,
		},
		{
			// Past slowSample each: handed down one by one. After the
			// cheap ones (252 reads, stride 4) the 4th slow sample reads
			// the clock, 120 ms on (4 × 30 ms, slow), and yields; the 5th
			// too.
			name:   "very slow",
			phases: []phase{{1000, 100 * time.Nanosecond}, {5, 30 * time.Millisecond}},
			yields: 2, reads: 252 + 2*2, stride: 1, slow: true,
		},
		{
			// The first read starts the clock, each later slow sample
			// reads and yields; the cheap ones after are not slow.
			name:   "very slow, then cheap",
			phases: []phase{{5, 30 * time.Millisecond}, {1000, 100 * time.Nanosecond}},
			yields: 4, reads: 1 + 4*2 + 251, stride: maxYieldStride,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clock := time.Unix(1000, 0)
			reads, yields := 0, 0
			y := &yielder{stride: 1,
				now:   func() time.Time { reads++; return clock },
				yield: func() { yields++ },
			}
			for _, ph := range tc.phases {
				for range ph.n {
					clock = clock.Add(ph.cost)
					y.tick()
				}
			}
			if yields != tc.yields || reads != tc.reads || y.stride != tc.stride || y.slow != tc.slow {
				t.Errorf("yields %d, clock reads %d, stride %d, slow %v; want %d, %d, %d, %v", yields, reads, y.stride, y.slow, tc.yields, tc.reads, tc.stride, tc.slow)
			}
		})
	}
}
