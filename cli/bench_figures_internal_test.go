package cli

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/piperun/piperun/engine"
	"github.com/piperun/piperun/sample"
)

// TestBenchTrainerSnapshotsItsSteps: the trainer reads the run's figures at
// the end of its steps (each step of 2ms here, as one a millisecond at
// most is read), and at the step --steps ends on however soon it comes,
// so the last snapshot is the last step's.
func TestBenchTrainerSnapshotsItsSteps(t *testing.T) {
	for _, tc := range []struct {
		name  string
		step  time.Duration
		limit int
		reads int
	}{
		{"steps longer than snapEvery", 2 * snapEvery, 0, 3},
		{"the last step of --steps", 0, 3, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reads := 0
			tr := &trainer{step: tc.step, limit: tc.limit, stop: func() {}, last: time.Now(),
				progress: func() *engine.Report {
					reads++
					return &engine.Report{Stages: map[string]engine.StageReport{"m": {BusyS: float64(reads)}}}
				}}
			for i := range 3 {
				if err := tr.Write(context.Background(), sample.New(int64(i), 0, "")); err != nil {
					t.Fatal(err)
				}
			}
			// Steps of no time between the first and the last may or may
			// not take one: only the count of the first case is exact.
			if tr.snap.rep == nil {
				t.Fatalf("no snapshot after 3 steps, %d read", reads)
			}
			if tc.step > 0 && reads != tc.reads {
				t.Errorf("%d snapshots, want %d", reads, tc.reads)
			}
			if tr.snap.steps != 3 || tr.snap.stepped != tr.stepped || tr.snap.rep.Stages["m"].BusyS != float64(reads) || !tr.snap.at.Equal(tr.last) {
				t.Errorf("snapshot of %d steps, %v stepped, busy %v, at the last step's end %v; want 3, %v, %d, true",
					tr.snap.steps, tr.snap.stepped, tr.snap.rep.Stages["m"].BusyS, tr.snap.at.Equal(tr.last), tr.stepped, reads)
			}
		})
	}
}

// SharedStageSpec has a map feeding both a take of 10 above the trainer
// and a sink that reads all 6000 of its samples; the external tests use it
// too (TestBenchOfAStageSharedWithAnotherSink).
const SharedStageSpec = `version: 1
name: br
seed: 1
epochs: 1
resources: {memory: 256MiB}
stages:
  - {name: src, type: range, count: 6000}
  - {name: m, type: map, parallelism: 1, set: {x: 'one_hot(index % 7, 100000)'}}
  - {name: t, type: take, count: 10, input: m}
  - {name: trainer, type: discard, input: t}
  - {name: sideout, type: discard, input: m}
`

// TestBenchJudgesTheTrainersLastStep: with a map shared by the trainer's
// branch and another sink's, busy for 0.45s of a run of 0.7s whose
// trainer took its last step at 10ms, bench judges the figures of that
// step: a busy share of 90 %, not 4500 %, and a baseline of the CPU time
// until then (41451 %, and a baseline 434 times slower
// than piperun).
func TestBenchJudgesTheTrainersLastStep(t *testing.T) {
	p := benchPlan(t, SharedStageSpec)
	start, cpu0 := time.Now(), 3*time.Second
	tr := &trainer{stepCounts: stepCounts{steps: 10}, stepped: 7 * time.Millisecond, last: start.Add(12 * time.Millisecond),
		snap: benchSnapshot{at: start.Add(10 * time.Millisecond), steps: 10, stepped: 7 * time.Millisecond, cpu: cpu0 + 13*time.Millisecond,
			rep: &engine.Report{Stages: map[string]engine.StageReport{"src": {BusyS: 0.001, Workers: 1}, "m": {BusyS: 0.009, Workers: 1}, "t": {Workers: 1}}}}}
	final := &engine.Report{Stages: map[string]engine.StageReport{"src": {BusyS: 0.02, Workers: 1}, "m": {BusyS: 0.45, Workers: 1}, "t": {Workers: 1}}}
	at := tr.figures(start, cpu0, final, 700*time.Millisecond, 700*time.Millisecond)
	ranked, top, why := bottleneck(p, at.rep, at.span, "trainer", at.stepped, at.cpu)
	var shares []string
	for _, s := range ranked {
		shares = append(shares, fmt.Sprintf("%s %.0f%%", s.Name, 100*s.Busy))
	}
	wantWhy := `map "m" was busy 90% of the time of its worker; give it more parallelism, cores, or less to do (in one epoch a cache replays nothing; a cache stage with dir: right after the expensive work lets later runs read its results)`
	if want := []string{"m 90%", "trainer 70%", "src 10%", "t 0%"}; !slices.Equal(shares, want) || top != "m" || why != wantWhy {
		t.Errorf("got %v, %q, %q\nwant %v, m, %q", shares, top, why, want, wantWhy)
	}
	// 10 steps over 13ms of CPU and 7ms of steps.
	seq := sequential(p, at, "trainer", 800)
	if got, want := fmt.Sprintf("%.3fs %.0f steps/s %.2f× %v", seq.CPUS, seq.StepsPerS, seq.Speedup, seq.Others), "0.013s 500 steps/s 1.60× []"; got != want {
		t.Errorf("baseline %s, want %s", got, want)
	}
	// Without a snapshot (no step took one) the run's own figures stand.
	tr.snap = benchSnapshot{}
	if at := tr.figures(start, cpu0, final, 700*time.Millisecond, 700*time.Millisecond); at.rep != final || at.span != 700*time.Millisecond || at.cpu != 700*time.Millisecond || at.steps != 10 || at.stepped != 7*time.Millisecond {
		t.Errorf("without a snapshot: %+v; want the run's figures", at)
	}
}
