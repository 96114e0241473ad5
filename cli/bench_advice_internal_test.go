package cli

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/piperun/piperun/engine"
	"github.com/piperun/piperun/plan"
	"github.com/piperun/piperun/spec"
	"github.com/piperun/piperun/stages"
)

// benchPlan compiles a spec as bench does, without its machine checks.
func benchPlan(t *testing.T, src string) *plan.Plan {
	t.Helper()
	reg := stages.Default()
	sp, diags := spec.Parse("spec.yaml", []byte(src), spec.Options{Catalog: reg})
	if diags.HasErrors() {
		t.Fatalf("spec problems:\n%v", diags)
	}
	p, err := plan.Compile(sp, reg, plan.Options{Workers: 2})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestBottleneckCacheAdvice: the cache advice given with the busiest
// stage fits the spec. A fixed hint advised a cache where one already sat
// below the stage, an in-memory one that the budget could not hold, and a
// replay in later epochs to a spec of one epoch; a dir:
// whose store the budget could not hold either (at
// 16MiB validate refused it), where the advice now names the budget it
// needs.
func TestBottleneckCacheAdvice(t *testing.T) {
	const src = `version: 1
name: c
epochs: EPOCHS
resources: {memory: MEMORY}
stages:
  - {name: r, type: range, count: COUNT}
  - {name: m, type: map, set: {x: 'one_hot(0, 2500)'}}
  - MIDDLE
  - {name: out, type: discard}
`
	const head = `map "m" was busy 90% of the time of its worker; give it more parallelism, cores, or less to do`
	const store = "resources.memory of at least 82.04MiB, as its store reserves 82MiB of the budget"
	for _, tc := range []struct {
		name, memory, epochs, count, middle, top, want string
	}{
		{"it fits in memory", "1MiB", "2", "40", "{name: p, type: prefetch, buffer: 1}", "m",
			head + " (a cache stage right after the expensive work replays its results in later epochs)"},
		{"a cache below", "1MiB", "2", "40", "{name: c, type: cache}", "m",
			head + ` (cache "c" below it already keeps its results: this is the pass that fills it)`},
		{"a cache on disk below", "1MiB", "2", "40", "{name: c, type: cache, dir: cache}", "m",
			head + ` (cache "c" below it already keeps its results: this is the pass that fills it)`},
		{"the cache itself", "1MiB", "2", "40", "{name: c, type: cache, dir: cache}", "c",
			`cache "c" was busy 90% of the time of its worker; give it more cores, or less to do`},
		{"too much for memory", "256MiB", "2", "20000", "{name: p, type: prefetch, buffer: 1}", "m",
			head + " (a cache stage with dir: right after the expensive work replays its results in later epochs: in memory, its first pass of about FIRSTPASS would not fit the 1/2 of the budget (128MiB) a cache may fill)"},
		{"too much for memory and for a store", "1MiB", "2", "100", "{name: p, type: prefetch, buffer: 1}", "m",
			head + " (a cache stage right after the expensive work would replay its results in later epochs, but in memory, its first pass of about FIRSTPASS would not fit the 1/2 of the budget (512KiB) a cache may fill, and with dir: it needs " + store + ")"},
		{"an endless run", "1MiB", "0", "100", "{name: p, type: prefetch, buffer: 1}", "m",
			head + " (a cache stage right after the expensive work would replay its results in later epochs, but in memory, its first pass of about FIRSTPASS would not fit the 1/2 of the budget (512KiB) a cache may fill, and with dir: it needs " + store + ")"},
		{"one epoch", "256MiB", "1", "40", "{name: p, type: prefetch, buffer: 1}", "m",
			head + " (in one epoch a cache replays nothing; a cache stage with dir: right after the expensive work lets later runs read its results)"},
		{"one epoch, too little for a store", "1MiB", "1", "40", "{name: p, type: prefetch, buffer: 1}", "m",
			head + " (in one epoch a cache replays nothing; a cache stage with dir: right after the expensive work would let later runs read its results, with " + store + ")"},
		// A cache below a shuffle replays the first epoch's order in every
		// later one, and a cache already above keeps the work above (a
		// tuning test followed "a cache right after" for a batch below a
		// shuffle and a cache, and froze its epochs).
		{"a batch below a shuffle", "256MiB", "2", "40", "{name: sh, type: shuffle, buffer: 10}\n  - {name: b, type: batch, size: 4}", "b",
			`batch "b" was busy 90% of the time of its worker; give it more cores, or less to do (a cache below shuffle "sh" would replay its samples in the order of their IDs in every later epoch, unshuffled: cache above the shuffle, right after the expensive work)`},
		{"a map below a shuffle", "256MiB", "2", "40", "{name: sh, type: shuffle, buffer: 10}\n  - {name: m2, type: map, set: {y: 'index'}}", "m2",
			`map "m2" was busy 90% of the time of its worker; give it more parallelism, cores, or less to do (a cache below shuffle "sh" would replay its samples in the order of their IDs in every later epoch, unshuffled: cache above the shuffle, right after the expensive work)`},
		{"a map below a cache", "256MiB", "2", "40", "{name: c, type: cache}\n  - {name: m2, type: map, set: {y: 'index'}}", "m2",
			`map "m2" was busy 90% of the time of its worker; give it more parallelism, cores, or less to do (cache "c" above it keeps only the work above it: move it below this map, which draws nothing random, to keep its results too)`},
		{"a batch below a cache", "256MiB", "2", "40", "{name: c, type: cache}\n  - {name: b, type: batch, size: 4}", "b",
			`batch "b" was busy 90% of the time of its worker; give it more cores, or less to do (cache "c" above it already replays the work above it)`},
		{"a map below a cache and a shuffle", "256MiB", "2", "40", "{name: c, type: cache}\n  - {name: sh, type: shuffle, buffer: 8}\n  - {name: m2, type: map, set: {y: 'index'}}", "m2",
			`map "m2" was busy 90% of the time of its worker; give it more parallelism, cores, or less to do (cache "c" above it already replays the work above it)`},
		{"a count unknown", "256MiB", "2", "40", "{name: f, type: filter, where: 'index > 2'}\n  - {name: m2, type: map, set: {y: 'index'}}", "m2",
			`map "m2" was busy 90% of the time of its worker; give it more parallelism, cores, or less to do (a cache stage right after the expensive work replays its results in later epochs, with dir: where the budget cannot hold a whole epoch of them)`},
		{"a count unknown, too little for a store", "1MiB", "2", "40", "{name: f, type: filter, where: 'index > 2'}\n  - {name: m2, type: map, set: {y: 'index'}}", "m2",
			`map "m2" was busy 90% of the time of its worker; give it more parallelism, cores, or less to do (a cache stage right after the expensive work replays its results in later epochs, with dir: where the budget cannot hold a whole epoch of them, and then ` + store + `)`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := benchPlan(t, strings.NewReplacer("MEMORY", tc.memory, "EPOCHS", tc.epochs, "COUNT", tc.count, "MIDDLE", tc.middle).Replace(src))
			rep := &engine.Report{Stages: map[string]engine.StageReport{tc.top: {BusyS: 0.9, Workers: 1}}}
			_, name, why := bottleneck(p, rep, time.Second, "out", 100*time.Millisecond, 0)
			// The first pass's size is plan's estimate (plan.EpochBytes),
			// which this test does not pin down.
			bytes, _ := p.EpochBytes(tc.top)
			want := strings.ReplaceAll(tc.want, "FIRSTPASS", spec.ByteSize(bytes).String())
			if name != tc.top || why != want {
				t.Errorf("got %q, %q\nwant %q, %q", name, why, tc.top, want)
			}
		})
	}
}

