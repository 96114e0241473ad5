package engine_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/piperun/piperun/engine"
	"github.com/piperun/piperun/plan"
	"github.com/piperun/piperun/spec"
	"github.com/piperun/piperun/stages"
)

// runSpec validates, plans and runs a spec held in a string, in dir.
func runSpec(t testing.TB, dir, src string, set ...string) (*engine.Report, error) {
	t.Helper()
	return runSpecCtx(context.Background(), t, dir, src, set...)
}

func runSpecCtx(ctx context.Context, t testing.TB, dir, src string, set ...string) (*engine.Report, error) {
	t.Helper()
	reg := stages.Default()
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
	return run.Wait()
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
