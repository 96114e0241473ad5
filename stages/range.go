package stages

import (
	"context"
	"io"

	"github.com/piperun/piperun/plan"
	"github.com/piperun/piperun/sample"
	"github.com/piperun/piperun/spec"
)

// The hooks this file's types provide, checked by the compiler: the
// engine and planner find them by type assertion, where a changed
// signature would silently turn a hook off.
var (
	_ plan.Counter = (*RangeConfig)(nil)
	_ spec.Checker = (*RangeConfig)(nil)
	_ Source       = (*rangeSource)(nil)
)

// RangeConfig configures the range source.
type RangeConfig struct {
	Count int64 `yaml:"count" jsonschema:"required,minimum=0" jsonschema_description:"Number of samples per epoch: {index: 0..count-1}."`
}

func init() {
	register(&Type{
		StageType: spec.StageType{Name: "range", Role: spec.RoleSource, Doc: "Emits {index} for 0..count-1 each epoch; for tests and synthetic load.",
			NewConfig: func() any { return &RangeConfig{} }},
		Build: func(env *Env, cfg any) (any, error) { return &rangeSource{n: cfg.(*RangeConfig).Count}, nil },
	})
}

// EpochSamples implements plan.Counter.
func (c *RangeConfig) EpochSamples(int64) int64 { return c.Count }

// Check implements spec.Checker.
func (c *RangeConfig) Check(cc *spec.CheckContext) sample.Schema {
	if c.Count < 0 {
		cc.Errorf("count", "must be 0 or more, got %d", c.Count)
	}
	return sample.Schema{Fields: []sample.Field{{Name: "index", Type: sample.TInt}}}
}

type rangeSource struct {
	n, i  int64
	epoch int
}

func (r *rangeSource) Open(_ context.Context, epoch int) error {
	r.i, r.epoch = 0, epoch
	return nil
}

func (r *rangeSource) Next(context.Context) (*sample.Sample, error) {
	if r.i >= r.n {
		return nil, io.EOF
	}
	s := &sample.Sample{ID: r.i, Epoch: r.epoch, Fields: map[string]any{"index": r.i}}
	r.i++
	return s, nil
}
