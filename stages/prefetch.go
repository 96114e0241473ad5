package stages

import (
	"context"

	"github.com/piperun/piperun/plan"
	"github.com/piperun/piperun/sample"
	"github.com/piperun/piperun/spec"
)

// The hooks this file's types provide, checked by the compiler: the
// engine and planner find them by type assertion, where a changed
// signature would silently turn a hook off.
var (
	_ plan.Bufferer    = (*PrefetchConfig)(nil)
	_ plan.Counter     = (*PrefetchConfig)(nil)
	_ spec.Checker     = (*PrefetchConfig)(nil)
	_ spec.PassThrough = (*PrefetchConfig)(nil)
	_ Processor        = prefetchStage{}
)

// PrefetchConfig configures the prefetch stage.
type PrefetchConfig struct {
	Buffer spec.Auto `yaml:"buffer" jsonschema_description:"Samples (batches, after batch) kept ready ahead of the consumer; auto = 2 per core."`
}

// MaxPrefetch is the deepest prefetch buffer: its queue is made at its
// full depth as the run starts, a slot a sample, so a depth of 2^63-1
// panicked making it and one of 10^9 would take 8 GB before a sample
// moved. tf.data's prefetch keeps a few batches.
const MaxPrefetch = 1 << 20

// Check implements spec.Checker.
func (c *PrefetchConfig) Check(cc *spec.CheckContext) sample.Schema {
	if c.Buffer.N > MaxPrefetch {
		cc.Errorf("buffer", "must be at most %d, got %d: the queue is made at its full depth as the run starts (a few batches keep a trainer fed)", MaxPrefetch, c.Buffer.N)
	}
	return cc.Input()
}

// BufferSamples implements plan.Bufferer.
func (c *PrefetchConfig) BufferSamples(workers int) int { return c.Buffer.Resolve(2 * workers) }

// PassesThrough implements spec.PassThrough: the stage reads no field.
func (c *PrefetchConfig) PassesThrough(string) bool { return true }

func init() {
	register(&Type{
		StageType: spec.StageType{Name: "prefetch", Role: spec.RoleTransform, Doc: "Keeps buffer samples ready ahead of the consumer, decoupling producer and consumer.",
			NewConfig: func() any { return &PrefetchConfig{} }},
		Build: func(env *Env, cfg any) (any, error) { return prefetchStage{}, nil },
	})
}

// prefetchStage only forwards: the engine gives its output queue the
// configured depth, and its own goroutine decouples the two sides.
type prefetchStage struct{}

func (prefetchStage) Process(_ context.Context, s *sample.Sample, emit Emit) error { return emit(s) }

// EpochSamples implements plan.Counter.
func (c *PrefetchConfig) EpochSamples(in int64) int64 { return in }
