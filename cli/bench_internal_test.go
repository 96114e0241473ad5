package cli

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/piperun/piperun/engine"
	"github.com/piperun/piperun/plan"
	"github.com/piperun/piperun/sample"
	"github.com/piperun/piperun/spec"
	"github.com/piperun/piperun/stages"
)

// TestOrderKey: what bench compares across epochs is where a sample came
// from, without what changes every epoch.
func TestOrderKey(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"data/train-0.tfrecord record 17", "data/train-0.tfrecord record 17"},
		{"sample 3 (epoch 1)", "sample 3"},
		{"batch 4 (epoch 2) of a.tfrecord record 0 … b.tfrecord record 9", "a.tfrecord record 0 … b.tfrecord record 9"},
		{"batch 0 (epoch 1) of sample 0 (epoch 1) … sample 3 (epoch 1)", "sample 0 … sample 3"},
	} {
		if got := orderKey(tc.in); got != tc.want {
			t.Errorf("orderKey(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// TestShuffleCheck: the verdict for each way epochs can follow each other,
// and for the shuffle above the sink: one told not to reshuffle is named,
// and one that reshuffles but keeps the order has too small a buffer (a
// new-user test with buffer: 1 was told to add a shuffle stage).
func TestShuffleCheck(t *testing.T) {
	no := false
	fixed := &spec.Stage{Name: "s", Type: "shuffle", Config: &stages.ShuffleConfig{Buffer: 100, ReshuffleEachEpoch: &no}}
	tiny := &spec.Stage{Name: "mix", Type: "shuffle", Config: &stages.ShuffleConfig{Buffer: 1}}
	big := &spec.Stage{Name: "sh", Type: "shuffle", Config: &stages.ShuffleConfig{Buffer: 1000}}
	files := &spec.Stage{Name: "f", Type: "files", Config: &stages.FilesConfig{Shuffle: true}}
	cache := &spec.Stage{Name: "c2", Type: "cache", Config: &stages.CacheConfig{}}
	for _, tc := range []struct {
		name      string
		shuffle   *spec.Stage
		cache, by *spec.Stage
		epochs    [][]string
		same, pos int
		verdict   string
	}{
		// A tuning test raised the buffer past its 750-sample epoch, and
		// was told again that the buffer was too small: a cache below the
		// shuffle replayed the first pass's order.
		{"same order, a cache below the shuffle", big, cache, big, [][]string{{"a", "b"}, {"a", "b"}}, 2, 2,
			`the epochs after the pass that fills cache "c2" come in the order of their IDs, whatever shuffle "sh" above it draws (2 of 2 places hold the sample of the epoch before); add a shuffle stage below the cache`},
		// The pass that fills the cache has the shuffle's order, and the
		// ones after it repeat: half the places alike read "reshuffled"
		// (a re-test: 25 of 50).
		{"a shuffled fill, then the same order", big, cache, big, [][]string{{"c", "a", "d", "b"}, {"a", "b", "c", "d"}, {"a", "b", "c", "d"}}, 4, 8,
			`the epochs after the pass that fills cache "c2" come in the order of their IDs, whatever shuffle "sh" above it draws (4 of 8 places hold the sample of the epoch before); add a shuffle stage below the cache`},
		{"same order, a cache below shuffling files", nil, cache, files, [][]string{{"a", "b"}, {"a", "b"}}, 2, 2,
			`the epochs after the pass that fills cache "c2" come in the order of their IDs, whatever files "f" above it draws (2 of 2 places hold the sample of the epoch before); add a shuffle stage below the cache`},
		{"one epoch", nil, nil, nil, [][]string{{"a", "b"}, nil}, 0, 0, "one epoch: nothing to compare"},
		{"same order", nil, nil, nil, [][]string{{"a", "b", "c"}, {"a", "b", "c"}, {"a", "b", "c"}}, 6, 6,
			"every epoch comes in the same order: add a shuffle stage (it reshuffles each epoch unless reshuffle_each_epoch: false), or shuffle: true on a files source"},
		{"same order, told so", fixed, nil, nil, [][]string{{"a", "b"}, {"a", "b"}}, 2, 2,
			`every epoch comes in the same order: shuffle "s" has reshuffle_each_epoch: false`},
		{"same order, a buffer of 1", tiny, nil, nil, [][]string{{"a", "b"}, {"a", "b"}}, 2, 2,
			`every epoch comes in the same order: shuffle "mix"'s buffer of 1 is too small to mix them; raise it (the whole epoch for a perfect shuffle)`},
		{"mostly", nil, nil, nil, [][]string{{"a", "b", "c", "d"}, {"a", "b", "c", "x"}}, 3, 4,
			"epochs come in much the same order (3 of 4 places hold the sample of the epoch before)"},
		{"reshuffled", tiny, nil, nil, [][]string{{"a", "b", "c", "d"}, {"b", "a", "c", "d"}, {"d", "c", "a", "b"}}, 2, 8,
			"reshuffled every epoch (2 of 8 places hold the sample of the epoch before)"},
		{"a shorter last epoch", nil, nil, nil, [][]string{{"a", "b", "c"}, {"c", "a"}}, 0, 2,
			"reshuffled every epoch (0 of 2 places hold the sample of the epoch before)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := shuffleCheck(tc.epochs, tc.shuffle, tc.cache, tc.by)
			if got.Same != tc.same || got.Positions != tc.pos || got.Verdict != tc.verdict {
				t.Errorf("got %+v\nwant same %d of %d, %q", got, tc.same, tc.pos, tc.verdict)
			}
		})
	}
}

// TestFrozenOrder: a cache with a shuffler above it and no shuffle stage
// between it and the trainer is what keeps the order; with a shuffle stage
// below it, that stage's settings say why (a review: bench told a spec
// with one, reshuffle_each_epoch: false, to add a shuffle below the cache).
func TestFrozenOrder(t *testing.T) {
	for _, tc := range []struct {
		name, middle, cache, by string
	}{
		{"a cache below shuffling files", "  - {name: c, type: cache}", "c", "files"},
		{"a cache below a shuffle", "  - {name: sh, type: shuffle, buffer: 8}\n  - {name: c, type: cache}", "c", "sh"},
		{"a shuffle below the cache", "  - {name: c, type: cache}\n  - {name: sh, type: shuffle, buffer: 8, reshuffle_each_epoch: false}", "", ""},
		{"no cache", "  - {name: sh, type: shuffle, buffer: 8}", "", ""},
	} {
		sp, diags := spec.Parse("s.yaml", []byte("version: 1\nname: f\nstages:\n  - {name: files, type: files, pattern: '*.jpg', shuffle: true}\n"+
			tc.middle+"\n  - {name: out, type: discard}\n"), spec.Options{Catalog: stages.Default()})
		if diags.HasErrors() {
			t.Fatal(diags)
		}
		c, by := frozenOrder(sp.Stage("out"))
		var got [2]string
		if c != nil {
			got = [2]string{c.Name, by.Name}
		}
		if got != [2]string{tc.cache, tc.by} {
			t.Errorf("%s: %v, want %q above %q", tc.name, got, tc.cache, tc.by)
		}
	}
}

// TestGitHubProperty: a file name in a workflow command's property is
// escaped where a comma or colon would end it (a,b:c.yaml).
func TestGitHubProperty(t *testing.T) {
	for in, want := range map[string]string{
		"a,b:c.yaml":      "a%2Cb%3Ac.yaml",
		"plain/spec.yaml": "plain/spec.yaml",
		"100%\nnew.yaml":  "100%25%0Anew.yaml",
		"C:\\dir\\x.yaml": "C%3A\\dir\\x.yaml",
	} {
		if got := ghProperty(in); got != want {
			t.Errorf("ghProperty(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestBottleneckAdvice: the busiest stage is named, and "more parallelism"
// is advised only while its workers are fewer than the run's (a new-user
// test: it was advised for 8 workers on 2 cores).
func TestBottleneckAdvice(t *testing.T) {
	const tail = " or less to do (a cache stage right after the expensive work replays its results in later epochs)"
	random := &stages.MapConfig{Set: spec.Map[string]{Entries: []spec.Entry[string]{{Key: "img", Value: "flip_left_right(img, 0.5)"}}}}
	for _, tc := range []struct {
		workers, runWorkers int
		typ                 string
		cfg                 any
		want                string
	}{
		{1, 2, "map", nil, `map "m" was busy 90% of the time of its worker; give it more parallelism, cores,` + tail},
		{2, 2, "map", nil, `map "m" was busy 90% of the time of its 2 workers; give it more cores (its workers already match the run's 2),` + tail},
		{8, 2, "map", nil, `map "m" was busy 90% of the time of its 8 workers; give it more cores (its workers already match the run's 2),` + tail},
		// A batch takes no parallelism (a new-user test was told to
		// give it more).
		{1, 2, "batch", nil, `batch "m" was busy 90% of the time of its worker; give it more cores,` + tail},
		// Caching after random augmentation would freeze it.
		{1, 2, "map", random, `map "m" was busy 90% of the time of its worker; give it more parallelism, cores, or less to do (it draws random numbers, so cache only its deterministic part: a map of the functions that draw nothing (a decode, a resize), a cache, then a map of the random ones)`},
	} {
		p := &plan.Plan{Workers: tc.runWorkers, Nodes: []*plan.Node{{Stage: &spec.Stage{Name: "m", Type: tc.typ, Role: spec.RoleTransform, Config: tc.cfg}}}}
		rep := &engine.Report{Stages: map[string]engine.StageReport{"m": {BusyS: 0.9 * float64(tc.workers), Workers: tc.workers}}}
		_, name, why := bottleneck(p, rep, time.Second, "out", 100*time.Millisecond, 0)
		if name != "m" || why != tc.want {
			t.Errorf("%d workers of %d: %q, %q\nwant m, %q", tc.workers, tc.runWorkers, name, why, tc.want)
		}
	}
}

// TestCPUWords: a contended machine's busy time, more than the run's CPU
// time, is said to overstate the CPU used (a tuning test: 2.25 to 3.3
// times, unsaid).
func TestCPUWords(t *testing.T) {
	st := []BenchStage{{Name: "out", Type: "trainer", BusyS: 5}, {Type: "map", BusyS: 1.2}, {Type: "batch", BusyS: 1.1}}
	for _, tc := range []struct {
		cpu  time.Duration
		want string
	}{
		{time.Second, "; the stages' busy time (2.30s) is more than the CPU time the run had (1.00s): part of it was a wait, for a core that other work held or for a read, so the shares overstate the CPU they used"},
		{2100 * time.Millisecond, ""},
		{0, ""},
	} {
		if got := cpuWords(st, time.Second, tc.cpu); got != tc.want {
			t.Errorf("cpu %v:\ngot  %q\nwant %q", tc.cpu, got, tc.want)
		}
	}
}

// TestNoBottleneckButShortOfCPU: with no stage busy half the time but the
// stages together busy most of the cores, bench says the pipeline is short
// of CPU (a tuning test: 73% of 2 cores, and it said the time went to
// start-up or other work).
func TestNoBottleneckButShortOfCPU(t *testing.T) {
	for _, tc := range []struct {
		a, b float64
		want string
	}{
		{0.45, 0.4, `none alone: no stage feeding the trainer was busy half the time (the busiest, map "a", 45%), but together they were busy 85% of the run's 2 cores: the pipeline is short of CPU; give it more cores, or less to do`},
		{0.3, 0.2, `none: no stage feeding the trainer was busy half the time (the busiest, map "a", 30%): the time went to start-up, the queues between stages or other work on the machine`},
	} {
		p := &plan.Plan{Workers: 2, Nodes: []*plan.Node{
			{Stage: &spec.Stage{Name: "a", Type: "map", Role: spec.RoleTransform}},
			{Stage: &spec.Stage{Name: "b", Type: "map", Role: spec.RoleTransform}}}}
		rep := &engine.Report{Stages: map[string]engine.StageReport{"a": {BusyS: 2 * tc.a, Workers: 2}, "b": {BusyS: 2 * tc.b, Workers: 2}}}
		_, name, why := bottleneck(p, rep, time.Second, "out", 100*time.Millisecond, 0)
		if name != "" || why != tc.want {
			t.Errorf("busy %v and %v: %q, %q\nwant none, %q", tc.a, tc.b, name, why, tc.want)
		}
	}
	// Busy 1.7 s of 2 cores in 1 s, but the run had 0.8 s of CPU: the
	// rest was waiting for cores other work held, and more cores in the
	// spec would not give it them (a review).
	p := &plan.Plan{Workers: 2, Nodes: []*plan.Node{
		{Stage: &spec.Stage{Name: "a", Type: "map", Role: spec.RoleTransform}},
		{Stage: &spec.Stage{Name: "b", Type: "map", Role: spec.RoleTransform}}}}
	rep := &engine.Report{Stages: map[string]engine.StageReport{"a": {BusyS: 0.9, Workers: 2}, "b": {BusyS: 0.8, Workers: 2}}}
	if _, _, why := bottleneck(p, rep, time.Second, "out", 100*time.Millisecond, 800*time.Millisecond); !strings.HasPrefix(why, "none: ") {
		t.Errorf("with 0.8 s of CPU: %q, want none, not short of CPU", why)
	}
}

// TestTrainerStepCutShortIsNotCounted: a step interrupted (Ctrl-C) is not
// counted, so the rate after the first step cannot exceed what a step
// allows (a new-user test saw 105 %).
func TestTrainerStepCutShortIsNotCounted(t *testing.T) {
	tr := &trainer{step: 20 * time.Millisecond, last: time.Now()}
	ctx, cancel := context.WithCancel(context.Background())
	for i := range 2 {
		if err := tr.Write(ctx, sample.New(int64(i), 0, "")); err != nil {
			t.Fatal(err)
		}
	}
	before := tr.stepCounts
	tr.step = time.Hour
	cancel()
	time.Sleep(2 * waitedOver) // the cut step waited for its sample
	if err := tr.Write(ctx, sample.New(2, 0, "")); !errors.Is(err, context.Canceled) {
		t.Fatalf("err %v, want context.Canceled", err)
	}
	// Its wait is taken back with it, or the share of steps that waited
	// could exceed 100 %.
	if tr.stepCounts != before || len(tr.epochs[0]) != 2 {
		t.Errorf("after a cut step: %+v and %d samples in the epoch's order, want %+v and 2", tr.stepCounts, len(tr.epochs[0]), before)
	}
	if rate := float64(tr.steps) / tr.last.Sub(tr.since).Seconds(); rate > 50 {
		t.Errorf("rate after the first %.1f steps/s, over the 50 a 20ms step allows", rate)
	}
}

// TestBottleneckAdviceBelowARandomMap: a cache after a map below random
// augmentation would replay its draws too, so the advice says where to
// cache instead.
func TestBottleneckAdviceBelowARandomMap(t *testing.T) {
	aug := &spec.Stage{Name: "aug", Type: "map", Role: spec.RoleTransform,
		Config: &stages.MapConfig{Set: spec.Map[string]{Entries: []spec.Entry[string]{{Key: "img", Value: "random_crop(img, 8, 8)"}}}}}
	m := &spec.Stage{Name: "m", Type: "map", Role: spec.RoleTransform, Inputs: []*spec.Stage{aug}}
	p := &plan.Plan{Workers: 2, Nodes: []*plan.Node{{Stage: aug}, {Stage: m}}}
	rep := &engine.Report{Stages: map[string]engine.StageReport{"m": {BusyS: 0.9, Workers: 1}, "aug": {BusyS: 0.1, Workers: 1}}}
	_, _, why := bottleneck(p, rep, time.Second, "out", 100*time.Millisecond, 0)
	if want := `(a cache after it would replay the random draws of map "aug" above it every epoch: cache above that map, or not at all)`; !strings.HasSuffix(why, want) {
		t.Errorf("got %q\nwant it to end %q", why, want)
	}
}
