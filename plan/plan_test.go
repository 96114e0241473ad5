package plan_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/piperun/piperun/internal/bytesize"
	"github.com/piperun/piperun/plan"
	"github.com/piperun/piperun/spec"
	"github.com/piperun/piperun/stages"
)

// TestIdentsStayApart: stage names that differ only in '-' and '_' get
// different node IDs in dot and Mermaid.
func TestIdentsStayApart(t *testing.T) {
	p := compile(t, `version: 1
name: p
stages:
  - {name: src, type: range, count: 10}
  - {name: a-b, type: map, set: {x: 'index * 2'}}
  - {name: a_b, type: map, set: {y: 'x + 1'}}
  - {name: out, type: discard}
`)
	var dot strings.Builder
	p.Dot(&dot)
	for _, want := range []string{"\n  s_src -> s_a_00002db;\n", "\n  s_a_00002db -> s_a__b;\n", "\n  s_a__b -> s_out;\n"} {
		if !strings.Contains(dot.String(), want) {
			t.Errorf("dot:\n%s\nwant %q", dot.String(), want)
		}
	}
}

// TestAutoWorkersFollowGOMAXPROCS: `workers: auto` is the GOMAXPROCS the
// process started with, not the machine's core count, so a container's
// CPU limit (which Go applies to GOMAXPROCS) or GOMAXPROCS=1 bounds it.
// The child process, started with GOMAXPROCS=1, prints what it planned.
func TestAutoWorkersFollowGOMAXPROCS(t *testing.T) {
	const src = `version: 1
name: p
resources:
  workers: auto
stages:
  - {name: r, type: range, count: 4}
  - {name: m, type: map, parallelism: auto, set: {y: 'index * 2'}}
  - {name: out, type: discard}
`
	p := compileWith(t, src, plan.Options{})
	if os.Getenv("PLAN_TEST_CHILD") == "1" {
		fmt.Printf("workers=%d parallelism=%d\n", p.Workers, p.Nodes[1].Parallelism)
		return
	}
	// DefaultWorkers is GOMAXPROCS as the test binary started (go test
	// -cpu changes it later).
	if p.Workers != plan.DefaultWorkers || p.Nodes[1].Parallelism != p.Workers {
		t.Errorf("workers %d, map parallelism %d; want DefaultWorkers, %d", p.Workers, p.Nodes[1].Parallelism, plan.DefaultWorkers)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestAutoWorkersFollowGOMAXPROCS$")
	cmd.Env = append(os.Environ(), "PLAN_TEST_CHILD=1", "GOMAXPROCS=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "workers=1 parallelism=1\n") {
		t.Errorf("with GOMAXPROCS=1 on %d cores the child planned:\n%s\nwant workers=1 parallelism=1", runtime.NumCPU(), out)
	}
}

// TestFitNamesTheDefaultBudget: a spec without resources.memory is
// checked against the default budget, which depends on the machine, and
// the problem says so (a CI machine and a training node differ); with
// resources.memory set it names that.
func TestFitNamesTheDefaultBudget(t *testing.T) {
	const src = `version: 1
name: p
optimize: false
%s
stages:
  - {name: r, type: range, count: 4}
  - {name: m, type: map, set: {x: 'one_hot(0, 262144)'}}
  - {name: s, type: prefetch, buffer: 1000000}
  - {name: out, type: discard}
`
	for _, tc := range []struct{ resources, want, path, pos string }{
		{"", `stage "s" buffers 1000000 samples of about 1MiB each = 976.87GiB, more than the default memory budget (` + spec.ByteSize(plan.DefaultMemory()).String() + `, ` + plan.DefaultMemorySource() + `; set resources.memory): lower its buffer to FIT (what the other stages leave) or raise resources.memory to 976.88GiB`, "stages[2].buffer", "spec.yaml:8:39"},
		// 1GiB over samples a little over 1MiB, less what the map and
		// the in-flight samples hold.
		{"resources: {memory: 1GiB}", `stage "s" buffers 1000000 samples of about 1MiB each = 976.87GiB, more than resources.memory (1GiB): lower its buffer to 1021 (what the other stages leave) or raise resources.memory to 976.88GiB`, "stages[2].buffer", "spec.yaml:8:39"},
		// Past what any machine holds the advice is to lower the buffer
		// alone: "raise resources.memory to at least 2048TiB" was where
		// the search for a budget gave up, and did not fit.
		{"resources: {memory: 1GiB}\n#HUGE", `stage "s" emits samples of at least 65483.62TiB each, more than resources.memory (1GiB)|stage "s" buffers 9000000000000000 samples of at least 1MiB each = 8388608TiB, more than resources.memory (1GiB): lower its size to 511 at most (what the other stages leave); no machine's memory would hold it`, "stages[2].size", "spec.yaml:9:39"},
	} {
		if strings.Contains(tc.resources, "#HUGE") {
			src := strings.Replace(src, "type: prefetch, buffer: 1000000", "type: batch, size: 9000000000000000", 1)
			p := compileWith(t, fmt.Sprintf(src, tc.resources), plan.Options{})
			got := fitMessages(p)
			if want := strings.Split(tc.want, "|"); !slices.Equal(got, want) {
				t.Errorf("huge batch: fit problems %q\nwant %q", got, want)
			}
			continue
		}
		p := compileWith(t, fmt.Sprintf(src, tc.resources), plan.Options{})
		if strings.Contains(tc.want, "FIT") {
			// The default budget is the machine's: the advice must fit
			// it exactly, whatever it is.
			n := adviceFits(t, src, tc.resources)
			tc.want = strings.Replace(tc.want, "FIT", fmt.Sprint(n), 1)
		}
		got := fitMessages(p)
		if len(got) != 1 || got[0] != tc.want {
			t.Errorf("%q: fit problems %q\nwant [%q]", tc.resources, got, tc.want)
		}
		// It has a line to point at either way (found by a new-user
		// test: the default budget's problem had none, so CI could not
		// annotate it).
		if d := p.FitDiagnostics(); len(d) != 1 || d[0].Path != tc.path || d[0].Pos.String() != tc.pos {
			t.Errorf("%q: diagnostics %v, want one at %s, %s", tc.resources, d, tc.pos, tc.path)
		}
	}
}

// adviceFits finds the largest prefetch buffer of src that fits by
// compiling it, and checks that Fit advises it: that buffer fits, one
// more does not (advice sized against the whole budget
// led from one problem to the next).
func adviceFits(t *testing.T, src, resources string) int {
	t.Helper()
	fits := func(b int) bool {
		s := strings.Replace(fmt.Sprintf(src, resources), "buffer: 1000000", fmt.Sprintf("buffer: %d", b), 1)
		return len(compileWith(t, s, plan.Options{}).Fit()) == 0
	}
	lo, hi := 1, 1<<20 // fits(lo), !fits(hi)
	if !fits(lo) || fits(hi) {
		t.Fatalf("buffer 1 fits %v, %d fits %v", fits(lo), hi, fits(hi))
	}
	for hi-lo > 1 {
		if mid := (lo + hi) / 2; fits(mid) {
			lo = mid
		} else {
			hi = mid
		}
	}
	return lo
}

// TestFitAdvisesWhatFits: the buffer Fit advises is the largest that
// fits beside the other stages.
func TestFitAdvisesWhatFits(t *testing.T) {
	const src = `version: 1
name: fit
%s
stages:
  - {name: r, type: range, count: 4}
  - {name: m, type: map, set: {x: 'one_hot(0, 262144)'}}
  - {name: s, type: prefetch, buffer: 1000000}
  - {name: out, type: discard}
`
	for _, res := range []string{"resources: {memory: 1GiB}", "resources: {memory: 37MiB}"} {
		n := adviceFits(t, src, res)
		f := compileWith(t, fmt.Sprintf(src, res), plan.Options{}).Fit()
		if want := fmt.Sprintf("lower its buffer to %d (what the other stages leave)", n); len(f) != 1 || !strings.Contains(f[0].Message, want) {
			t.Errorf("%s: %v; want it to advise %d", res, f, n)
		}
	}
}

// TestFitInMemoryCacheAboveATake: with one epoch (or endless), a take
// below the cache that cuts its first pass ends the stream, and the cache
// never holds the whole pass: no error (a take of 50
// below 100,000 samples was refused, and ran in 178 KiB); with more epochs
// the cache fills first, and so it does below a take of the whole pass or
// more (a tester's take of 700 of 200 photos passed validate and failed).
func TestFitInMemoryCacheAboveATake(t *testing.T) {
	const src = `version: 1
name: c
epochs: EPOCHS
resources: {memory: 1MiB}
stages:
  - {name: r, type: range, count: 100000}
  - {name: m, type: map, set: {x: 'one_hot(0, 2500)'}}
  - {name: c, type: cache}
  - {name: sh, type: shuffle, buffer: 10}
  - {name: t, type: take, count: TAKE}
  - {name: out, type: discard}
`
	for _, tc := range []struct {
		epochs, take string
		want         int
	}{
		{"1", "50", 0}, {"0", "50", 0}, {"2", "50", 1},
		{"1", "100000", 1}, {"0", "100000", 1}, {"0", "700000", 1}, {"1", "99999", 0},
	} {
		src := strings.NewReplacer("EPOCHS", tc.epochs, "TAKE", tc.take).Replace(src)
		if got := len(compileWith(t, src, plan.Options{}).Fit()); got != tc.want {
			t.Errorf("epochs %s, take %s: %d fit problems, want %d", tc.epochs, tc.take, got, tc.want)
		}
	}
}

// TestFitAdvisesABudgetThatFits: the budget advised fits, with a shuffle
// whose part grows with the budget and a batch whose batches grow with
// its size (a re-test followed the old advice six times in a row, and
// was told a batch size 12 times too small).
func TestFitAdvisesABudgetThatFits(t *testing.T) {
	const src = `version: 1
name: fit
optimize: false
resources: {memory: 16MiB}
stages:
  - {name: src, type: range, count: 100000}
  - {name: m, type: map, set: {v: 'one_hot(index % 10, 1000)'}}
  - {name: sh, type: shuffle, buffer: 100000}
  - {name: b, type: batch, size: BATCH}
  - {name: pf, type: prefetch, buffer: 64}
  - {name: out, type: discard}
`
	advised := regexp.MustCompile(`resources.memory to ([0-9.]+[KMGT]iB)|; ([0-9.]+[KMGT]iB) fits|lower its size to ([0-9]+)`)
	errors := func(s string) []string {
		var out []string
		for _, f := range compileWith(t, s, plan.Options{}).Fit() {
			if !f.Warning {
				out = append(out, f.Message)
			}
		}
		return out
	}
	followed := 0
	defer func() {
		if followed < 3 {
			t.Errorf("followed %d pieces of advice, want a size and budgets", followed)
		}
	}()
	// A serve sink reserves a window that follows the budget (an eighth
	// of it, up to 32 MiB): advice sized with this budget's window fell
	// short.
	for _, sb := range [][2]string{{"discard", "512"}, {"discard", "100000"}, {"serve", "512"}} {
		batch := sb[1]
		s := strings.Replace(src, "BATCH", batch, 1)
		if sb[0] == "serve" {
			s = strings.Replace(s, "{name: out, type: discard}", "{name: out, type: serve, listen: 'unix:///nonexistent/x.sock'}", 1)
		}
		errs := errors(s)
		if len(errs) == 0 {
			t.Fatalf("batch %s fits 16MiB", batch)
		}
		for _, e := range errs {
			for _, m := range advised.FindAllStringSubmatch(e, -1) {
				try := s
				switch {
				case m[3] != "":
					try = strings.Replace(s, "size: "+batch, "size: "+m[3], 1)
					n, _ := strconv.Atoi(m[3])
					if more := strings.Replace(s, "size: "+batch, fmt.Sprintf("size: %d", n+1), 1); len(errors(more)) == 0 {
						t.Errorf("batch %s: size %d advised, but %d fits too", batch, n, n+1)
					}
				default:
					try = strings.Replace(s, "memory: 16MiB", "memory: "+m[1]+m[2], 1)
				}
				followed++
				if left := errors(try); len(left) != 0 {
					t.Errorf("batch %s: following %q still leaves %q", batch, m[0], left)
				}
			}
		}
	}
}

// TestFitPointsAtBatchSize: a batch holds size samples, so a batch that
// cannot fit the default budget points at its size key, which it has,
// not at a buffer key, which it would refuse.
func TestFitPointsAtBatchSize(t *testing.T) {
	p := compileWith(t, `version: 1
name: p
stages:
  - {name: r, type: range, count: 4}
  - {name: m, type: map, set: {x: 'one_hot(0, 262144)'}}
  - {name: b, type: batch, size: 100000000}
  - {name: out, type: discard}
`, plan.Options{})
	// Its batches are too large too: that points at the stage.
	d := p.FitDiagnostics()
	if len(d) != 2 || d[0].Path != "stages[2]" || d[0].Pos.String() != "spec.yaml:6:5" || d[1].Path != "stages[2].size" || d[1].Pos.String() != "spec.yaml:6:34" {
		t.Errorf("diagnostics %v, want them at spec.yaml:6:5, stages[2] and spec.yaml:6:34, stages[2].size", d)
	}
}

// TestRandomSeedsFitADouble: a seed drawn for a spec without one is under
// 2^53, so that jq or JavaScript reads the report's seed exactly and
// --set seed=N reruns the run (jq rounded a 63-bit seed);
// draws differ.
func TestRandomSeedsFitADouble(t *testing.T) {
	const src = `version: 1
name: p
stages:
  - {name: r, type: range, count: 4}
  - {name: out, type: discard}
`
	seen := map[uint64]bool{}
	for range 64 {
		p := compileWith(t, src, plan.Options{})
		if !p.SeedRandom || p.Seed >= 1<<53 || uint64(float64(p.Seed)) != p.Seed {
			t.Fatalf("seed %d (random %v): want a random seed a double holds exactly", p.Seed, p.SeedRandom)
		}
		seen[p.Seed] = true
	}
	if len(seen) < 60 {
		t.Errorf("%d distinct seeds in 64 draws", len(seen))
	}
}

// TestFitCountsAShuffleAtItsShare: a shuffle over more than its share of
// the budget, even more than the whole budget, is shrunk by the run,
// which warns; the fit check warns alike and counts the shuffle at what
// it will hold, so a spec apply runs is not refused (found by a new-user
// test: --probe refused at 8MiB a spec that ran at 4MiB).
func TestFitCountsAShuffleAtItsShare(t *testing.T) {
	const src = `version: 1
name: p
optimize: false
resources: {memory: %s}
stages:
  - {name: r, type: range, count: 4}
  - {name: m, type: map, set: {x: 'one_hot(0, 262144)'}}
  - {name: s, type: shuffle, buffer: %d}
  - {name: out, type: discard}
`
	for _, tc := range []struct {
		memory string
		buffer int
		want   []string
	}{
		// 1MiB samples (and 16 bytes more): 4 fit in the 4MiB share of
		// 8MiB, 3 in the share of 7MiB.
		{"8MiB", 64, []string{"64 samples of about 1MiB each = 64.02MiB, more than 4MiB, the 1/2 of resources.memory (8MiB) a shuffle may fill: it will hold about 3 samples"}},
		{"8MiB", 1000000000, []string{"1000000000 samples of about 1MiB each = 953.98TiB, more than 4MiB, the 1/2 of resources.memory (8MiB) a shuffle may fill: it will hold about 3 samples"}},
		{"64MiB", 8, nil},
		// Its share holds less than one sample: it holds one, and then
		// the buffers do not fit.
		{"2MiB", 8, []string{"8 samples of about 1MiB each = 8MiB, more than 1MiB, the 1/2 of resources.memory (2MiB) a shuffle may fill: it will hold about 1 sample",
			"buffers need about 3MiB (r 205B, m 1MiB, s 2MiB), more than resources.memory (2MiB); 3.01MiB fits"}},
	} {
		p := compileWith(t, fmt.Sprintf(src, tc.memory, tc.buffer), plan.Options{})
		got := fitMessages(p)
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s, buffer %d: fit problems\n%q\nwant\n%q", tc.memory, tc.buffer, got, tc.want)
		}
	}
}

