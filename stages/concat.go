package stages

import (
	"context"
	"errors"
	"io"
	"sort"

	"github.com/piperun/piperun/sample"
	"github.com/piperun/piperun/spec"
)

// ConcatConfig configures concat, which takes only inputs.
type ConcatConfig struct{}

func init() {
	register(&Type{
		StageType: spec.StageType{Name: "concat", Role: spec.RoleJoin, Doc: "All samples of the first input, then of the next, each epoch.",
			NewConfig: func() any { return &ConcatConfig{} }},
		Build: func(env *Env, cfg any) (any, error) { return concatStage{}, nil },
	})
}

// Check implements spec.Checker.
func (c *ConcatConfig) Check(cc *spec.CheckContext) sample.Schema { return sameSchema(cc) }

func sortStrings(s []string) { sort.Strings(s) }

type concatStage struct{}

func (concatStage) JoinEpoch(_ context.Context, _, inputs int, pull Pull, emit Emit) error {
	var id int64
	for i := 0; i < inputs; i++ {
		for {
			s, err := pull(i)
			if errors.Is(err, io.EOF) {
				break
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
	return nil
}
