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
	_ plan.Counter     = (*CountConfig)(nil)
	_ spec.Checker     = (*CountConfig)(nil)
	_ spec.PassThrough = (*CountConfig)(nil)
	_ EpochEnder       = (*takeStage)(nil)
	_ Processor        = (*takeStage)(nil)
)

// CountConfig configures take and skip.
type CountConfig struct {
	Count int64 `yaml:"count" jsonschema:"required,minimum=0" jsonschema_description:"Number of samples per epoch."`
	// skip says the config is skip's, which drops the count rather than
	// keeping it.
	skip bool
}

// EpochSamples implements plan.Counter.
func (c *CountConfig) EpochSamples(in int64) int64 {
	switch {
	case c.skip && in >= 0:
		return max(0, in-c.Count)
	case c.skip:
		return -1
	case in >= 0:
		return min(in, c.Count)
	}
	return -1
}

// PassesThrough implements spec.PassThrough: the stage reads no field.
func (c *CountConfig) PassesThrough(string) bool { return true }

// Check implements spec.Checker.
func (c *CountConfig) Check(cc *spec.CheckContext) sample.Schema {
	if c.Count < 0 {
		cc.Errorf("count", "must be 0 or more, got %d", c.Count)
	}
	return cc.Input()
}

func init() {
	register(&Type{
		StageType: spec.StageType{Name: "take", Role: spec.RoleTransform, Doc: "Passes the first count samples of each epoch (of the whole stream when epochs is 0).",
			NewConfig: func() any { return &CountConfig{} }},
		Build: func(env *Env, cfg any) (any, error) {
			return &takeStage{n: cfg.(*CountConfig).Count, last: env.Spec.Epochs}, nil
		},
	})
}

type takeStage struct {
	n, seen int64
	// last is the spec's epoch count: reaching the count in the last
	// epoch, or in an endless run, ends the stream and stops the work
	// upstream; in an earlier epoch the rest is dropped, as the next epoch
	// begins only once every source's has ended.
	last int
}

func (t *takeStage) Process(_ context.Context, s *sample.Sample, emit Emit) error {
	final := t.last <= 1 || s.Epoch >= t.last-1
	if t.seen >= t.n {
		if final {
			return io.EOF
		}
		return nil
	}
	t.seen++
	if err := emit(s); err != nil {
		return err
	}
	if t.seen >= t.n && final {
		return io.EOF
	}
	return nil
}

func (t *takeStage) EndEpoch(context.Context, int, Emit) error {
	if t.last != 0 {
		t.seen = 0
	}
	return nil
}