// TestFitSplitsTheShareAmongShuffles: two shuffles share the half of the
// budget that one may fill, as the run splits it; each counted the half
// as its own, so two of them needed more than any budget (a memory
// audit: "need at least 265.61MiB" at 256MiB, "1.01GiB" at 1GiB).
func TestFitSplitsTheShareAmongShuffles(t *testing.T) {
	p := compileWith(t, `version: 1
name: p
optimize: false
resources: {memory: 16MiB}
stages:
  - {name: r, type: range, count: 4}
  - {name: m, type: map, set: {x: 'one_hot(0, 262144)'}}
  - {name: a, type: shuffle, buffer: 64}
  - {name: b, type: shuffle, buffer: 64}
  - {name: out, type: discard}
`, plan.Options{})
	got := fitMessages(p)
	// 1MiB samples (and 16 bytes more): 3 fit in a quarter of 16MiB.
	want := []string{
		"64 samples of about 1MiB each = 64.02MiB, more than 4MiB, the 1/4 of resources.memory (16MiB) each of the 2 shuffles may fill: it will hold about 3 samples",
		"64 samples of about 1MiB each = 64.02MiB, more than 4MiB, the 1/4 of resources.memory (16MiB) each of the 2 shuffles may fill: it will hold about 3 samples",
	}
	if !slices.Equal(got, want) {
		t.Errorf("fit problems\n%q\nwant\n%q", got, want)
	}
}

