package stages

import (
	"context"
	"fmt"
	"sync"

	"github.com/invopop/jsonschema"

	"github.com/piperun/piperun/expression"
	"github.com/piperun/piperun/sample"
	"github.com/piperun/piperun/spec"
)

// The hooks this file's types provide, checked by the compiler: the
// engine and planner find them by type assertion, where a changed
// signature would silently turn a hook off.
var (
	_ spec.Checker     = (*FilterConfig)(nil)
	_ literalFiler     = (*FilterConfig)(nil)
	_ spec.PassThrough = (*FilterConfig)(nil)
	_ Processor        = (*filterStage)(nil)
)

// FilterConfig configures the filter stage.
type FilterConfig struct {
	Where string `yaml:"where" jsonschema:"required" jsonschema_description:"Boolean expression; samples for which it is false are dropped."`

	program *expression.Program
}

// literalFiles lists the files its condition reads by paths written as
// text, for the fingerprint of a cache below.
func (c *FilterConfig) literalFiles() []string {
	if c.program == nil {
		return nil
	}
	return c.program.LiteralFiles()
}

// PassesThrough implements spec.PassThrough: a filter passes samples on
// untouched and reads only the fields its condition names.
func (c *FilterConfig) PassesThrough(field string) bool { return !expression.Uses(c.Where, field) }

func init() {
	register(&Type{
		StageType: spec.StageType{Name: "filter", Role: spec.RoleTransform, Doc: "Keeps the samples for which an expression is true.",
			NewConfig: func() any { return &FilterConfig{} }, OnError: true, Parallel: true},
		Build: func(env *Env, cfg any) (any, error) {
			c := cfg.(*FilterConfig)
			if c.program == nil {
				return nil, fmt.Errorf("internal: filter config was not checked")
			}
			f := &filterStage{p: c.program, seed: env.Seed, stage: expression.StageHash(env.Stage.Name), skip: env.Skip, label: "where"}
			if env.Spec != nil {
				// As a map's set names where the spec sets it.
				f.label = fmt.Sprintf("where (%s)", env.Spec.PosOf(env.Stage.Path+".where"))
			}
			f.vms.New = func() any { return new(expression.VM) }
			return f, nil
		},
	})
}

// Check implements spec.Checker.
func (c *FilterConfig) Check(cc *spec.CheckContext) sample.Schema {
	c.program = compile(cc, "where", c.Where, cc.Input(), sample.Bool)
	return cc.Input()
}

type filterStage struct {
	skip  func(*sample.Sample) bool
	p     *expression.Program
	seed  uint64
	stage uint64
	vms   sync.Pool
	label string
}

func (f *filterStage) Process(_ context.Context, s *sample.Sample, emit Emit) error {
	if f.skip != nil && f.skip(s) {
		return emit(s)
	}
	vm := f.vms.Get().(*expression.VM)
	defer f.vms.Put(vm)
	restore := withCtx(s, &expression.RunCtx{Seed: f.seed, Epoch: s.Epoch, ID: s.ID, Stage: f.stage})
	v, err := f.p.Run(vm, s.Fields)
	restore()
	if err != nil {
		return fmt.Errorf("%s: %w", f.label, err)
	}
	keep, ok := v.(bool)
	if !ok {
		return fmt.Errorf("%s: the condition gave %s, not a bool", f.label, expression.ValueWord(v))
	}
	if keep {
		return emit(s)
	}
	return nil
}

// JSONSchemaExtend lets where be a bare boolean.
func (FilterConfig) JSONSchemaExtend(s *jsonschema.Schema) {
	if w, ok := s.Properties.Get("where"); ok {
		exprSchema(w)
	}
}
