package stages_test

import (
	"context"
	"fmt"

	"go.uber.org/zap"

	"github.com/piperun/piperun/engine"
	"github.com/piperun/piperun/plan"
	"github.com/piperun/piperun/sample"
	"github.com/piperun/piperun/spec"
	"github.com/piperun/piperun/stages"
)

// PrintConfig configures the print sink of the example below.
type PrintConfig struct {
	Prefix string `yaml:"prefix"`
}

// Check implements spec.Checker: print needs an int64 "index" field.
func (c *PrintConfig) Check(cc *spec.CheckContext) sample.Schema {
	if _, ok := cc.Input().Lookup("index"); !ok {
		cc.Errorf("prefix", "print needs an index field")
	}
	return sample.Schema{}
}

// printSink is synchronous: the engine calls Write from one goroutine.
type printSink struct {
	prefix string
}

func (p printSink) Write(_ context.Context, s *sample.Sample) error {
	fmt.Println(p.prefix, s.Fields["index"], s.Fields["square"])
	return nil
}
func (printSink) Commit() error { return nil }
func (printSink) Abort() error  { return nil }

// ExampleRegistry_Register adds a sink type to the built-in stages and
// runs a spec that uses it: spec.Parse decodes and checks its config,
// plan.Compile sizes the DAG, and the engine runs it.
func ExampleRegistry_Register() {
	reg := stages.Default()
	reg.Register(&stages.Type{
		StageType: spec.StageType{Name: "print", Role: spec.RoleSink, Doc: "Prints each sample's index.",
			NewConfig: func() any { return &PrintConfig{Prefix: ">"} }},
		Build: func(env *stages.Env, cfg any) (any, error) {
			return printSink{prefix: cfg.(*PrintConfig).Prefix}, nil
		},
	})
	sp, diags := spec.Parse("squares.yaml", []byte(`version: 1
name: squares
stages:
  - {name: src, type: range, count: 4}
  - {name: sq, type: map, set: {square: 'index * index'}}
  - {name: out, type: print, prefix: "sample"}
`), spec.Options{Catalog: reg})
	if len(diags) > 0 {
		fmt.Println(diags)
		return
	}
	p, err := plan.Compile(sp, reg, plan.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	run, err := engine.Start(context.Background(), p, engine.Options{Registry: reg, Log: zap.NewNop()})
	if err != nil {
		fmt.Println(err)
		return
	}
	rep, err := run.Wait()
	fmt.Println(rep.Sinks["out"].Samples, "samples,", err)
	// Output:
	// sample 0 0
	// sample 1 1
	// sample 2 4
	// sample 3 9
	// 4 samples, <nil>
}