// TestFitSplitsTheHalfAmongCaches: two in-memory caches split the half of
// the budget the caches may fill, as the run splits it: each took a half,
// and two of them could fill the whole budget. A shuffle does not take
// from their half: below a cache it holds copies sharing its memory.
func TestFitSplitsTheHalfAmongCaches(t *testing.T) {
	const src = `version: 1
name: cc
optimize: false
epochs: 3
resources: {memory: 5MiB}
stages:
  - {name: s1, type: range, count: 100}
  - {name: m1, type: map, set: {v: 'one_hot(int(index % 5), 4000)'}}
  - {name: c1, type: cache}
  - {name: s2, type: range, count: 100}
  - {name: m2, type: map, input: s2, set: {v: 'one_hot(int(index % 5), 4000)', index: 'index + 100'}}
  - {name: c2, type: %s}
  - {name: j, type: mix, inputs: [c1, c2]}
  - {name: out, type: discard}
`
	msg := func(c string) string {
		return `stage "` + c + `" holds its whole first pass in memory: 100 samples of about 16.08KiB each = 1.57MiB, more than 1.25MiB, the 1/4 of resources.memory (5MiB) it may fill; set dir: to cache on disk, or raise the budget to at least 6.28MiB`
	}
	for _, tc := range []struct {
		second string
		want   []string
	}{
		{"cache", []string{msg("c1"), msg("c2")}},
		{"shuffle, buffer: 100", nil},
	} {
		p := compileWith(t, strings.Replace(src, "type: %s", "type: "+tc.second, 1), plan.Options{})
		got := fitMessages(p)
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s: fit problems\n%q\nwant\n%q", tc.second, got, tc.want)
		}
	}
}

