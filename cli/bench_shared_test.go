package cli_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/piperun/piperun/cli"
)

// TestBenchOfAStageSharedWithAnotherSink: a map feeds both a take of 10
// above the trainer and a sink that reads all 6000 of its samples, 400KB
// each, so the run goes on some hundred times the trainer's span after its
// last step. Bench judges the map by its busy time at that step: no stage
// is busier than 100 % of its workers, and the note says the run went on
// feeding the other sink. Judged by the whole run's busy time over the
// trainer's span, the map was busy 41451 % and no note came.
func TestBenchOfAStageSharedWithAnotherSink(t *testing.T) {
	dir := t.TempDir()
	spec := writeSpec(t, dir, "br.yaml", cli.SharedStageSpec)
	r, br := benchReport(t, spec, "--step-time", "0")
	var names []string
	for _, s := range br.Stages {
		names = append(names, s.Name)
		if s.Busy > 1 {
			t.Errorf("%s %q busy %.0f%% of the time of its %d workers, over 100%%", s.Type, s.Name, 100*s.Busy, s.Workers)
		}
	}
	slices.Sort(names)
	if r.code != 0 || br.Steps != 10 || !slices.Equal(names, []string{"m", "src", "t", "trainer"}) || len(br.Sequential.Others) != 0 {
		t.Errorf("%s\n%d steps, stages %v, baseline leaving out %v; want 10 steps, m src t trainer, none left out", r, br.Steps, names, br.Sequential.Others)
	}
	// Each no more than the one before: the CPU time counted is within
	// the trainer's span, which is within the run.
	if br.TrainerS > br.ElapsedS || br.Sequential.CPUS > br.TrainerCPUS || br.TrainerCPUS > br.CPUS {
		t.Errorf("trainer %vs of the run's %vs; CPU counted %vs, in the span %vs, in all %vs; want each within the next",
			br.TrainerS, br.ElapsedS, br.Sequential.CPUS, br.TrainerCPUS, br.CPUS)
	}
	if want := "s: it ran on after the trainer's last step, feeding the other sinks (sideout); the figures below stand as they were then\n"; !strings.Contains(r.stdout, want) {
		t.Errorf("stdout lacks %q:\n%s", want, r.stdout)
	}
	if want := " of CPU until the trainer's last step, on one core between steps); piperun "; !strings.Contains(r.stdout, want) {
		t.Errorf("stdout lacks %q:\n%s", want, r.stdout)
	}
}
