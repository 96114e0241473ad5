package stages

import (
	"context"
	"errors"
	"io"
	"slices"

	"github.com/piperun/piperun/plan"
	"github.com/piperun/piperun/sample"
	"github.com/piperun/piperun/spec"
)

// The hooks this file's types provide, checked by the compiler: the
// engine and planner find them by type assertion, where a changed
// signature would silently turn a hook off.
var (
	_ plan.JoinCounter = (*ZipConfig)(nil)
	_ spec.Checker     = (*ZipConfig)(nil)
	_ InputEnder       = zipStage{}
	_ Joiner           = zipStage{}
)

// ZipConfig configures zip, which takes only inputs.
type ZipConfig struct{}

// EpochSamplesOf implements plan.JoinCounter: the shortest input's count.
func (c *ZipConfig) EpochSamplesOf(ins []int64) int64 {
	least := int64(-1)
	for _, n := range ins {
		if n < 0 {
			return -1
		}
		if least < 0 || n < least {
			least = n
		}
	}
	return least
}

func init() {
	register(&Type{
		StageType: spec.StageType{Name: "zip", Role: spec.RoleJoin, Doc: "Merges the i-th sample of every input into one; ends with the shortest input. Field names must not clash.",
			NewConfig: func() any { return &ZipConfig{} }},
		Build: func(env *Env, cfg any) (any, error) { return zipStage{}, nil },
	})
}

// Check implements spec.Checker: the inputs' fields are merged, and a name
// given by two inputs is an error, since one would silently win.
func (c *ZipConfig) Check(cc *spec.CheckContext) sample.Schema {
	out := sample.Schema{}
	from := map[string]string{}
	for i, s := range cc.Inputs {
		out.Open = out.Open || s.Open
		for _, f := range s.Fields {
			if prev, dup := from[f.Name]; dup {
				cc.Errorf("inputs", "field %q comes from both %q and %q; rename it with a map stage on one side", f.Name, prev, cc.Stage.InputNames[i])
				continue
			}
			from[f.Name] = cc.Stage.InputNames[i]
			out.Fields = append(out.Fields, f)
		}
	}
	zipWarnMisaligned(cc)
	return out
}

// unaligned are the stage types that change which samples, or in what
// order, reach their output: one on a single branch of a zip between a
// shared stage and the zip puts different samples side by side. (take and
// skip keep positions; zip(a, skip(a)) pairs neighbours, as in tf.data.)
var unaligned = map[string]bool{"filter": true, "shuffle": true, "batch": true}

// zipWarnMisaligned warns when two inputs of a zip read one stage and
// only one branch passes through a stage that drops or reorders samples
// (zip(a, filter(a))): zip pairs by position, as tf.data's does, so the
// i-th samples no longer come from the same sample of the shared stage,
// and the shared stage, held back by the slower branch, can stall.
func zipWarnMisaligned(cc *spec.CheckContext) {
	ins := cc.Stage.Inputs
	// through[k][a] is the first unaligned stage between ancestor a and
	// input k ("" when there is none on the path found first).
	through := make([]map[*spec.Stage]string, len(ins))
	for k, in := range ins {
		m := map[*spec.Stage]string{}
		var walk func(s *spec.Stage, via string)
		walk = func(s *spec.Stage, via string) {
			if prev, seen := m[s]; seen && (prev != "" || via == "") {
				return
			}
			m[s] = via
			if via == "" && unaligned[s.Type] {
				via = s.Name
			}
			for _, up := range s.Inputs {
				walk(up, via)
			}
		}
		walk(in, "")
		through[k] = m
	}
	// The nearest stage both branches read is the one to name, not a
	// source above it (a tester was told of "src" where both read "big").
	up := upstream(cc.Stage)
	slices.Reverse(up)
	for i := range ins {
		for j := i + 1; j < len(ins); j++ {
			for _, a := range up {
				vi, oki := through[i][a]
				vj, okj := through[j][a]
				if !oki || !okj || vi == vj {
					continue
				}
				via, side := vi, ins[i].Name
				if via == "" {
					via, side = vj, ins[j].Name
				}
				cc.Warnf("inputs", "inputs %q and %q both read stage %q, and only %q passes through %s %q: zip pairs by position, so a pair holds two different samples of %q, and the run stalls once one branch is a queue ahead of the other",
					ins[i].Name, ins[j].Name, a.Name, side, stageType(cc, via), via, a.Name)
				return
			}
		}
	}
}

// stageType returns the type of the stage named name.
func stageType(cc *spec.CheckContext, name string) string {
	for _, s := range upstream(cc.Stage) {
		if s.Name == name {
			return s.Type
		}
	}
	return ""
}

type zipStage struct{}

// EndsWithAnInput implements InputEnder.
func (zipStage) EndsWithAnInput() bool { return true }

func (zipStage) JoinEpoch(_ context.Context, _, inputs int, pull Pull, emit Emit) error {
	for id := int64(0); ; id++ {
		var out *sample.Sample
		for i := 0; i < inputs; i++ {
			s, err := pull(i)
			if errors.Is(err, io.EOF) {
				return nil
			}
			if err != nil {
				return err
			}
			if out == nil {
				out = &sample.Sample{ID: id, Epoch: s.Epoch, Origin: s.Origin, Fields: make(map[string]any, len(s.Fields)*inputs)}
			}
			for k, v := range s.Fields {
				out.Fields[k] = v
			}
		}
		if err := emit(out); err != nil {
			return err
		}
	}
}
