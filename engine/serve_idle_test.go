package engine_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/piperun/piperun/engine"
	"github.com/piperun/piperun/plan"
	"github.com/piperun/piperun/stages"
)

// TestProgressSaysASinkWaitsForItsFirstTrainer: the live report marks a
// serve sink idle while no trainer has come yet, before it has sent a
// sample (the progress line showed "0 samples 0/s" and nothing of why
// until a trainer had come and gone).
func TestProgressSaysASinkWaitsForItsFirstTrainer(t *testing.T) {
	dir := t.TempDir()
	sp := parseSpec(t, dir, `version: 1
name: idle
stages:
  - {name: src, type: range, count: 4}
  - {name: out, type: serve, listen: unix://s.sock}
`)
	p, err := plan.Compile(sp, stages.Default(), plan.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	run, err := engine.Start(ctx, p, engine.Options{Registry: stages.Default()})
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		s := run.Progress().Sinks["out"]
		if s.Idle {
			if s.Samples != 0 {
				t.Errorf("idle after %d samples with no trainer", s.Samples)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the sink never showed as waiting for a trainer: %+v", s)
		}
	}
	cancel()
	if _, err := run.Wait(); !errors.Is(err, context.Canceled) {
		t.Errorf("run ended with %v, want it cancelled", err)
	}
}
