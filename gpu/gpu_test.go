package gpu

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
)

// script is a Source that replays readings per device.
type script struct {
	devices []Device
	reads   map[int][]Reading
	fail    map[int]bool
	pos     map[int]int
	closed  bool
}

func (s *script) Devices() ([]Device, error) { return s.devices, nil }

func (s *script) Read(i int) (Reading, error) {
	if s.fail[i] {
		return Reading{}, errors.New("ERROR_GPU_IS_LOST")
	}
	if s.pos == nil {
		s.pos = map[int]int{}
	}
	rs := s.reads[i]
	r := rs[s.pos[i]%len(rs)]
	s.pos[i]++
	return r, nil
}

func (s *script) Close() error { s.closed = true; return nil }

func busy(pcts ...uint32) []Reading {
	out := make([]Reading, len(pcts))
	for i, p := range pcts {
		out[i] = Reading{Utilization: p, MemoryUsed: uint64(p) << 20, Processes: 1}
	}
	return out
}

func idle(n int) []Reading { return make([]Reading, n) }

// TestSummary: the verdict for each way a run can look from the GPU.
func TestSummary(t *testing.T) {
	h200 := Device{Index: 0, Name: "NVIDIA H200", MemoryTotal: 141 << 30}
	second := Device{Index: 1, Name: "NVIDIA H200"}
	for _, tc := range []struct {
		name     string
		devices  []Device
		reads    map[int][]Reading
		fail     map[int]bool
		starving bool
		verdict  string
		mean     float64
		share    float64
	}{
		{"fed", []Device{h200}, map[int][]Reading{0: busy(98, 97, 99, 30)}, nil, false,
			"fed: gpu 0 (NVIDIA H200) under 50% busy in 1 of 4 readings while a process used it, 81% on average then", 81, 0.25},
		{"starving", []Device{h200}, map[int][]Reading{0: busy(20, 35, 90, 10)}, nil, true,
			"starving: gpu 0 (NVIDIA H200) under 50% busy in 3 of 4 readings while a process used it, 39% on average then; it waited for input, or its work is too small to keep it busy", 38.75, 0.75},
		{"half starved is starving", []Device{h200}, map[int][]Reading{0: busy(49, 50)}, nil, true,
			"starving: gpu 0 (NVIDIA H200) under 50% busy in 1 of 2 readings while a process used it, 50% on average then; it waited for input, or its work is too small to keep it busy", 49.5, 0.5},
		{"nobody uses it", []Device{h200}, map[int][]Reading{0: idle(4)}, nil, false,
			"no process used a gpu during the run", 0, 0},
		{"a late trainer is fed", []Device{h200}, map[int][]Reading{0: append(idle(6), busy(98, 97, 99, 96)...)}, nil, false,
			"fed: gpu 0 (NVIDIA H200) under 50% busy in 0 of 4 readings while a process used it, 98% on average then", 39, 0},
		{"processes not listed", []Device{h200}, map[int][]Reading{0: {{Utilization: 10, Processes: -1}, {Utilization: 20, Processes: -1}}}, nil, true,
			"starving: gpu 0 (NVIDIA H200) under 50% busy in 2 of 2 readings while it may have been in use (the driver does not list its processes), 15% on average then; it waited for input, or its work is too small to keep it busy", 15, 1},
		{"one of two starves", []Device{h200, second}, map[int][]Reading{0: busy(99, 99), 1: busy(5, 5)}, nil, true,
			"starving: gpu 1 (NVIDIA H200) under 50% busy in 2 of 2 readings while a process used it, 5% on average then; it waited for input, or its work is too small to keep it busy", 99, 0},
		{"no devices", nil, nil, nil, false, "no gpu found", 0, 0},
		{"a lost device", []Device{h200, second}, map[int][]Reading{0: busy(99, 99)}, map[int]bool{1: true}, false,
			"fed: gpu 0 (NVIDIA H200) under 50% busy in 0 of 2 readings while a process used it, 99% on average then; could not read gpu 1 (NVIDIA H200): ERROR_GPU_IS_LOST", 99, 0},
		{"nothing readable", []Device{h200}, nil, map[int]bool{0: true}, false,
			"no gpu could be read: gpu 0 (NVIDIA H200): ERROR_GPU_IS_LOST", 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := &script{devices: tc.devices, reads: tc.reads, fail: tc.fail}
			m, err := NewMonitor(src)
			if err != nil {
				t.Fatal(err)
			}
			n := 2
			for _, rs := range tc.reads {
				n = max(n, len(rs))
			}
			for range n {
				m.Sample()
			}
			got := m.Summary()
			if !got.Available || got.Starving != tc.starving || got.Verdict != tc.verdict {
				t.Errorf("available %v, starving %v, verdict %q\nwant available, starving %v, verdict %q", got.Available, got.Starving, got.Verdict, tc.starving, tc.verdict)
			}
			if len(got.Devices) != len(tc.devices) {
				t.Fatalf("%d devices in the summary, want %d", len(got.Devices), len(tc.devices))
			}
			if len(got.Devices) > 0 {
				d := got.Devices[0]
				if d.UtilizationMeanPct != tc.mean || d.StarvedShare != tc.share {
					t.Errorf("gpu 0: mean %v, starved share %v; want %v and %v", d.UtilizationMeanPct, d.StarvedShare, tc.mean, tc.share)
				}
			}
			if tc.fail[1] && (got.ReadErrors != n || !strings.Contains(got.LastReadError, "gpu 1: ERROR_GPU_IS_LOST")) {
				t.Errorf("read errors %d (%q), want %d naming gpu 1", got.ReadErrors, got.LastReadError, n)
			}
		})
	}
}

