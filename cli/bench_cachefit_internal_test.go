package cli

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/piperun/piperun/engine"
	"github.com/piperun/piperun/plan"
	"github.com/piperun/piperun/spec"
	"github.com/piperun/piperun/stages"
)

// TestBenchCacheAdviceValidates: the spec with the cache bench advises added
// as it says (in memory, or with dir: and the budget it names) passes
// validate. At resources.memory: 16MiB the advice was a dir: that validate
// refused, its store needing 82MiB; where the advice
// names a budget, validate refuses the cache at the spec's own.
func TestBenchCacheAdviceValidates(t *testing.T) {
	const src = `version: 1
name: c
epochs: EPOCHS
resources: {memory: MEMORY, workers: 2}
stages:
  - {name: r, type: range, count: COUNT}
  - {name: m, type: map, set: {x: 'one_hot(0, 2500)'}}
  - SINK
`
	const head = `map "m" was busy 90% of the time of its worker; give it more parallelism, cores, or less to do`
	const store = "resources.memory of at least 82.02MiB, as its store reserves 82MiB of the budget"
	atLeast := regexp.MustCompile(`resources\.memory of at least (\S+),`)
	for _, tc := range []struct {
		name, memory, epochs, count, want string
		serve                             bool
	}{
		{"in memory", "16MiB", "2", "40",
			head + " (a cache stage right after the expensive work replays its results in later epochs)", false},
		{"with dir:", "256MiB", "2", "20000",
			head + " (a cache stage with dir: right after the expensive work replays its results in later epochs: in memory, its first pass of about FIRSTPASS would not fit the 1/2 of the budget (128MiB) a cache may fill)", false},
		{"with dir: and a larger budget", "16MiB", "2", "5000",
			head + " (a cache stage right after the expensive work would replay its results in later epochs, but in memory, its first pass of about FIRSTPASS would not fit the 1/2 of the budget (8MiB) a cache may fill, and with dir: it needs " + store + ")", false},
		{"epochs: 1", "16MiB", "1", "40",
			head + " (in one epoch a cache replays nothing; a cache stage with dir: right after the expensive work would let later runs read its results, with " + store + ")", false},
		// A serve sink's window (an eighth of the budget) counts too: the
		// advice left it out and named a budget validate refused.
		{"with dir:, serving", "16MiB", "2", "5000",
			head + " (a cache stage right after the expensive work would replay its results in later epochs, but in memory, its first pass of about FIRSTPASS would not fit the 1/2 of the budget (8MiB) a cache may fill, and with dir: it needs resources.memory of at least 93.74MiB, as its store reserves 82MiB of the budget)", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			sink := "{name: out, type: discard}"
			if tc.serve {
				sink = "{name: out, type: serve, listen: 'unix://" + filepath.Join(dir, "s.sock") + "'}"
			}
			body := strings.NewReplacer("EPOCHS", tc.epochs, "COUNT", tc.count, "SINK", sink).Replace(src)
			file := filepath.Join(dir, "spec.yaml")
			reg := stages.Default()
			reg.Register(&stages.Type{StageType: spec.StageType{Name: trainerType, Role: spec.RoleSink, NewConfig: func() any { return &struct{}{} }},
				Build: func(*stages.Env, any) (any, error) { return &trainer{}, nil }}) // planned here, never built
			sp, diags := spec.Parse(file, []byte(strings.ReplaceAll(body, "MEMORY", tc.memory)), spec.Options{Catalog: reg})
			if diags.HasErrors() {
				t.Fatalf("spec problems:\n%v", diags)
			}
			// As bench plans it: its trainer in place of the sink.
			if _, _, err := replaceSinks(sp, file, ""); err != nil {
				t.Fatal(err)
			}
			p, err := plan.Compile(sp, reg, plan.Options{})
			if err != nil {
				t.Fatal(err)
			}
			rep := &engine.Report{Stages: map[string]engine.StageReport{"m": {BusyS: 0.9, Workers: 1}}}
			_, _, why := bottleneck(p, rep, time.Second, "out", 100*time.Millisecond, 0)
			// The first pass's size is plan's estimate (plan.EpochBytes),
			// which this test does not pin down.
			first, _ := p.EpochBytes("m")
			if want := strings.ReplaceAll(tc.want, "FIRSTPASS", spec.ByteSize(first).String()); why != want {
				t.Errorf("advice %q\nwant %q", why, want)
			}
			cache := "{name: c, type: cache}"
			if strings.Contains(why, "with dir:") {
				cache = "{name: c, type: cache, dir: cache}"
			}
			advised := strings.Replace(body, "  - {name: out,", "  - "+cache+"\n  - {name: out,", 1)
			if !strings.Contains(advised, "name: c,") {
				t.Fatalf("no cache added:\n%s", advised)
			}
			validate := func(memory string) (int, string) {
				if err := os.WriteFile(file, []byte(strings.ReplaceAll(advised, "MEMORY", memory)), 0o644); err != nil {
					t.Fatal(err)
				}
				var out, errb bytes.Buffer
				code := Run(context.Background(), []string{"validate", file}, &out, &errb)
				return code, out.String() + errb.String()
			}
			memory := tc.memory
			if m := atLeast.FindStringSubmatch(why); m != nil {
				memory = m[1]
				if code, out := validate(tc.memory); code != 1 || !strings.Contains(out, `stage "c" needs 82MiB for its own use (Badger's tables and caches), more than resources.memory (16MiB)`) {
					t.Errorf("the advised cache at %s: exit %d\n%s\nwant exit 1: its store does not fit", tc.memory, code, out)
				}
			}
			if code, out := validate(memory); code != 0 {
				t.Errorf("the advised %s at %s: exit %d\n%s", cache, memory, code, out)
			}
		})
	}
}
