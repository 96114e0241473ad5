package spec_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestSpecKnowsNothingOfTheRuntime: spec parses, defaults and validates;
// the packages that run a pipeline (goroutines, the memory budget, the
// Badger cache, NVML) stay out of its imports, direct or not, so that
// validate is the same code whatever the runtime does.
func TestSpecKnowsNothingOfTheRuntime(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	deps := strings.Fields(string(out))
	if len(deps) < 10 {
		t.Fatalf("go list -deps listed only %q", deps)
	}
	forbidden := []string{
		"github.com/piperun/piperun/budget",
		"github.com/piperun/piperun/cache",
		"github.com/piperun/piperun/engine",
		"github.com/piperun/piperun/gpu",
		"github.com/piperun/piperun/plan",
		"github.com/piperun/piperun/serve",
		"github.com/piperun/piperun/stages",
		"github.com/dgraph-io/badger",
		"github.com/NVIDIA/go-nvml",
		"golang.org/x/sync",
		"go.uber.org/zap",
	}
	for _, d := range deps {
		for _, f := range forbidden {
			if d == f || strings.HasPrefix(d, f+"/") {
				t.Errorf("spec depends on %s", d)
			}
		}
	}
}