// TestFitCountsTheFilesAnInterleaveHoldsOpen: each file a tfrecord or
// jsonl stage holds open has buffers beyond its samples, reserved from
// the budget: 600 under 8 MiB reached 408 MiB of RSS, unchecked (a
// re-test). auto compression counts each file as compressed.
func TestFitCountsTheFilesAnInterleaveHoldsOpen(t *testing.T) {
	const src = `version: 1
name: open
resources: {memory: 8MiB}
stages:
  - {name: src, type: files, pattern: "*.tfrecord"}
  - {name: r, type: %s}
  - {name: out, type: discard}
`
	for _, tc := range []struct {
		stage    string
		reserved int64
		want     []string
	}{
		{"tfrecord, cycle_length: 600", 600 * (2*64 + 48) << 10, []string{`stage "r" needs 103.13MiB for its own use (the buffers of the 600 files it reads at once; lower cycle_length), more than resources.memory (8MiB); the whole pipeline needs at least 103.13MiB, its strings and bytes counted as empty (--probe N measures them)`}},
		{"tfrecord, cycle_length: 600, compression: none", 600 * 66 << 10, []string{`stage "r" needs 38.67MiB for its own use (the buffers of the 600 files it reads at once; lower cycle_length), more than resources.memory (8MiB); the whole pipeline needs at least 38.68MiB, its strings and bytes counted as empty (--probe N measures them)`}},
		{"jsonl, cycle_length: 64", 64 * 130 << 10, []string{`stage "r" needs 8.13MiB for its own use (the buffers of the 64 files it reads at once; lower cycle_length), more than resources.memory (8MiB); the whole pipeline needs at least 8.13MiB, its strings and bytes counted as empty (--probe N measures them)`}},
		{"tfrecord", 8 * 176 << 10, nil},
		{"jsonl, cycle_length: 1", 130 << 10, nil},
	} {
		p := compileWith(t, strings.Replace(src, "type: %s", "type: "+tc.stage, 1), plan.Options{})
		if got := p.Nodes[1].Reserved; got != tc.reserved {
			t.Errorf("%s: reserved %d, want %d", tc.stage, got, tc.reserved)
		}
		if got := fitMessages(p); !slices.Equal(got, tc.want) {
			t.Errorf("%s: fit problems\n%q\nwant\n%q", tc.stage, got, tc.want)
		}
	}
}

// TestTextTotalsTheShares: plan's table shows a shuffle shrunk to its part
// of the budget as held/asked with the bytes it will hold, and ends with
// the shares' total against the budget, naming memory a stage reserves
// for its own use (a new-user test missed both: the columns had to be
// added up by hand, and an on-disk cache's 82MiB was nowhere). The
// shuffle's half is of the 8MiB the cache's reservation leaves.
func TestTextTotalsTheShares(t *testing.T) {
	p := compileWith(t, `version: 1
name: p
optimize: false
resources: {memory: 90MiB}
stages:
  - {name: r, type: range, count: 4}
  - {name: m, type: map, set: {x: 'one_hot(0, 262144)'}}
  - {name: s, type: shuffle, buffer: 64}
  - {name: c, type: cache, dir: cache}
  - {name: out, type: discard}
`, plan.Options{})
	var b strings.Builder
	p.Text(&b)
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	var shuffle string
	for _, l := range lines {
		if strings.HasPrefix(l, "s ") {
			shuffle = strings.Join(strings.Fields(l)[:7], " ")
		}
	}
	if want := "s shuffle m 1 3/64 1MiB 4MiB"; shuffle != want {
		t.Errorf("shuffle row %q, want %q", shuffle, want)
	}
	var reserved int64
	for _, n := range p.Nodes {
		reserved += n.Reserved
	}
	if reserved == 0 {
		t.Fatal("the on-disk cache reserves nothing")
	}
	want := fmt.Sprintf("memory: the shares total %s (with c %s reserved for the stages' own use) of the 90MiB budget; queues between stages take what is left",
		spec.ByteSize(205+(1<<20+16)+(4<<20+64)+(1<<20+16)+reserved), spec.ByteSize(reserved))
	if got := lines[len(lines)-1]; got != want {
		t.Errorf("last line\n%q\nwant\n%q", got, want)
	}
}

// TestTextColumnsWiden: a value wider than its column widens the whole
// column, so the rows stay in line (a review found a long BUFFER pushing
// its row's later columns right).
func TestTextColumnsWiden(t *testing.T) {
	p := compileWith(t, `version: 1
name: p
optimize: false
resources: {memory: 8MiB}
stages:
  - {name: a_rather_long_source_name, type: range, count: 4}
  - {name: m, type: map, parallelism: 1, set: {x: 'one_hot(0, 262144)'}}
  - {name: s, type: shuffle, buffer: 1000000}
  - {name: out, type: discard}
`, plan.Options{})
	var b strings.Builder
	p.Text(&b)
	var table []string
	for _, l := range strings.Split(b.String(), "\n") {
		if strings.HasPrefix(l, "STAGE") || table != nil && l != "" && !strings.HasPrefix(l, "memory:") {
			table = append(table, l)
		}
	}
	want := []string{
		"STAGE                     TYPE            INPUTS                     PAR    BUFFER     SAMPLE      SHARE  OUTPUT",
		"a_rather_long_source_name range           -                            1         0       205B       205B  {index: int64}",
		"m                         map             a_rather_long_source_name    1         0       1MiB       1MiB  {index: int64, x: tensor<float32>[262144]}",
		"s                         shuffle         m                            1 3/1000000       1MiB       4MiB  {index: int64, x: tensor<float32>[262144]}",
		"out                       discard         s                            1         0          -          -  -",
	}
	if got := strings.Join(table, "\n"); got != strings.Join(want, "\n") {
		t.Errorf("table\n%s\nwant\n%s", got, strings.Join(want, "\n"))
	}
}