// TestSummaryKeepsExtremes: min, max and the most memory used are over
// every reading.
func TestSummaryKeepsExtremes(t *testing.T) {
	m, err := NewMonitor(&script{devices: []Device{{Index: 0, Name: "g"}}, reads: map[int][]Reading{0: busy(60, 3, 100, 70)}})
	if err != nil {
		t.Fatal(err)
	}
	for range 4 {
		m.Sample()
	}
	d := m.Summary().Devices[0]
	if d.UtilizationMinPct != 3 || d.UtilizationMaxPct != 100 || d.MemoryUsedMaxBytes != 100<<20 || d.Readings != 4 || d.UsedReadings != 4 {
		t.Errorf("got %+v", d)
	}
}

// ExampleMonitor watches a GPU (here a scripted one; Open gives the
// machine's through NVML) and sums up what it saw.
func ExampleMonitor() {
	src := &script{
		devices: []Device{{Index: 0, Name: "NVIDIA H200"}},
		reads:   map[int][]Reading{0: {{Utilization: 30, Processes: 1}, {Utilization: 45, Processes: 1}, {Utilization: 95, Processes: 1}}},
	}
	m, err := NewMonitor(src)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer m.Close()
	for range 3 {
		m.Sample() // Run(ctx, interval) does this on a ticker
	}
	s := m.Summary()
	fmt.Println(s.Starving)
	fmt.Println(s.Verdict)
	// Output:
	// true
	// starving: gpu 0 (NVIDIA H200) under 50% busy in 2 of 3 readings while a process used it, 57% on average then; it waited for input, or its work is too small to keep it busy
}

