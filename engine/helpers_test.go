package engine_test

import (
	"context"
	"image"
	"image/color"
	"image/jpeg"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/piperun/piperun/engine"
	"github.com/piperun/piperun/plan"
	"github.com/piperun/piperun/spec"
	"github.com/piperun/piperun/stages"
)

// parseSpec validates a spec held in a string, as if it were a file in dir.
func parseSpec(t testing.TB, dir, src string) *spec.Spec {
	t.Helper()
	sp, diags := spec.Parse(filepath.Join(dir, "spec.yaml"), []byte(src), spec.Options{Catalog: stages.Default()})
	if diags.HasErrors() {
		t.Fatalf("spec problems:\n%v", diags)
	}
	return sp
}

// writeJPEG writes a w×h photo-like JPEG (smooth gradients plus noise
// drawn from seed) to path.
func writeJPEG(t testing.TB, path string, w, h int, seed int64) {
	t.Helper()
	r := rand.New(rand.NewPCG(uint64(seed), 1))
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	for y := range h {
		for x := range w {
			n := uint8(r.IntN(32))
			img.Set(x, y, color.RGBA{uint8(x*255/w) ^ n, uint8(y*255/h) + n, uint8((x + y) * 3), 255})
		}
	}
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := jpeg.Encode(f, img, &jpeg.Options{Quality: 85}); err != nil {
		t.Fatal(err)
	}
}

// runSpec validates, plans and runs a spec held in a string, in dir.
func runSpec(t testing.TB, dir, src string, set ...string) (*engine.Report, error) {
	t.Helper()
	return runSpecCtx(context.Background(), t, dir, src, set...)
}

func runSpecCtx(ctx context.Context, t testing.TB, dir, src string, set ...string) (*engine.Report, error) {
	t.Helper()
	return runSpecWith(ctx, t, stages.Default(), dir, src, set...)
}

// runSpecWith runs src with the stage types of reg.
func runSpecWith(ctx context.Context, t testing.TB, reg *stages.Registry, dir, src string, set ...string) (*engine.Report, error) {
	t.Helper()
	file := filepath.Join(dir, "spec.yaml")
	sp, diags := spec.Parse(file, []byte(src), spec.Options{Catalog: reg, Set: set})
	if diags.HasErrors() {
		t.Fatalf("spec problems:\n%v", diags)
	}
	p, err := plan.Compile(sp, reg, plan.Options{})
	if err != nil {
		t.Fatal(err)
	}
	run, err := engine.Start(ctx, p, engine.Options{Registry: reg})
	if err != nil {
		return nil, err
	}
	rep, err := run.Wait()
	// Every clean run gives all its memory back.
	if held := run.MemoryHeld(); err == nil && held != 0 {
		t.Errorf("%d bytes of the budget still reserved after the run ended", held)
	}
	return rep, err
}

func readLines(t testing.TB, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s := strings.TrimSuffix(string(b), "\n")
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}

// runLogged runs src, read as the spec file, with the default stages and
// --set overrides set, and returns its report and what it logged, at every
// level.
func runLogged(t *testing.T, file, src string, set ...string) (*engine.Report, *observer.ObservedLogs) {
	t.Helper()
	reg := stages.Default()
	sp, diags := spec.Parse(file, []byte(src), spec.Options{Catalog: reg, Set: set})
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	p, err := plan.Compile(sp, reg, plan.Options{})
	if err != nil {
		t.Fatal(err)
	}
	core, logs := observer.New(zapcore.DebugLevel)
	run, err := engine.Start(context.Background(), p, engine.Options{Registry: reg, Log: zap.New(core)})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := run.Wait()
	if err != nil {
		t.Fatal(err)
	}
	return rep, logs
}