// TestCacheDiagnostics: a take below a disk cache that may end a run of
// one epoch, or an endless one, inside the cache's first pass leaves the
// cache partial in every run, storing the same first samples again (a
// review: four runs of a take of 10 below a cache of 4000 samples left
// 256 stored each time, logged as incomplete only). tf.data warns of
// cache().take(k) at run time; validate says so before.
func TestCacheDiagnostics(t *testing.T) {
	const src = `version: 1
name: c
epochs: EPOCHS
stages:
  - {name: r, type: range, count: 4000}
  - FIRST
  - SECOND
  - {name: out, type: discard}
`
	const cache, mem = "{name: c, type: cache, dir: cachedir}", "{name: c, type: cache}"
	const warn = `warning: stages[1]: take "t" below this cache ends the run after 10 samples, inside the cache's first pass of 4000 (the run's only epoch): the cache stays partial, and every run stores the same first samples again; put the take above the cache, whose store then holds what the take passes`
	const mayWarn = `warning: stages[1]: take "t" below this cache may end the run inside the cache's first pass (the run's only epoch): the cache then stays partial, and every run stores the same first samples again; put the take above the cache, whose store then holds what the take passes`
	for _, tc := range []struct{ epochs, first, second, want string }{
		{"1", cache, "{name: t, type: take, count: 10}", warn},
		{"0", cache, "{name: t, type: take, count: 10}", strings.NewReplacer("the run's only epoch", "the first of endless epochs",
			"put the take above", "set epochs, and put the take above").Replace(warn) + " (with endless epochs a cache below a take stores nothing)"},
		// Earlier epochs read to their end: the first pass fills.
		{"2", cache, "{name: t, type: take, count: 10}", ``},
		{"1", cache, "{name: t, type: take, count: 4000}", ``},
		{"1", "{name: t, type: take, count: 10}", cache, ``},
		// In memory, nothing outlives the run.
		{"1", mem, "{name: t, type: take, count: 10}", ``},
		// A branch beside the take reads the whole pass, which fills the
		// cache (validate warned, and the cache completed).
		{"1", cache, "{name: o1, type: discard, input: c}\n  - {name: t, type: take, count: 10, input: c}", ``},
		{"1", cache, "{name: t1, type: take, count: 4000, input: c}\n  - {name: o1, type: discard, input: t1}\n  - {name: t, type: take, count: 10, input: c}", ``},
		{"1", cache, "{name: t, type: take, count: 10, input: c}\n  - {name: o1, type: discard, input: t}\n  - {name: t2, type: take, count: 5, input: c}", warn},
		// Through a zip of two branches of the cache, counted as its
		// shortest input: a take that covers the epoch does not cut (a
		// re-test: validate warned, and the cache completed).
		{"1", cache, "{name: m1, type: map, input: c, set: {a: index}, keep: [a]}\n  - {name: m2, type: map, input: c, set: {b: index}, keep: [b]}\n  - {name: z, type: zip, inputs: [m1, m2]}\n  - {name: t, type: take, count: 7000}", ``},
		{"1", cache, "{name: m1, type: map, input: c, set: {a: index}, keep: [a]}\n  - {name: m2, type: map, input: c, set: {b: index}, keep: [b]}\n  - {name: z, type: zip, inputs: [m1, m2]}\n  - {name: t, type: take, count: 10}", warn},
		{"1", cache, "{name: r2, type: range, count: 50}\n  - {name: k, type: concat, inputs: [c, r2]}\n  - {name: t, type: take, count: 4050}", ``},
		// A batch's last smaller batch counts: 2 batches of 3999 by 2000
		// cut the pass (the fit's count of full batches said
		// they covered it).
		{"1", cache, "{name: b, type: batch, size: 2000}\n  - {name: t, type: take, count: 1}", mayWarn},
		{"1", cache, "{name: b, type: batch, size: 1999}\n  - {name: t, type: take, count: 2}", mayWarn},
		{"1", cache, "{name: b, type: batch, size: 1999}\n  - {name: t, type: take, count: 3}", ``},
		// Through a filter the count is unknown: it may.
		{"1", cache, "{name: f, type: filter, where: 'index % 2 == 0'}\n  - {name: t, type: take, count: 10}", mayWarn},
	} {
		s := strings.NewReplacer("EPOCHS", tc.epochs, "FIRST", tc.first, "SECOND", tc.second).Replace(src)
		var got []string
		for _, d := range compileWith(t, s, plan.Options{}).CacheDiagnostics() {
			got = append(got, string(d.Severity)+": "+d.Path+": "+d.Message)
		}
		if strings.Join(got, "\n") != tc.want {
			t.Errorf("epochs %s, %s, %s:\n got %q\nwant %q", tc.epochs, tc.first, tc.second, got, tc.want)
		}
	}
}

