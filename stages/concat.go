package stages

import (
	"context"
	"errors"
	"io"
	"sort"

	"github.com/piperun/piperun/plan"
	"github.com/piperun/piperun/sample"
	"github.com/piperun/piperun/spec"
)

// The hooks this file's types provide, checked by the compiler: the
// engine and planner find them by type assertion, where a changed
// signature would silently turn a hook off.
var (
	_ plan.JoinCounter = (*ConcatConfig)(nil)
	_ spec.Checker     = (*ConcatConfig)(nil)
	_ Joiner           = concatStage{}
)

// ConcatConfig configures concat, which takes only inputs.
type ConcatConfig struct{}

// EpochSamplesOf implements plan.JoinCounter: the inputs' counts summed.
func (c *ConcatConfig) EpochSamplesOf(ins []int64) int64 { return sumCounts(ins, nil) }

// sumCounts sums the counts of the inputs whose weight is not 0 (all,
// for nil weights), or -1 where one is unknown.
func sumCounts(ins []int64, weights []float64) int64 {
	var sum int64
	for i, n := range ins {
		if len(weights) == len(ins) && weights[i] == 0 {
			continue
		}
		if n < 0 {
			return -1
		}
		sum += n
	}
	return sum
}

func init() {
	register(&Type{
		StageType: spec.StageType{Name: "concat", Role: spec.RoleJoin, Doc: "All samples of the first input, then of the next, each epoch.",
			NewConfig: func() any { return &ConcatConfig{} }},
		Build: func(env *Env, cfg any) (any, error) { return concatStage{}, nil },
	})
}

// Check implements spec.Checker. Inputs that read from a common stage get
// a warning: concat reads its first input to the end before the next, so
// the common stage's samples for the later input pile up in that input's
// queue; once it is full the common stage stops, and with it the first
// input, and the run hangs at any memory budget. An epoch that fits in
// the queue (a few chunks of samples) still runs.
func (c *ConcatConfig) Check(cc *spec.CheckContext) sample.Schema {
	switch a, b, common := sharedStage(cc.Stage.Inputs); {
	case common == nil:
	case a == b:
		cc.Warnf("inputs", "inputs name %q twice, and concat reads it to its end before it reads it again: unless an epoch of %q fits in the queue to the second input (a few chunks of samples), the run stops. To see every sample twice, use a second source stage, or epochs",
			a.Name, a.Name)
	default:
		cc.Warnf("inputs", "inputs %q and %q both read from stage %q, and concat reads %q to its end before it reads %q: unless an epoch of %q fits in the queue to %q (a few chunks of samples), the run stops. Use mix or zip, or give each input its own source",
			a.Name, b.Name, common.Name, a.Name, b.Name, a.Name, b.Name)
	}
	return sameSchema(cc)
}

// sharedStage returns the first two inputs that read one stage, in the
// order given, and the nearest stage both read (the input itself where one
// is named twice), or nils.
func sharedStage(ins []*spec.Stage) (a, b, common *spec.Stage) {
	for i := range ins {
		reads := map[*spec.Stage]bool{ins[i]: true}
		for _, s := range upstream(ins[i]) {
			reads[s] = true
		}
		for j := i + 1; j < len(ins); j++ {
			if c := firstCommon(ins[j], reads); c != nil {
				return ins[i], ins[j], c
			}
		}
	}
	return nil, nil, nil
}

// firstCommon returns st if it is in set, else the first stage upstream of
// st that is, or nil.
func firstCommon(st *spec.Stage, set map[*spec.Stage]bool) *spec.Stage {
	if set[st] {
		return st
	}
	// upstream lists ancestors before their descendants: look from the
	// end, so the stage named is the nearest one the inputs share.
	up := upstream(st)
	for i := len(up) - 1; i >= 0; i-- {
		if set[up[i]] {
			return up[i]
		}
	}
	return nil
}

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
