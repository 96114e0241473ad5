package cli

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/piperun/piperun/engine"
	"github.com/piperun/piperun/plan"
)

// probe runs the pipeline until every sink has received n samples and
// returns each stage's average output sample size, for the estimates a
// spec cannot give (bytes fields, images of unknown size). Its sinks
// discard, so a probe writes no output (a cache stage with a dir fills as
// in a run: that is no output, and the next run reads it).
func probe(parent context.Context, g *globals, p *plan.Plan, n int64) (map[string]int64, error) {
	ctx, cancel := context.WithCancel(parent)
	defer cancel()
	// The sinks discard: a pipeline that ends within the probe would
	// otherwise commit its outputs, and a serve sink wait for a trainer.
	run, err := engine.Start(ctx, p, engine.Options{Registry: g.registry, Log: zap.NewNop(), DiscardSinks: true})
	if err != nil {
		return nil, err
	}
	t := time.NewTicker(10 * time.Millisecond)
	defer t.Stop()
	// A sink short of n that gets nothing while the sources read
	// engine.EmptyEpochs epochs never will: an endless run would probe for
	// ever (the engine's own check sees only that some sink gets samples).
	type seen struct{ samples, opened int64 }
	last := map[string]seen{}
	var starved error
wait:
	for {
		select {
		case <-run.Done():
			break wait
		case <-t.C:
			rep := run.Progress()
			enough := len(rep.Sinks) > 0
			for name, s := range rep.Sinks {
				ended, opened, _ := run.SinkState(name)
				if s.Samples >= n || ended {
					continue // a sink whose input ended (a take above it) has all it gets
				}
				enough = false
				l, ok := last[name]
				switch {
				case !ok || l.samples != s.Samples:
					last[name] = seen{s.Samples, opened}
				case opened-l.opened >= engine.EmptyEpochs && starved == nil:
					starved = fmt.Errorf("probe: sink %q got %d of %d samples and nothing more while the sources above it read %d epochs: a stage above it drops every sample (a filter that passes none, a skip)", name, s.Samples, n, opened-l.opened)
					cancel()
				}
			}
			if enough {
				cancel()
			}
		}
	}
	rep, err := run.Wait()
	switch {
	case starved != nil:
		return nil, starved
	case parent.Err() != nil:
		// Interrupted (Ctrl-C, a CI timeout): the probe measured nothing
		// whole, and validate must not call the spec valid.
		return nil, fmt.Errorf("probe interrupted before every sink had %d samples", n)
	case err != nil && !errors.Is(err, context.Canceled):
		return nil, fmt.Errorf("probe: %w", err)
	}
	avg := map[string]int64{}
	for name, st := range rep.Stages {
		if st.Out > 0 {
			avg[name] = st.Bytes / st.Out
		}
	}
	return avg, nil
}
