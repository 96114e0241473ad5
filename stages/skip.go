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
	_ EpochEnder = (*skipStage)(nil)
	_ Processor  = (*skipStage)(nil)
)

func init() {
	register(&Type{
		StageType: spec.StageType{Name: "skip", Role: spec.RoleTransform, Doc: "Drops the first count samples of each epoch.",
			NewConfig: func() any { return &CountConfig{skip: true} }},
		Build: func(env *Env, cfg any) (any, error) { return &skipStage{n: cfg.(*CountConfig).Count}, nil },
	})
}

type skipStage struct{ n, seen int64 }

func (k *skipStage) Process(_ context.Context, s *sample.Sample, emit Emit) error {
	if k.seen < k.n {
		k.seen++
		return nil
	}
	return emit(s)
}

func (k *skipStage) EndEpoch(context.Context, int, Emit) error {
	k.seen = 0
	return nil
}
