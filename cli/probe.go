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
func probe(ctx context.Context, g *globals, p *plan.Plan, n int64) (map[string]int64, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// The sinks discard: a pipeline that ends within the probe would
	// otherwise commit its outputs, and a serve sink wait for a trainer.
	run, err := engine.Start(ctx, p, engine.Options{Registry: g.registry, Log: zap.NewNop(), DiscardSinks: true})
	if err != nil {
		return nil, err
	}
	t := time.NewTicker(10 * time.Millisecond)
	defer t.Stop()
wait:
	for {
		select {
		case <-run.Done():
			break wait
		case <-t.C:
			rep := run.Progress()
			enough := len(rep.Sinks) > 0
			for _, s := range rep.Sinks {
				if s.Samples < n {
					enough = false
				}
			}
			if enough {
				cancel()
			}
		}
	}
	rep, err := run.Wait()
	if err != nil && !errors.Is(err, context.Canceled) {
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