// TestFitInMemoryCache: an in-memory cache holds its whole first pass in
// half the budget; where the count of samples reaching it is known (a
// range, a files stage's matches, through maps, shuffles and prefetches)
// and they cannot fit, the fit says so before the run, which found out
// only once the cache had filled. A filter makes the
// count unknown, and an on-disk cache holds nothing in memory.
func TestFitInMemoryCache(t *testing.T) {
	const src = `version: 1
name: c
resources: {memory: 1MiB}
stages:
  - {name: r, type: range, count: COUNT}
  - {name: m, type: map, set: {x: 'one_hot(0, 2500)'}}
  - MIDDLE
  - {name: c, type: cache}
  - {name: out, type: discard}
`
	for _, tc := range []struct{ count, middle, want string }{
		{"100", "{name: s, type: shuffle, buffer: 4}", `stage "c" holds its whole first pass in memory: 100 samples of about 10.22KiB each = 1021.68KiB, more than 512KiB, the 1/2 of resources.memory (1MiB) it may fill; set dir: to cache on disk, or raise the budget to at least 2MiB`},
		{"40", "{name: s, type: shuffle, buffer: 4}", ``},
		{"100", "{name: f, type: filter, where: 'index % 10 == 0'}", ``},
		// Counts through take, skip and batch.
		{"1000", "{name: k, type: skip, count: 900}", `stage "c" holds its whole first pass in memory: 100 samples of about 10.22KiB each = 1021.68KiB, more than 512KiB, the 1/2 of resources.memory (1MiB) it may fill; set dir: to cache on disk, or raise the budget to at least 2MiB`},
		{"1000", "{name: k, type: skip, count: 960}", ``},
		{"1000", "{name: k, type: take, count: 100}", `stage "c" holds its whole first pass in memory: 100 samples of about 10.22KiB each = 1021.68KiB, more than 512KiB, the 1/2 of resources.memory (1MiB) it may fill; set dir: to cache on disk, or raise the budget to at least 2MiB`},
		// A decode that skips bad samples emits fewer, by how many only
		// the run knows.
		{"100", "{name: s, type: map, on_error: skip, set: {y: 'index'}}", ``},
		{"1000", "{name: k, type: batch, size: 10}", `stage "c" holds its whole first pass in memory: 100 samples of about 98.3KiB each = 9.6MiB, more than 512KiB, the 1/2 of resources.memory (1MiB) it may fill; set dir: to cache on disk, or raise the budget to at least 19.2MiB`},
	} {
		s := strings.NewReplacer("COUNT", tc.count, "MIDDLE", tc.middle).Replace(src)
		var got []string
		for _, f := range compileWith(t, s, plan.Options{}).Fit() {
			got = append(got, f.Message)
		}
		if strings.Join(got, "\n") != tc.want {
			t.Errorf("%s samples through %s:\n got %q\nwant %q", tc.count, tc.middle, got, tc.want)
		}
	}
}