// TestAttribute: a starving GPU fed by serve sinks is put down to the
// trainer when no sink waited for samples PipelineBoundAt of its time; to
// the pipeline when one did and, without that wait, the GPU would have been
// at least StarvedBelow busy; to both when it would still have starved. A
// fed GPU, or a run without serve sinks, keeps its verdict.
func TestAttribute(t *testing.T) {
	h200 := Device{Index: 0, Name: "NVIDIA H200"}
	const starved = "starving: gpu 0 (NVIDIA H200) under 50% busy in 2 of 2 readings while a process used it, 20% on average then"
	for _, tc := range []struct {
		name    string
		util    []uint32
		feeds   []Feed
		by      string
		verdict string
	}{
		{"pipeline", []uint32{20, 20}, []Feed{{"trainer", 0.6}}, "pipeline",
			starved + `; the pipeline held it back: serve sink "trainer" waited for its next sample 60% of its time, and had it kept up the GPU would have been about 50% busy (piperun bench names the slowest stage)`},
		{"the sink that waited most", []uint32{20, 20}, []Feed{{"a", 0.02}, {"b", 0.8}}, "pipeline",
			starved + `; the pipeline held it back: serve sink "b" waited for its next sample 80% of its time, and had it kept up the GPU would have been about 100% busy (piperun bench names the slowest stage)`},
		{"a sink that only waited", []uint32{20, 20}, []Feed{{"trainer", 1}}, "pipeline",
			starved + `; the pipeline held it back: serve sink "trainer" waited for its next sample 100% of its time, and had it kept up the GPU would have been about 100% busy (piperun bench names the slowest stage)`},
		{"both", []uint32{20, 20}, []Feed{{"trainer", 0.1}}, "both",
			starved + `; the pipeline held it back only in part: serve sink "trainer" waited for its next sample 10% of its time, but had it kept up the GPU would still have been only about 22% busy: the trainer's steps are too small to keep it busy, or spend their time on the CPU`},
		{"trainer", []uint32{20, 20}, []Feed{{"trainer", 0.02}}, "trainer",
			starved + `; not the pipeline: serve sink "trainer" waited for its next sample 2% of its time, so the trainer took samples as fast as it could: its steps are too small to keep the GPU busy, or spend their time on the CPU`},
		{"no serve sink", []uint32{20, 20}, nil, "",
			starved + "; it waited for input, or its work is too small to keep it busy"},
		{"fed", []uint32{95, 97}, []Feed{{"trainer", 0.9}}, "",
			"fed: gpu 0 (NVIDIA H200) under 50% busy in 0 of 2 readings while a process used it, 96% on average then"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := NewMonitor(&script{devices: []Device{h200}, reads: map[int][]Reading{0: busy(tc.util...)}})
			if err != nil {
				t.Fatal(err)
			}
			m.Sample()
			m.Sample()
			s := m.Summary()
			s.Attribute(tc.feeds)
			if s.HeldBackBy != tc.by || s.Verdict != tc.verdict {
				t.Errorf("held back by %q, verdict\n%s\nwant %q,\n%s", s.HeldBackBy, s.Verdict, tc.by, tc.verdict)
			}
		})
	}
}

// gate is a script whose reads of device hang, past the first after of
// them, block until release is closed, as an NVML call may on a GPU in a
// bad state; entered is closed when the first of them begins.
type gate struct {
	script
	hang, after int
	entered     chan struct{}
	release     chan struct{}
	enterOne    sync.Once
}

func newGate(s script, hang int) *gate {
	return &gate{script: s, hang: hang, entered: make(chan struct{}), release: make(chan struct{})}
}

func (g *gate) Read(i int) (Reading, error) {
	if i == g.hang && g.after > 0 {
		g.after--
	} else if i == g.hang {
		g.enterOne.Do(func() { close(g.entered) })
		<-g.release
	}
	return g.script.Read(i)
}

// waitFor fails the test unless ch is closed within 5 s.
func waitFor(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(5 * time.Second):
		t.Fatalf("%s: not within 5 s", what)
	}
}

// TestRunSamplesAtOnce: Run's first sample does not wait for its
// interval, so a run shorter than it is read while it runs.
func TestRunSamplesAtOnce(t *testing.T) {
	src := newGate(script{devices: []Device{{Index: 0, Name: "g"}}, reads: map[int][]Reading{0: busy(70)}}, 0)
	m, err := NewMonitor(src)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		m.Run(ctx, time.Hour)
	}()
	waitFor(t, src.entered, "the first reading of a Run every hour")
	cancel()
	close(src.release)
	waitFor(t, done, "Run's end")
	if d := m.Summary().Devices[0]; d.Readings != 1 || d.UtilizationMeanPct != 70 {
		t.Errorf("got %+v, want 1 reading of 70%%", d)
	}
}

