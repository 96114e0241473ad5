package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/piperun/piperun/internal/testutil"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/piperun/piperun/engine"
	"github.com/piperun/piperun/plan"
	"github.com/piperun/piperun/sample"
	"github.com/piperun/piperun/spec"
	"github.com/piperun/piperun/stages"
)

// photoCacheSpec decodes twelve JPEGs, two of them corrupt (01 and 10),
// skipping those, into an on-disk cache. The gate, a no-op unless a test
// closes it, lets a test stop the fill at a chosen file.
const photoCacheSpec = `
version: 1
name: photos
seed: 1
stages:
  - {name: files, type: files, pattern: 'img/*.jpg'}
  - {name: gate, type: gate}
  - name: decode
    type: map
    on_error: skip
    set: {img: 'decode_image(read_file(path), 3)'}
  - {name: c, type: cache, dir: cache, commit_every: 1}
  - {name: batch, type: batch, size: 4}
  - {name: out, type: discard}
`

func mustWrite(t *testing.T, path string, b []byte) {
	t.Helper()
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

type gateConfig struct{}

func (*gateConfig) Check(cc *spec.CheckContext) sample.Schema { return cc.Input() }

// gate passes samples on, except that while stopAt is set it holds the
// sample whose path ends in it until the run is cancelled, saying so on
// held.
type gate struct {
	stopAt string
	held   chan struct{}
	once   sync.Once
}

func (g *gate) Process(ctx context.Context, s *sample.Sample, emit stages.Emit) error {
	if p, _ := s.Fields["path"].(string); g.stopAt != "" && strings.HasSuffix(p, g.stopAt) {
		g.once.Do(func() { close(g.held) })
		<-ctx.Done()
		return ctx.Err()
	}
	return emit(s)
}

// runGated runs src with the gate g, one sample to a chunk so that the
// samples before the gate's go on below it while it holds one.
func runGated(ctx context.Context, t *testing.T, g *gate, dir, src string) (*engine.Report, error) {
	t.Helper()
	reg := stages.Default()
	reg.Register(&stages.Type{
		StageType: spec.StageType{Name: "gate", Role: spec.RoleTransform, NewConfig: func() any { return &gateConfig{} }},
		Build:     func(*stages.Env, any) (any, error) { return g, nil },
	})
	sp, diags := spec.Parse(filepath.Join(dir, "spec.yaml"), []byte(src), spec.Options{Catalog: reg})
	if diags.HasErrors() {
		t.Fatalf("spec problems:\n%v", diags)
	}
	p, err := plan.Compile(sp, reg, plan.Options{ChunkSize: 1})
	if err != nil {
		t.Fatal(err)
	}
	run, err := engine.Start(ctx, p, engine.Options{Registry: reg})
	if err != nil {
		return nil, err
	}
	return run.Wait()
}

// cachedSamples is the sample count of the only cache's manifest under
// dir/cache, -1 before it has one that parses.
func cachedSamples(dir string) int64 {
	ms, _ := filepath.Glob(filepath.Join(dir, "cache", "*", "manifest.json"))
	if len(ms) != 1 {
		return -1
	}
	b, err := os.ReadFile(ms[0])
	var m struct{ Samples int64 }
	if err != nil || json.Unmarshal(b, &m) != nil {
		return -1
	}
	return m.Samples
}

// checkFillSkips checks a cache's record of its fill: 2 skipped in
// decode, the causes naming 01.jpg and 10.jpg.
func checkFillSkips(t *testing.T, run string, c stages.CacheStats) {
	t.Helper()
	causes := c.SkipCausesWhenFilled["decode"]
	if len(c.SkippedWhenFilled) != 1 || c.SkippedWhenFilled["decode"] != 2 || len(causes) != 2 ||
		!strings.Contains(causes[0], "01.jpg: ") || !strings.Contains(causes[1], "10.jpg: ") {
		t.Errorf("%s: skipped_when_filled %v, causes %q; want decode 2, for 01.jpg and 10.jpg", run, c.SkippedWhenFilled, causes)
	}
}

// TestCacheRecordsWhatItsFillSkipped: the run filling a cache skips the
// two corrupt JPEGs; a run replaying it skips nothing (nothing above the
// cache runs) yet its report still says, under the cache, that the data
// behind it lacks those two (the replay's report
// said skipped {}, so a CI gate could not tell). A cache filled before
// piperun recorded it says nothing, not 0.
func TestCacheRecordsWhatItsFillSkipped(t *testing.T) {
	dir := t.TempDir()
	testutil.WritePhotos(t, dir)
	g := &gate{}
	rep, err := runGated(context.Background(), t, g, dir, photoCacheSpec)
	if err != nil {
		t.Fatal(err)
	}
	c := rep.Caches["c"]
	if rep.Skipped["decode"] != 2 || c.Written != 10 || !c.Complete || c.FilledBefore {
		t.Fatalf("filling run: skipped %v, cache %+v; want decode 2 and 10 samples written", rep.Skipped, c)
	}
	checkFillSkips(t, "filling run", c)

	rep, err = runGated(context.Background(), t, g, dir, photoCacheSpec)
	if err != nil {
		t.Fatal(err)
	}
	c = rep.Caches["c"]
	if len(rep.Skipped) != 0 || rep.Stages["decode"].In != 0 || c.FromCache != 10 || !c.FilledBefore {
		t.Fatalf("replay: skipped %v, decode took %d, cache %+v; want nothing skipped or decoded, 10 from the cache", rep.Skipped, rep.Stages["decode"].In, c)
	}
	checkFillSkips(t, "replay", c)
	b, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"skipped":{}`) || !strings.Contains(string(b), `"skipped_when_filled":{"decode":2}`) {
		t.Errorf("replay report: %s", b)
	}

	// A manifest written before the record existed: unknown, so absent.
	ms, _ := filepath.Glob(filepath.Join(dir, "cache", "*", "manifest.json"))
	var m map[string]any
	raw, err := os.ReadFile(ms[0])
	if err != nil || json.Unmarshal(raw, &m) != nil {
		t.Fatalf("manifest: %v\n%s", err, raw)
	}
	if fmt.Sprint(m["skipped_when_filled"]) != "map[decode:2]" {
		t.Errorf("manifest's skipped_when_filled = %v, want decode 2", m["skipped_when_filled"])
	}
	delete(m, "skipped_when_filled")
	delete(m, "skip_causes_when_filled")
	raw, _ = json.Marshal(m)
	mustWrite(t, ms[0], raw)
	rep, err = runGated(context.Background(), t, g, dir, photoCacheSpec)
	if err != nil {
		t.Fatal(err)
	}
	if c := rep.Caches["c"]; c.SkippedWhenFilled != nil || c.FromCache != 10 {
		t.Errorf("replay of an older cache: %+v, want no record", c)
	}
	if b, _ := json.Marshal(rep); strings.Contains(string(b), "when_filled") {
		t.Errorf("replay of an older cache: %s", b)
	}
}

// TestResumedFillCountsEachSkipOnce: a fill stopped after 05.jpg has
// skipped 01.jpg and stored the other five. The run that resumes it
// computes every sample the cache lacks, 01.jpg among them, so it skips
// 01.jpg again as well as 10.jpg: its own count, 2, is the whole fill's.
// Adding the stopped run's 1 would count 01.jpg twice.
func TestResumedFillCountsEachSkipOnce(t *testing.T) {
	dir := t.TempDir()
	testutil.WritePhotos(t, dir)
	g := &gate{stopAt: "06.jpg", held: make(chan struct{})}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		<-g.held
		for deadline := time.Now().Add(30 * time.Second); cachedSamples(dir) < 5 && time.Now().Before(deadline); {
			time.Sleep(time.Millisecond)
		}
		cancel()
	}()
	rep, err := runGated(ctx, t, g, dir, photoCacheSpec)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("stopped run: %v, want it cancelled", err)
	}
	if c := rep.Caches["c"]; rep.Skipped["decode"] != 1 || c.Written != 5 || c.Complete || c.SkippedWhenFilled != nil {
		t.Fatalf("stopped run: skipped %v, cache %+v; want decode 1, 5 samples stored, no record", rep.Skipped, c)
	}

	g.stopAt = ""
	rep, err = runGated(context.Background(), t, g, dir, photoCacheSpec)
	if err != nil {
		t.Fatal(err)
	}
	c := rep.Caches["c"]
	if c.Resumed != 5 || c.Written != 5 || !c.Complete || rep.Stages["decode"].PassedToCache != 5 || rep.Skipped["decode"] != 2 {
		t.Fatalf("resumed run: skipped %v, decode %+v, cache %+v; want 5 resumed and passed, 5 written, decode 2 skipped", rep.Skipped, rep.Stages["decode"], c)
	}
	checkFillSkips(t, "resumed run", c)

	rep, err = runGated(context.Background(), t, g, dir, photoCacheSpec)
	if err != nil {
		t.Fatal(err)
	}
	if c := rep.Caches["c"]; len(rep.Skipped) != 0 || c.FromCache != 10 {
		t.Fatalf("replay: skipped %v, cache %+v", rep.Skipped, c)
	}
	checkFillSkips(t, "replay after the resumed fill", rep.Caches["c"])
}

// TestCacheBelowACacheKeepsBothRecords: a cache filled below another that
// replays an earlier fill records what the stages above that one skipped
// then (they skip nothing now), besides what its own stages skip.
func TestCacheBelowACacheKeepsBothRecords(t *testing.T) {
	dir := t.TempDir()
	src := `
version: 1
name: two
stages:
  - {name: src, type: range, count: 20}
  - {name: m1, type: map, on_error: skip, set: {x: 'index == 3 || index == 7 ? int(string(index) + "x") : index'}}
  - {name: c1, type: cache, dir: c1}
  - {name: m2, type: map, on_error: skip, set: {y: 'index == 11 ? int(string(index) + "y") : index'}}
  - {name: c2, type: cache, dir: c2}
  - {name: out, type: discard}
`
	want := map[string]string{"c1": "map[m1:2]", "c2": "map[m1:2 m2:1]"}
	rep, err := runSpec(t, dir, src)
	if err != nil {
		t.Fatal(err)
	}
	for name, w := range want {
		if got := fmt.Sprint(rep.Caches[name].SkippedWhenFilled); got != w {
			t.Errorf("first run: %s skipped_when_filled %s, want %s", name, got, w)
		}
	}
	if err := os.RemoveAll(filepath.Join(dir, "c2")); err != nil {
		t.Fatal(err)
	}
	rep, err = runSpec(t, dir, src)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(rep.Skipped) != "map[m2:1]" || !rep.Caches["c1"].FilledBefore || rep.Caches["c2"].FilledBefore {
		t.Fatalf("refilling c2: skipped %v, caches %+v", rep.Skipped, rep.Caches)
	}
	for name, w := range want {
		if got := fmt.Sprint(rep.Caches[name].SkippedWhenFilled); got != w {
			t.Errorf("refilling c2: %s skipped_when_filled %s, want %s", name, got, w)
		}
	}
	if cs := rep.Caches["c2"].SkipCausesWhenFilled; len(cs["m1"]) != 2 || len(cs["m2"]) != 1 {
		t.Errorf("refilling c2: causes %q", cs)
	}
}
