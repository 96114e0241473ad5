package stages

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"

	"github.com/piperun/piperun/plan"
	"github.com/piperun/piperun/sample"
	"github.com/piperun/piperun/spec"
)

// The hooks this file's types provide, checked by the compiler: the
// engine and planner find them by type assertion, where a changed
// signature would silently turn a hook off.
var (
	_ plan.JoinCounter = (*MixConfig)(nil)
	_ spec.Checker     = (*MixConfig)(nil)
	_ InputEnder       = (*mixStage)(nil)
	_ Joiner           = (*mixStage)(nil)
)

// MixConfig configures the mix stage (tf.data's sample_from_datasets).
type MixConfig struct {
	Weights     []float64 `yaml:"weights" jsonschema_description:"Relative chance of drawing from each input; default equal."`
	StopOnEmpty bool      `yaml:"stop_on_empty" jsonschema_description:"End the epoch when any input runs out, rather than drawing from the rest."`
}

// EpochSamplesOf implements plan.JoinCounter: the counts of the inputs it
// draws from summed, unknown with stop_on_empty, which ends where the
// draws say.
func (c *MixConfig) EpochSamplesOf(ins []int64) int64 {
	if c.StopOnEmpty {
		return -1
	}
	return sumCounts(ins, c.Weights)
}

func init() {
	register(&Type{
		StageType: spec.StageType{Name: "mix", Role: spec.RoleJoin, Doc: "Draws each sample from a randomly chosen input, by weight.",
			NewConfig: func() any { return &MixConfig{} }},
		Build: func(env *Env, cfg any) (any, error) {
			c := cfg.(*MixConfig)
			w := c.Weights
			if len(w) == 0 {
				w = make([]float64, len(env.Stage.Inputs))
				for i := range w {
					w[i] = 1
				}
			}
			return &mixStage{env: env, weights: w, stopOnEmpty: c.StopOnEmpty}, nil
		},
	})
}

// Check implements spec.Checker: inputs must agree on their fields.
func (c *MixConfig) Check(cc *spec.CheckContext) sample.Schema {
	if len(c.Weights) > 0 && len(c.Weights) != len(cc.Inputs) {
		cc.Errorf("weights", "has %d weights for %d inputs", len(c.Weights), len(cc.Inputs))
	}
	sum, bad := 0.0, false
	for i, w := range c.Weights {
		switch {
		case math.IsNaN(w) || math.IsInf(w, 0):
			cc.Errorf(fmt.Sprintf("weights[%d]", i), "must be a finite number, got %v", w)
			bad = true
		case w < 0:
			cc.Errorf(fmt.Sprintf("weights[%d]", i), "must not be negative, got %v", w)
			bad = true
		default:
			sum += w
		}
	}
	if len(c.Weights) > 0 && sum <= 0 && !bad {
		cc.Errorf("weights", "must not all be zero")
	}
	if sum > 0 && len(c.Weights) == len(cc.Stage.Inputs) {
		for i, w := range c.Weights {
			if w == 0 {
				cc.Warnf(fmt.Sprintf("weights[%d]", i), "is 0: input %q is never read", cc.Stage.Inputs[i].Name)
			}
		}
	}
	// Random draws put one of two branches of a stage ahead of the other
	// by a random walk's reach; past the queue between them the shared
	// stage waits for the branch behind, which waits for it (a re-test:
	// 2 runs of 3 stalled at 50000 samples, and validate said nothing).
	switch a, b, common := sharedStage(cc.Stage.Inputs); {
	case common == nil:
	case a == b:
		cc.Warnf("inputs", "inputs name %q twice, and mix draws them at random: one runs ahead of the other, by more the longer the epoch, and once that passes the queue between them (a few chunks of samples) the run stops. To draw each sample twice, use a second source stage",
			a.Name)
	default:
		cc.Warnf("inputs", "inputs %q and %q both read from stage %q, and mix draws them at random: one branch runs ahead of the other, by more the longer the epoch, and once that passes the queue between them (a few chunks of samples) the run stops. Give each input its own source, or use zip",
			a.Name, b.Name, common.Name)
	}
	return sameSchema(cc)
}

// sameSchema checks that all inputs carry the same fields and returns them.
func sameSchema(cc *spec.CheckContext) sample.Schema {
	if len(cc.Inputs) == 0 {
		return sample.Schema{Open: true}
	}
	first := cc.Inputs[0]
	open := first.Open
	for i, s := range cc.Inputs[1:] {
		if s.Open || first.Open {
			// What the open one carries is not known: neither is what
			// this stage passes on (an input in error, or a jsonl's).
			open = true
			continue
		}
		if fmt.Sprint(sortedFields(s)) != fmt.Sprint(sortedFields(first)) {
			cc.Errorf("inputs", "inputs carry different fields: %s gives %s, %s gives %s",
				cc.Stage.InputNames[0], first, cc.Stage.InputNames[i+1], s)
		}
	}
	first.Open = open
	return first
}

func sortedFields(s sample.Schema) []string {
	out := make([]string, len(s.Fields))
	for i, f := range s.Fields {
		out[i] = f.Name + ":" + f.Type.String()
	}
	sortStrings(out)
	return out
}

type mixStage struct {
	env         *Env
	weights     []float64
	stopOnEmpty bool
}

// EndsWithAnInput implements InputEnder: with stop_on_empty.
func (m *mixStage) EndsWithAnInput() bool { return m.stopOnEmpty }

func (m *mixStage) JoinEpoch(_ context.Context, epoch, _ int, pull Pull, emit Emit) error {
	rng := stageRand(m.env.Seed, m.env.Stage.Name, epoch)
	w := append([]float64(nil), m.weights...)
	var id int64
	for {
		total := 0.0
		for _, x := range w {
			total += x
		}
		if total <= 0 {
			return nil
		}
		r := rng.Float64() * total
		i := 0
		for ; i < len(w)-1; i++ {
			if r < w[i] {
				break
			}
			r -= w[i]
		}
		for w[i] == 0 { // floating-point edge: land on a live input
			i = (i + 1) % len(w)
		}
		s, err := pull(i)
		if errors.Is(err, io.EOF) {
			if m.stopOnEmpty {
				return nil
			}
			w[i] = 0
			continue
		}
		if err != nil {
			return err
		}
		s.ID = id
		id++
		if err := emit(s); err != nil {
			return err
		}
	}
}