// TestStop: Stop takes a last sample, closes the source and sums up; when
// a read hangs past its wait, it sums up the readings before it, names the
// hung device in the verdict (which Attribute keeps), and neither samples
// nor closes the source the hung call still uses.
func TestStop(t *testing.T) {
	const (
		starving = "starving: gpu 0 (NVIDIA H200) under 50% busy in 1 of 1 readings while a process used it, 20% on average then"
		both     = "starving: gpu 0 (NVIDIA H200) under 50% busy in 2 of 2 readings while a process used it, 25% on average then"
		waited   = "; it waited for input, or its work is too small to keep it busy"
		hung     = "; the monitor did not stop within 50ms of the run's end: the read of gpu 1 (NVIDIA H200) had not returned " +
			"(an NVML call can hang on a GPU in a bad state), so these are the readings before it"
	)
	for _, tc := range []struct {
		name        string
		hang, after int
		feeds       []Feed
		readings    [2]int
		closed      bool
		verdict     string
	}{
		// In time, the wait is long: only a hang should reach it.
		{"in time", -1, 0, nil, [2]int{2, 2}, true, both + waited},
		{"a hung read", 1, 0, nil, [2]int{1, 0}, false, starving + waited + hung},
		{"a hung read, attributed", 1, 0, []Feed{{"trainer", 0.02}}, [2]int{1, 0}, false,
			starving + `; not the pipeline: serve sink "trainer" waited for its next sample 2% of its time, so the trainer ` +
				"took samples as fast as it could: its steps are too small to keep the GPU busy, or spend their time on the CPU" + hung},
		// The last sample, taken as the run ends, hangs (Stop
		// took it outside its limit, and waited for ever).
		{"a hung last reading", 1, 1, nil, [2]int{2, 1}, false,
			"starving: gpu 0 (NVIDIA H200) under 50% busy in 2 of 2 readings while a process used it, 25% on average then" + waited + hung},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := newGate(script{
				devices: []Device{{Index: 0, Name: "NVIDIA H200"}, {Index: 1, Name: "NVIDIA H200"}},
				reads:   map[int][]Reading{0: busy(20, 30), 1: busy(90, 90)},
			}, tc.hang)
			src.after = tc.after
			m, err := NewMonitor(src)
			if err != nil {
				t.Fatal(err)
			}
			w := m.Watch(time.Hour)
			if tc.hang >= 0 && tc.after == 0 {
				waitFor(t, src.entered, "the hanging read")
			}
			wait := 50 * time.Millisecond
			if tc.hang < 0 {
				wait = time.Minute
			}
			var s *Summary
			if tc.hang >= 0 && tc.after > 0 {
				// The hang is in the last sample, which Stop itself
				// makes: give up once it began, not after 50 ms that a
				// slow machine could spend before it.
				hung := make(chan time.Time)
				go func() { <-src.entered; close(hung) }()
				s, err = w.stopWhen(wait, hung)
			} else {
				s, err = w.Stop(wait)
			}
			if err != nil {
				t.Fatal(err)
			}
			// A hung call still uses the source: it is not closed yet.
			closed := src.closed
			s.Attribute(tc.feeds)
			// Let the hung read return, as a GPU back from a bad state
			// would: the source is closed then, and s stays as it was.
			close(src.release)
			waitFor(t, w.done, "the sampling's end")
			got := [2]int{s.Devices[0].Readings, s.Devices[1].Readings}
			if got != tc.readings || closed != tc.closed || !src.closed || s.Verdict != tc.verdict {
				t.Errorf("readings %v, closed %v (then %v), verdict\n%s\nwant %v, %v (then true),\n%s", got, closed, src.closed, s.Verdict, tc.readings, tc.closed, tc.verdict)
			}
		})
	}
}
