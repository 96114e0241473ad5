package stages

import (
	"context"
	"errors"
	"io"

	"github.com/piperun/piperun/sample"
	"github.com/piperun/piperun/spec"
)

// ZipConfig configures zip, which takes only inputs.
type ZipConfig struct{}

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
	return out
}

type zipStage struct{}

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