// TestBottleneckRanksTheTrainersBranch: only the stages the trainer reads
// from, directly or through others, are ranked; a busy branch beside it
// is not its bottleneck (a new-user test was pointed at one). Below half
// busy no stage is named.
func TestBottleneckRanksTheTrainersBranch(t *testing.T) {
	const src = `version: 1
name: two
stages:
  - {name: src, type: range, count: 100}
  - {name: batch, type: batch, size: 10}
  - {name: trainer, type: discard}
  - {name: side, type: range, count: 300}
  - {name: slowside, type: map, input: side, parallelism: 1, set: {x: 'index * 2'}}
  - {name: sideout, type: discard}
`
	p := benchPlan(t, src)
	for _, tc := range []struct {
		name, trainer string
		busy          map[string]float64
		stepping      time.Duration
		ranked        []string
		top, why      string
	}{
		{"the side branch busiest", "trainer", map[string]float64{"src": 0.6, "batch": 0.1, "side": 0.2, "slowside": 0.95}, 0,
			[]string{"src", "batch", "trainer"}, "src",
			`range "src" was busy 60% of the time of its worker; give it more cores, or less to do (in one epoch a cache replays nothing; a cache stage with dir: right after the expensive work lets later runs read its results)`},
		{"the trainer busiest", "trainer", map[string]float64{"src": 0.01, "batch": 0.01, "side": 0.2, "slowside": 0.95}, 800 * time.Millisecond,
			[]string{"trainer", "src", "batch"}, "trainer", `the trainer (trainer), stepping 80% of the time: the pipeline keeps ahead of it`},
		{"none busy most of the time", "trainer", map[string]float64{"src": 0.16, "batch": 0.01, "side": 0.2, "slowside": 0.95}, 100 * time.Millisecond,
			[]string{"src", "trainer", "batch"}, "",
			`none: no stage feeding the trainer was busy half the time (the busiest, range "src", 16%): the time went to start-up, the queues between stages or other work on the machine`},
		{"the other sink", "sideout", map[string]float64{"src": 0.6, "batch": 0.1, "side": 0.2, "slowside": 0.95}, 0,
			[]string{"slowside", "side", "sideout"}, "slowside",
			`map "slowside" was busy 95% of the time of its worker; give it more parallelism, cores, or less to do (in one epoch a cache replays nothing; a cache stage with dir: right after the expensive work lets later runs read its results)`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rep := &engine.Report{Stages: map[string]engine.StageReport{}}
			for name, b := range tc.busy {
				rep.Stages[name] = engine.StageReport{BusyS: b, Workers: 1}
			}
			ranked, top, why := bottleneck(p, rep, time.Second, tc.trainer, tc.stepping, 0)
			var names []string
			for _, s := range ranked {
				names = append(names, s.Name)
			}
			if !slices.Equal(names, tc.ranked) || top != tc.top || why != tc.why {
				t.Errorf("got %v, %q, %q\nwant %v, %q, %q", names, top, why, tc.ranked, tc.top, tc.why)
			}
		})
	}
}

