package stages_test

import (
	"fmt"
	"testing"

	"github.com/piperun/piperun/spec"
	"github.com/piperun/piperun/stages"
)

type regConfig struct{ Factor float64 }

// TestRegisterRefusesATypeThatCannotBeBuilt: a type declared so that it
// could never be decoded or built panics at Register, naming the type and
// what is wrong, where it panicked inside spec.Parse or failed only once a
// run had started (an embedder's test: a missing NewConfig was a nil
// dereference in the decoder, a config struct by value a reflect panic).
func TestRegisterRefusesATypeThatCannotBeBuilt(t *testing.T) {
	build := func(*stages.Env, any) (any, error) { return nil, nil }
	good := func() any { return &regConfig{} }
	for _, tc := range []struct {
		name string
		t    *stages.Type
		want string
	}{
		{"nil", nil, "stages: a nil type given to Register"},
		{"no name", &stages.Type{StageType: spec.StageType{NewConfig: good}, Build: build}, "stages: a stage type needs a name"},
		{"no build", &stages.Type{StageType: spec.StageType{Name: "x", NewConfig: good}}, `stages: stage type "x" has no Build`},
		{"no config", &stages.Type{StageType: spec.StageType{Name: "x"}, Build: build}, `stages: stage type "x" has no NewConfig`},
		{"config by value", &stages.Type{StageType: spec.StageType{Name: "x", NewConfig: func() any { return regConfig{} }}, Build: build},
			`stages: stage type "x": NewConfig must return a non-nil pointer to a struct, got stages_test.regConfig`},
		{"nil config", &stages.Type{StageType: spec.StageType{Name: "x", NewConfig: func() any { return (*regConfig)(nil) }}, Build: build},
			`stages: stage type "x": NewConfig must return a non-nil pointer to a struct, got a nil *stages_test.regConfig`},
		{"pointer to a map", &stages.Type{StageType: spec.StageType{Name: "x", NewConfig: func() any { return &map[string]any{} }}, Build: build},
			`stages: stage type "x": NewConfig must return a non-nil pointer to a struct, got *map[string]interface {}`},
		{"role", &stages.Type{StageType: spec.StageType{Name: "x", Role: spec.Role(7), NewConfig: good}, Build: build},
			`stages: stage type "x" has role 7, which is none of source, transform, join and sink`},
		{"duplicate", &stages.Type{StageType: spec.StageType{Name: "map", NewConfig: good}, Build: build}, "stages: duplicate stage type map"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reg := stages.NewRegistry()
			m, _ := stages.Default().Type("map")
			reg.Register(m)
			defer func() {
				if got := fmt.Sprint(recover()); got != tc.want {
					t.Errorf("panic %q, want %q", got, tc.want)
				}
			}()
			reg.Register(tc.t)
		})
	}
	// A well-declared type registers.
	reg := stages.NewRegistry()
	reg.Register(&stages.Type{StageType: spec.StageType{Name: "x", NewConfig: good}, Build: build})
	if _, ok := reg.Type("x"); !ok {
		t.Error("a well-declared type was not registered")
	}
}