// TestApplyProbeSharesOfASource: a source whose sample size is known only
// at run time gets its share from the probe, as the stages below it do;
// it stayed a lower bound, and the total with it.
func TestApplyProbeSharesOfASource(t *testing.T) {
	p := compileWith(t, `version: 1
name: p
resources: {memory: 64MiB}
stages:
  - {name: files, type: files, pattern: 'data/*.txt'}
  - {name: m, type: map, set: {raw: 'read_file(path)'}}
  - {name: out, type: discard}
`, plan.Options{Workers: 2})
	p.ApplyProbe(map[string]int64{"files": 318, "m": 2000})
	var b strings.Builder
	p.Text(&b)
	var got []string
	for _, l := range strings.Split(b.String(), "\n") {
		if f := strings.Fields(l); len(f) > 6 && (f[0] == "files" || f[0] == "m") {
			got = append(got, strings.Join(f[:7], " "))
		}
		if strings.HasPrefix(l, "memory:") {
			got = append(got, l)
		}
	}
	want := []string{
		"files files - 1 0 ~318B 318B",
		"m map files 2 0 ~1.95KiB 1.95KiB",
		"memory: the shares total 2.26KiB of the 64MiB budget; queues between stages take what is left",
	}
	if !slices.Equal(got, want) {
		t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestFitInMemoryCacheCountsLongPaths: each sample carries its path as its
// origin, which the run counts: the fit counts the longest path matched,
// where that is more than plan.OriginAllowance (230-byte paths,
// and validate's budget failed the run).
func TestFitInMemoryCacheCountsLongPaths(t *testing.T) {
	dir := t.TempDir()
	long := filepath.Join(dir, strings.Repeat("d", 200))
	if err := os.MkdirAll(long, 0o755); err != nil {
		t.Fatal(err)
	}
	var longest int
	for i := range 60 {
		p := filepath.Join(long, fmt.Sprintf("f%02d.bin", i))
		if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
		longest = max(longest, len(p))
	}
	src := `version: 1
name: c
resources: {memory: 1MiB}
stages:
  - {name: files, type: files, pattern: '` + long + `/*.bin'}
  - {name: m, type: map, set: {x: 'one_hot(0, 2500)'}, keep: [x]}
  - {name: c, type: cache}
  - {name: out, type: discard}
`
	reg := stages.Default()
	sp, diags := spec.Parse(filepath.Join(dir, "s.yaml"), []byte(src), spec.Options{Catalog: reg, Environment: true})
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	p, err := plan.Compile(sp, reg, plan.Options{})
	if err != nil {
		t.Fatal(err)
	}
	each := p.Node("m").SampleBytes + int64(longest)
	want := fmt.Sprintf("stage \"c\" holds its whole first pass in memory: 60 samples of about %s each = %s, more than 512KiB, the 1/2 of resources.memory (1MiB) it may fill; set dir: to cache on disk, or raise the budget to at least %s",
		spec.ByteSize(each), spec.ByteSize(60*each), bytesize.FormatAtLeast(2*60*each))
	got := fitMessages(p)
	if !slices.Contains(got, want) {
		t.Errorf("got %q\nwant %q", got, want)
	}
	if b, _ := p.EpochBytes("m"); b != 60*each {
		t.Errorf("EpochBytes(m) = %d, want %d", b, 60*each)
	}
}

// TestEpochBytes: one epoch of a stage's output, what an in-memory cache
// after it would hold: -1 where the count is unknown (a filter above),
// a lower bound where strings are counted empty.
func TestEpochBytes(t *testing.T) {
	p := compileWith(t, `version: 1
name: p
stages:
  - {name: r, type: range, count: 100}
  - {name: m, type: map, set: {x: 'one_hot(0, 2500)'}}
  - {name: s, type: map, set: {t: 'repeat("x", 10)'}}
  - {name: f, type: filter, where: 'index > 2'}
  - {name: out, type: discard}
`, plan.Options{Workers: 2})
	for _, tc := range []struct {
		stage string
		bytes int64
		exact bool
	}{
		// Each sample's origin is counted as plan.OriginAllowance, 128.
		{"r", 100 * (205 + 128), true},
		{"m", 100 * (10334 + 128), true},  // 10.22KiB each, as TestFitInMemoryCache has it
		{"s", 100 * (10399 + 128), false}, // and a string of at least nothing
		{"f", -1, false},
		{"nope", -1, false},
	} {
		if bytes, exact := p.EpochBytes(tc.stage); bytes != tc.bytes || exact != tc.exact {
			t.Errorf("%s: %d, %v; want %d, %v", tc.stage, bytes, exact, tc.bytes, tc.exact)
		}
	}
}

// TestEndlessDiagnostics: in an endless run a file sink's input never
// ends unless a take above it ends it, and its file appears only when the
// run ends: such a run can only be stopped, which commits nothing (a user
// test: validate said "1 spec valid", and Ctrl-C after 381 epochs left no
// output). A serve sink, which streams, and a run of set epochs are fine.
func TestEndlessDiagnostics(t *testing.T) {
	const src = `version: 1
name: e
epochs: EPOCHS
stages:
  - {name: r, type: range, count: 1000}
  - MIDDLE
  - SINK
`
	const jsonl, tfr = "{name: out, type: write_jsonl, path: o.jsonl}", "{name: out, type: write_tfrecord, path: o.tfrecord}"
	const warn = `warning: stages[2]: with epochs: 0 the input of this sink never ends (no take above it), and its output is renamed into place only when the run ends: stopped, the run commits nothing; set epochs, or put a take above this sink`
	for _, tc := range []struct{ epochs, middle, sink, want string }{
		{"0", "{name: m, type: map, set: {a: index}}", jsonl, warn},
		{"0", "{name: m, type: map, set: {a: index}}", tfr, warn},
		{"0", "{name: t, type: take, count: 5000}", jsonl, ``},
		{"0", "{name: m, type: map, set: {a: index}}", "{name: out, type: discard}", ``},
		{"0", "{name: m, type: map, set: {a: index}}", "{name: out, type: serve, listen: 'unix:///tmp/e.sock'}", ``},
		{"1", "{name: m, type: map, set: {a: index}}", jsonl, ``},
		{"3", "{name: m, type: map, set: {a: index}}", tfr, ``},
	} {
		s := strings.NewReplacer("EPOCHS", tc.epochs, "MIDDLE", tc.middle, "SINK", tc.sink).Replace(src)
		var got []string
		for _, d := range compileWith(t, s, plan.Options{}).EndlessDiagnostics() {
			got = append(got, string(d.Severity)+": "+d.Path+": "+d.Message)
		}
		if strings.Join(got, "\n") != tc.want {
			t.Errorf("epochs %s, %s, %s:\n got %q\nwant %q", tc.epochs, tc.middle, tc.sink, got, tc.want)
		}
	}
}

// TestFitSaturates: a buffer near int64's limit times the sample size
// wrapped around to a share that fit (a batch of 2^62 images of 150528
// bytes was valid, and its run stalled); the shares saturate, and the fit
// refuses them.
func TestFitSaturates(t *testing.T) {
	const src = `version: 1
name: s
resources: {memory: 64MiB}
stages:
  - {name: r, type: range, count: 1000}
  - {name: m, type: map, set: {image: 'one_hot(index % 10, 150528)'}, keep: [image]}
  - {name: b, type: batch, size: SIZE}
  - {name: out, type: discard}
`
	// Where the batch's own size overflows too, it counts as at least
	// that much, and the fit names it.
	for _, tc := range []struct{ size, want string }{
		// The advice is what fits, each sample counted twice (buffered,
		// then batched): 55 × 2 × 588.25KiB in the 64MiB less m's.
		{"4611686018427387904", "stages[2].size: stage \"b\" buffers 4611686018427387904 samples of about 588.25KiB each = 8388608TiB, more than resources.memory (64MiB): lower its size to 55 "},
		{"9223372036854775807", "stages[2].size: stage \"b\" buffers 9223372036854775807 samples of at least 588.25KiB each = 8388608TiB, more than resources.memory (64MiB): lower its size to 55 "},
		{"61270662738314", "stages[2].size: stage \"b\" buffers 61270662738314 samples of at least 588.25KiB each = 8388608TiB, more than resources.memory (64MiB): lower its size to 55 "},
	} {
		p := compileWith(t, strings.Replace(src, "SIZE", tc.size, 1), plan.Options{})
		var got []string
		for _, d := range p.FitDiagnostics() {
			if d.Severity == spec.SevError {
				got = append(got, d.Path+": "+d.Message)
			}
		}
		if len(got) != 1 || !strings.HasPrefix(got[0], tc.want) {
			t.Errorf("batch of %s: errors %q\nwant one beginning %q", tc.size, got, tc.want)
		}
	}
}

// TestFitLowerBoundsFollowTheSamples: a string in the samples makes their
// size a lower bound, which must still count what is known of them where
// it flows: through a batch (whose leading dimension is "?" without
// drop_remainder) into a prefetch or shuffle after it, and into a shuffle
// the run shrinks to its share. A review found a prefetch of 50 batches
// of 6.1MiB refused without the string and passed with it (each batch
// counted as 16KiB), and a shuffle refused with it that without it was
// shrunk with a warning.
func TestFitLowerBoundsFollowTheSamples(t *testing.T) {
	const src = `version: 1
name: p
optimize: false
resources: {memory: 64MiB}
stages:
  - {name: r, type: range, count: 2000}
  - {name: m, type: map, set: {v: 'one_hot(index %% 10, 100000)'%s}}
%s  - {name: out, type: discard}
`
	for _, tc := range []struct {
		name, tail  string
		errs, warns int
	}{
		{"prefetch after batch", "  - {name: b, type: batch, size: 16}\n  - {name: q, type: prefetch, buffer: 50}\n", 1, 0},
		{"shuffle after batch", "  - {name: b, type: batch, size: 16}\n  - {name: q, type: shuffle, buffer: 50}\n", 0, 1},
		{"shuffle before batch", "  - {name: q, type: shuffle, buffer: 1000}\n  - {name: b, type: batch, size: 10}\n", 0, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			known := compileWith(t, fmt.Sprintf(src, "", tc.tail), plan.Options{Workers: 2})
			lower := compileWith(t, fmt.Sprintf(src, `, s: '"x"'`, tc.tail), plan.Options{Workers: 2})
			if k, l := known.Node("q").Share, lower.Node("q").MinShare; l < k {
				t.Errorf("q's lower bound %d is below its share without the string, %d", l, k)
			}
			for _, p := range []*plan.Plan{known, lower} {
				var errs, warns int
				var msgs []string
				for _, f := range p.Fit() {
					if f.Warning {
						warns++
					} else {
						errs++
					}
					msgs = append(msgs, f.Message)
				}
				if errs != tc.errs || warns != tc.warns {
					t.Errorf("%d errors and %d warnings, want %d and %d:\n%s", errs, warns, tc.errs, tc.warns, strings.Join(msgs, "\n"))
				}
			}
		})
	}
}

// TestTextShowsACachesFirstPass: plan's table shows what an in-memory
// cache holds, its whole first pass, not one sample (a review: 588KiB
// shown where the run held 115MiB), and the total counts those values
// once, not again for the shuffle below that holds the same samples (a
// review: twice the run's peak); where the pass's length is unknown
// (files not listed), the last line says that.
func TestTextShowsACachesFirstPass(t *testing.T) {
	for _, tc := range []struct{ source, row, last string }{
		{"{name: src, type: range, count: 20}", "c cache m 1 0 256.33KiB 5.01MiB",
			"memory: the shares total 5.26MiB (with the first pass that c holds in memory, counted once for the stages below that hold its samples) of the 64MiB budget; queues between stages take what is left"},
		{"{name: src, type: files, pattern: '*.jsonl'}", "c cache m 1 0 ? >=",
			"(and the first pass that c holds in memory, up to half the budget, its length unknown here: validate counts the files) of the 64MiB budget; queues between stages take what is left"},
	} {
		p := compileWith(t, `version: 1
name: p
epochs: 2
resources: {memory: 64MiB}
stages:
  - `+tc.source+`
  - {name: m, type: map, set: {v: 'one_hot(0, 65536)'}}
  - {name: c, type: cache}
  - {name: s, type: shuffle, buffer: 20}
  - {name: out, type: discard}
`, plan.Options{})
		var b strings.Builder
		p.Text(&b)
		lines := strings.Split(strings.TrimSpace(b.String()), "\n")
		row := ""
		for _, l := range lines {
			if strings.HasPrefix(l, "c ") {
				row = strings.Join(strings.Fields(l)[:7], " ")
			}
		}
		if !strings.HasPrefix(row, tc.row) || !strings.HasSuffix(lines[len(lines)-1], tc.last) {
			t.Errorf("cache row %q, last line %q;\nwant %q… and …%q", row, lines[len(lines)-1], tc.row, tc.last)
		}
	}
}

// TestTextCountsAMapBelowACache: a map below an in-memory cache makes new
// values, of the same schema or not, so a shuffle after it holds its own
// and the total counts them (a re-test: plan said 37.76MiB, the run held
// 75.7MiB, the shuffle taken for one holding the cache's samples).
func TestTextCountsAMapBelowACache(t *testing.T) {
	p := compileWith(t, `version: 1
name: p
epochs: 2
resources: {memory: 64MiB}
stages:
  - {name: src, type: range, count: 20}
  - {name: m, type: map, set: {v: 'one_hot(0, 65536)'}}
  - {name: c, type: cache}
  - {name: f, type: map, set: {v: 'one_hot(1, 65536)'}}
  - {name: s, type: shuffle, buffer: 20}
  - {name: out, type: discard}
`, plan.Options{})
	var b strings.Builder
	p.Text(&b)
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	want := "memory: the shares total 10.77MiB (with the first pass that c holds in memory, counted once for the stages below that hold its samples) of the 64MiB budget; queues between stages take what is left"
	if got := lines[len(lines)-1]; got != want {
		t.Errorf("last line\n%q\nwant\n%q", got, want)
	}
}

// TestFitCountsACachesPassOnceBelowAFanOut: two shuffles below an
// in-memory cache hold its samples, whose values the engine reserves once
// with the cache's pass: validate's fit counts them so, as plan's table
// does (a re-test: validate refused budgets from 80 to 128MiB that plan
// said were enough and the run fitted in, each shuffle counted in full).
func TestFitCountsACachesPassOnceBelowAFanOut(t *testing.T) {
	p := compileWith(t, `version: 1
name: p
epochs: 2
resources: {memory: 96MiB}
stages:
  - {name: r, type: range, count: 190}
  - {name: m, type: map, set: {v: 'one_hot(0, 65536)'}, keep: [v]}
  - {name: c, type: cache}
  - {name: s1, type: shuffle, buffer: 190, input: c}
  - {name: s2, type: shuffle, buffer: 190, input: c}
  - {name: o1, type: discard, input: s1}
  - {name: o2, type: discard, input: s2}
`, plan.Options{})
	for _, f := range p.Fit() {
		if !f.Warning {
			t.Errorf("fit: %s: %s", f.Path, f.Message)
		}
	}
}

// TestTextOfARandomSeedIsStable: a spec without a seed plans the same text
// every time, so that plans can be diffed in review; the seed drawn for a
// plan runs nothing, and printing it made every plan differ.
func TestTextOfARandomSeedIsStable(t *testing.T) {
	src := "version: 1\nname: p\nresources: {memory: 64MiB, workers: 2}\nstages:\n  - {name: src, type: range, count: 4}\n  - {name: out, type: discard}\n"
	var texts []string
	for range 2 {
		p := compileWith(t, src, plan.Options{})
		if !p.SeedRandom {
			t.Fatal("no seed in the spec, yet the plan's seed is not random")
		}
		var b strings.Builder
		p.Text(&b)
		texts = append(texts, b.String())
	}
	head, _, _ := strings.Cut(texts[0], "\n")
	if want := "pipeline p: 2 stages, seed random, epochs 1, deterministic true, memory 64MiB, workers 2"; head != want {
		t.Errorf("header:\n got %s\nwant %s", head, want)
	}
	if texts[0] != texts[1] {
		t.Errorf("two plans of one spec differ:\n%s\n%s", texts[0], texts[1])
	}
}

// fitMessages returns the messages of p's fit problems, in order.
func fitMessages(p *plan.Plan) []string {
	var got []string
	for _, f := range p.Fit() {
		got = append(got, f.Message)
	}
	return got
}