// TestBranchCPU: the baseline's CPU time leaves out the share of the
// stages that do not feed the trainer, by their busy time, and names them.
func TestBranchCPU(t *testing.T) {
	p := benchPlan(t, `version: 1
name: two
stages:
  - {name: src, type: range, count: 100}
  - {name: trainer, type: discard}
  - {name: side, type: range, count: 300}
  - {name: slowside, type: map, input: side, set: {x: 'index * 2'}}
  - {name: sideout, type: discard}
`)
	rep := &engine.Report{Stages: map[string]engine.StageReport{"src": {BusyS: 0.25}, "side": {BusyS: 0.25}, "slowside": {BusyS: 1.5}}}
	for _, tc := range []struct {
		trainer string
		cpu     float64
		others  []string
	}{
		{"trainer", 0.5, []string{"side", "slowside"}},
		{"sideout", 3.5, []string{"src"}},
		{"nope", 4, nil},
	} {
		cpu, others := branchCPU(p, rep, tc.trainer, 4*time.Second)
		if cpu != tc.cpu || !slices.Equal(others, tc.others) {
			t.Errorf("%s: %v s, %v; want %v s, %v", tc.trainer, cpu, others, tc.cpu, tc.others)
		}
	}
}

// TestNoCacheAdviceBelowAnEndlessTake: in an endless run a cache below a
// take stores nothing, so bench advises moving the take, not a cache that
// validate would warn of.
func TestNoCacheAdviceBelowAnEndlessTake(t *testing.T) {
	const src = `version: 1
name: e
epochs: EPOCHS
stages:
  - {name: r, type: range, count: 100}
  - {name: t, type: take, count: 500}
  - {name: m, type: map, set: {x: 'one_hot(0, 2500)'}}
  - {name: out, type: discard}
`
	for _, tc := range []struct{ epochs, want string }{
		{"0", "with epochs: 0 and a take above it, a cache after it would store nothing: to cache its work, put the take below the cache"},
		{"2", "a cache stage right after the expensive work replays its results in later epochs"},
	} {
		reg := stages.Default()
		sp, diags := spec.Parse("e.yaml", []byte(strings.Replace(src, "EPOCHS", tc.epochs, 1)), spec.Options{Catalog: reg})
		if diags.HasErrors() {
			t.Fatal(diags)
		}
		p, err := plan.Compile(sp, reg, plan.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if got := cacheHint(p, sp.Stage("m"), map[string]bool{}); got != tc.want {
			t.Errorf("epochs %s: %q\nwant %q", tc.epochs, got, tc.want)
		}
	}
}

// TestBottleneckCacheAdviceKeepsUint8: a map whose to_float is left to the
// batch below hands uint8 images on; a cache put right after it, as the
// advice says, would get float32 ones, four times the bytes (a review
// followed the advice and saw them), so the advice says where to convert.
func TestBottleneckCacheAdviceKeepsUint8(t *testing.T) {
	p := benchPlan(t, `version: 1
name: c
epochs: 2
resources: {memory: 64MiB}
stages:
  - {name: r, type: range, count: 40}
  - {name: m, type: map, set: {img: 'one_hot(0, 2500) | cast("uint8") | to_float()'}}
  - {name: b, type: batch, size: 4}
  - {name: out, type: discard}
`)
	if f, _ := p.Node("m").Stage.Schema.Lookup("img"); f.Deferred == nil {
		t.Fatal("the map's to_float is not left to the batch")
	}
	rep := &engine.Report{Stages: map[string]engine.StageReport{"m": {BusyS: 0.9, Workers: 1}}}
	_, _, why := bottleneck(p, rep, time.Second, "out", 100*time.Millisecond, 0)
	want := "(a cache stage right after the expensive work replays its results in later epochs; end the map before its to_float() and convert in a map after the cache, which then keeps img as uint8, a quarter of the float32 bytes)"
	if !strings.HasSuffix(why, want) {
		t.Errorf("advice %q,\nwant it to end %q", why, want)
	}
}

// TestCacheAdviceNamesAShufflingSource: advice to cache after the decode
// of a files stage that shuffles says that its shuffle then orders the
// first pass alone, as validate warns once the advice is followed.
func TestCacheAdviceNamesAShufflingSource(t *testing.T) {
	const src = `version: 1
name: c
epochs: 2
resources: {memory: 256MiB}
stages:
  - {name: files, type: files, pattern: 'photos/*.jpg', shuffle: SHUFFLE}
  - {name: m, type: map, set: {x: 'len(path)'}}
  - {name: out, type: discard}
`
	const head = `map "m" was busy 90% of the time of its worker; give it more parallelism, cores, or less to do (a cache stage right after the expensive work replays its results in later epochs, with dir: where the budget cannot hold a whole epoch of them`
	for shuffle, want := range map[string]string{
		"true":  head + `; files "files" shuffles only the pass that fills it, so add a shuffle stage below the cache)`,
		"false": head + `)`,
	} {
		p := benchPlan(t, strings.Replace(src, "SHUFFLE", shuffle, 1))
		rep := &engine.Report{Stages: map[string]engine.StageReport{"m": {BusyS: 0.9, Workers: 1}}}
		_, _, why := bottleneck(p, rep, time.Second, "out", 100*time.Millisecond, 0)
		if why != want {
			t.Errorf("shuffle: %s:\ngot  %s\nwant %s", shuffle, why, want)
		}
	}
	// W1's shape: a shuffle written below the map, which the planner
	// runs above it. As written, a cache right after the map has the
	// shuffle below it: the plain advice holds, with no word on order.
	w1 := strings.Replace(strings.Replace(src, "SHUFFLE", "true", 1), "  - {name: out,", "  - {name: sh, type: shuffle, buffer: 16}\n  - {name: out,", 1)
	p := benchPlan(t, w1)
	if len(p.Rewrites) == 0 || p.Rewrites[0].Stage != "sh" {
		t.Fatalf("the planner did not move the shuffle: %+v", p.Rewrites)
	}
	rep := &engine.Report{Stages: map[string]engine.StageReport{"m": {BusyS: 0.9, Workers: 1}}}
	if _, _, why := bottleneck(p, rep, time.Second, "out", 100*time.Millisecond, 0); why != head+")" {
		t.Errorf("a shuffle moved above the map:\ngot  %s\nwant %s)", why, head)
	}
}
