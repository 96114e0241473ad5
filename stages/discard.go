package stages

import (
	"context"

	"github.com/piperun/piperun/sample"
	"github.com/piperun/piperun/spec"
)

// The hooks this file's types provide, checked by the compiler: the
// engine and planner find them by type assertion, where a changed
// signature would silently turn a hook off.
var (
	_ spec.Checker = (*DiscardConfig)(nil)
	_ Sink         = discardSink{}
)

// DiscardConfig configures the discard sink, which takes no options.
type DiscardConfig struct{}

// Check implements spec.Checker.
func (c *DiscardConfig) Check(cc *spec.CheckContext) sample.Schema { return sample.Schema{} }

func init() {
	register(&Type{
		StageType: spec.StageType{Name: "discard", Role: spec.RoleSink, Doc: "Consumes and counts samples; for benchmarks.",
			NewConfig: func() any { return &DiscardConfig{} }},
		Build: func(env *Env, cfg any) (any, error) { return discardSink{}, nil },
	})
}

type discardSink struct{}

// Write drops s; as its last holder it recycles s's tensor buffers.
func (discardSink) Write(_ context.Context, s *sample.Sample) error {
	s.Recycle()
	return nil
}

func (discardSink) Commit() error { return nil }
func (discardSink) Abort() error  { return nil }
