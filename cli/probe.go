package cli

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"go.uber.org/zap"

	"github.com/piperun/piperun/engine"
	"github.com/piperun/piperun/plan"
	"github.com/piperun/piperun/stages"
)

// probe runs the pipeline until every sink has received n samples and
// returns each stage's average output sample size (a batch's: a full
// one's), for the estimates a spec cannot give (bytes fields, images of
// unknown size). Its sinks discard, so a probe writes no output (a cache
// stage with a dir fills as in a run: that is no output, and the next run
// reads it).
func probe(parent context.Context, g *globals, p *plan.Plan, n int64) (map[string]int64, error) {
	ctx, cancel := context.WithCancel(parent)
	defer cancel()
	// The sinks discard: a pipeline that ends within the probe would
	// otherwise commit its outputs, and a serve sink wait for a trainer.
	defer stopsGracefully()()
	run, err := engine.Start(ctx, p, engine.Options{Registry: g.registry, Log: zap.NewNop(), DiscardSinks: true})
	if err != nil {
		return nil, err
	}
	g.log.Debug("probe running", zap.String("pipeline", p.Spec.Name), zap.Int64("samples_per_sink", n))
	t := time.NewTicker(10 * time.Millisecond)
	defer t.Stop()
	starve := newStarvation(run)
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
				if s.Samples >= n {
					continue
				}
				if ended, _, _ := run.SinkState(name); !ended {
					enough = false
				}
				if err := starve.check(name, s.Samples); err != nil && starved == nil {
					starved = fmt.Errorf("probe: sink %q got %d of %d samples and %w", name, s.Samples, n, err)
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
		// A batch without drop_remainder is counted as a full one, as the
		// plan counts it: the mean of the batches a short probe saw (64
		// rows and 1) made half a batch of one.
		if n := p.Node(name); n != nil && st.In > 0 {
			if b, ok := n.Stage.Config.(*stages.BatchConfig); ok && b.Size > 0 {
				full := float64(st.Bytes) / float64(st.In) * float64(b.Size)
				avg[name] = max(avg[name], int64(min(full, math.MaxInt64/2)))
			}
		}
	}
	return avg, nil
}

// starvation tells a sink that will never get another sample: one that
// gets nothing while the sources above it read engine.EmptyEpochs epochs.
// The engine's own check for endless runs sees only that some sink gets
// samples; the probe and bench wait for particular sinks.
type starvation struct {
	run  *engine.Run
	last map[string][2]int64 // sink: samples, epochs above it, when it last grew
}

func newStarvation(run *engine.Run) *starvation {
	return &starvation{run: run, last: map[string][2]int64{}}
}

// check notes that sink has samples now, and returns an error once it is
// starved. A sink whose input ended (a take above it) is never starved.
func (st *starvation) check(sink string, samples int64) error {
	ended, opened, _ := st.run.SinkState(sink)
	if ended {
		return nil
	}
	l, ok := st.last[sink]
	if !ok || l[0] != samples {
		st.last[sink] = [2]int64{samples, opened}
		return nil
	}
	if opened-l[1] >= engine.EmptyEpochs {
		return fmt.Errorf("nothing more while the sources above it read %d epochs: a stage above it drops every sample (a filter that passes none, a skip)", opened-l[1])
	}
	return nil
}
