package stages

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/invopop/jsonschema"

	"github.com/piperun/piperun/expression"
	"github.com/piperun/piperun/plan"
	"github.com/piperun/piperun/sample"
	"github.com/piperun/piperun/spec"
	"github.com/piperun/piperun/tensor"
)

// The hooks this file's types provide, checked by the compiler: the
// engine and planner find them by type assertion, where a changed
// signature would silently turn a hook off.
var (
	_ plan.Counter     = (*MapConfig)(nil)
	_ plan.FieldSetter = (*MapConfig)(nil)
	_ spec.Checker     = (*MapConfig)(nil)
	_ literalFiler     = (*MapConfig)(nil)
	_ Prefetcher       = (*mapStage)(nil)
	_ Processor        = (*mapStage)(nil)
)

// MapConfig configures the map stage.
type MapConfig struct {
	Set  spec.Map[string] `yaml:"set" jsonschema_description:"field: expression, evaluated in order; later expressions see earlier results."`
	Keep []string         `yaml:"keep" jsonschema:"minItems=1" jsonschema_description:"Keep only these fields."`
	Drop []string         `yaml:"drop" jsonschema_description:"Remove these fields."`

	programs []*expression.Program
}

// literalFiles lists the files its expressions read by paths written as
// text, for the fingerprint of a cache below.
func (c *MapConfig) literalFiles() []string {
	var out []string
	for _, p := range c.programs {
		if p != nil {
			out = append(out, p.LiteralFiles()...)
		}
	}
	return out
}

// SetsField implements plan.FieldSetter: the map writes field, so a value
// there comes from its expression, not from upstream.
func (c *MapConfig) SetsField(field string) bool {
	for _, e := range c.Set.Entries {
		if e.Key == field {
			return true
		}
	}
	return false
}

func init() {
	register(&Type{
		StageType: spec.StageType{Name: "map", Role: spec.RoleTransform, Doc: "Sets fields from expressions, then keeps or drops fields; parallel and order-preserving.",
			NewConfig: func() any { return &MapConfig{} }, OnError: true, Parallel: true},
		Build: buildMap,
	})
}

// EpochSamples implements plan.Counter: a sample for each it reads.
func (c *MapConfig) EpochSamples(in int64) int64 { return in }

// Check implements spec.Checker: each expression is compiled against the
// fields that reach it, including those set before it.
func (c *MapConfig) Check(cc *spec.CheckContext) sample.Schema {
	s := cc.Input()
	c.programs = c.programs[:0]
	if c.Set.Len() == 0 && len(c.Keep) == 0 && len(c.Drop) == 0 {
		cc.Errorf("", "map needs set, keep or drop")
	}
	for i, e := range c.Set.Entries {
		field := "set." + e.Key
		if !expression.IdentLike(e.Key) {
			field = fmt.Sprintf("set[%q]", e.Key)
		}
		if e.Key == expression.CtxVar {
			// The map drops it as it runs: it carries the run context.
			cc.Errorf(field, "%s is piperun's own name (random functions read the sample's identity through it); call the field something else", e.Key)
		}
		var p *expression.Program
		if c.defers(cc, i) {
			p = compileDeferred(cc, field, e.Value, s)
		} else {
			p = compile(cc, field, e.Value, s, sample.Any)
		}
		c.programs = append(c.programs, p)
		if p != nil {
			s = s.With(e.Key, p.Type)
		} else {
			s = s.With(e.Key, sample.TAny)
		}
	}
	if len(c.Keep) > 0 && len(c.Drop) > 0 {
		cc.Errorf("drop", "set keep or drop, not both")
	}
	if c.Keep != nil && len(c.Keep) == 0 {
		// It kept every field, the opposite of what it says.
		cc.Errorf("keep", "is empty: a sample needs a field; list the fields to keep, or leave keep out to keep them all")
	}
	for i, k := range c.Keep {
		if _, ok := s.Lookup(k); !ok {
			cc.Errorf(fmt.Sprintf("keep[%d]", i), "unknown field %q (fields here: %s)", k, strings.Join(s.Names(), ", "))
		}
	}
	for i, k := range c.Drop {
		if _, ok := s.Lookup(k); !ok {
			cc.Errorf(fmt.Sprintf("drop[%d]", i), "unknown field %q (fields here: %s)", k, strings.Join(s.Names(), ", "))
		}
	}
	if len(c.Keep) > 0 {
		out := sample.Schema{}
		for _, k := range c.Keep {
			t, _ := s.Lookup(k)
			out.Fields = append(out.Fields, sample.Field{Name: k, Type: t})
		}
		return out
	}
	if len(c.Drop) > 0 {
		out := sample.Schema{Open: s.Open}
		for _, f := range s.Fields {
			if !contains(c.Drop, f.Name) {
				out.Fields = append(out.Fields, f)
			}
		}
		return out
	}
	return s
}

// defers reports whether set entry i may leave its trailing to_float (and
// normalize) to the batch downstream: an image then crosses the stages in
// between (a shuffle holding hundreds of them) at a quarter of the bytes,
// and is converted while batch copies it anyway. Only when nothing can see
// the field before that batch: no later expression of this map, and no
// stage on the way (spec.DeferrableField).
func (c *MapConfig) defers(cc *spec.CheckContext, i int) bool {
	k := c.Set.Entries[i].Key
	for _, e := range c.Set.Entries[i+1:] {
		if e.Key == k || expression.Uses(e.Value, k) {
			return false
		}
	}
	return spec.DeferrableField(cc.Stage, k)
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

type mapStage struct {
	cfg  *MapConfig
	keys []string
	// labels name each set expression in its errors (setLabel).
	labels []string
	// files are the input fields the expressions read as file paths
	// (read_file(path)), which Prefetch has read ahead.
	files []string
	keep  map[string]bool
	vms   sync.Pool
	seed  uint64
	// stages are each set entry's stage component of the random
	// functions' seeding: the stage's name and the entry's key, so that two
	// entries calling the same function draw apart (each compiles its own
	// call-site numbers from 1; found in review: two random_resized_crop
	// "views" of one image came out identical).
	stages []uint64
	skip   func(*sample.Sample) bool
	// cached is env.Cached: skip without its side effects.
	cached func(*sample.Sample) bool
}

func buildMap(env *Env, cfg any) (any, error) {
	c := cfg.(*MapConfig)
	if len(c.programs) != c.Set.Len() {
		return nil, fmt.Errorf("internal: map config was not checked")
	}
	m := &mapStage{cfg: c, seed: env.Seed, skip: env.Skip, cached: env.Cached}
	for i, e := range c.Set.Entries {
		for _, f := range c.programs[i].FilesRead() {
			// A path set by an earlier expression of this map is not
			// known before the map runs.
			if !slices.Contains(m.keys, f) && !slices.Contains(m.files, f) {
				m.files = append(m.files, f)
			}
		}
		m.keys = append(m.keys, e.Key)
		m.stages = append(m.stages, expression.StageHash(env.Stage.Name+"\x00set "+e.Key))
		m.labels = append(m.labels, setLabel(env, e))
	}
	if len(c.Keep) > 0 {
		m.keep = map[string]bool{}
		for _, k := range c.Keep {
			m.keep[k] = true
		}
	}
	m.vms.New = func() any { return new(expression.VM) }
	return m, nil
}

// Prefetch returns the work that asks the kernel to start reading the
// files the map will read for ss (expression.PrefetchFile), so that its
// decoders do not wait for the disk; none for samples a cache below
// already holds, which the map will not read.
func (m *mapStage) Prefetch(ss []*sample.Sample) func() {
	paths := m.paths(ss)
	if len(paths) == 0 {
		return nil
	}
	return func() {
		for _, p := range paths {
			expression.PrefetchFile(p)
		}
	}
}

// paths lists the files the map will read for ss.
func (m *mapStage) paths(ss []*sample.Sample) []string {
	var paths []string
	for _, f := range m.files {
		for _, s := range ss {
			if m.cached != nil && m.cached(s) {
				continue
			}
			if p, ok := s.Fields[f].(string); ok {
				paths = append(paths, p)
			}
		}
	}
	return paths
}

func (m *mapStage) Process(_ context.Context, s *sample.Sample, emit Emit) error {
	if m.skip != nil && m.skip(s) {
		return emit(s)
	}
	if err := m.apply(s); err != nil {
		return err
	}
	if m.keep != nil {
		for k := range s.Fields {
			if !m.keep[k] {
				delete(s.Fields, k)
			}
		}
	}
	for _, k := range m.cfg.Drop {
		delete(s.Fields, k)
	}
	return emit(s)
}

// apply evaluates the set expressions in order, storing each result in s
// under its key.
func (m *mapStage) apply(s *sample.Sample) error {
	vm := m.vms.Get().(*expression.VM)
	defer m.vms.Put(vm)
	rc := &expression.RunCtx{Seed: m.seed, Epoch: s.Epoch, ID: s.ID}
	defer withCtx(s, rc)()
	for i, p := range m.cfg.programs {
		k := m.keys[i]
		rc.Stage = m.stages[i]
		v, err := p.Run(vm, s.Fields)
		if err == nil {
			v, err = sample.Normalize(v)
		}
		if err != nil {
			return fmt.Errorf("%s: %w", m.labels[i], err)
		}
		shareIfAliased(s.Fields, k, v)
		s.Fields[k] = v
	}
	return nil
}

// withCtx puts rc among s's fields for the expressions to read, and
// returns what restores them: a field of that name (a jsonl key, which no
// expression can name) was deleted with it.
func withCtx(s *sample.Sample, rc *expression.RunCtx) func() {
	old, had := s.Fields[expression.CtxVar]
	s.Fields[expression.CtxVar] = rc
	return func() {
		if had {
			s.Fields[expression.CtxVar] = old
		} else {
			delete(s.Fields, expression.CtxVar)
		}
	}
}

// setLabel names a set expression in its errors: the key and, since a
// position inside the expression alone does not say which file and line
// to fix, where the spec (or a --set) sets it.
func setLabel(env *Env, e spec.Entry[string]) string {
	pos := e.Pos
	if env.Spec != nil {
		pos = env.Spec.Where(pos)
	}
	if pos.Line > 0 || pos.Set != "" {
		return fmt.Sprintf("set %s (%s)", e.Key, pos)
	}
	return "set " + e.Key
}

// shareIfAliased marks v shared when another field of fields already
// holds it: an expression may return a field's tensor unchanged (a flip
// that did not flip, a plain field reference), and a tensor held twice
// must not be recycled by whichever holder finishes first.
func shareIfAliased(fields map[string]any, key string, v any) {
	switch x := v.(type) {
	case *tensor.Tensor:
		for k, o := range fields {
			if k != key && holds(o, x) {
				x.Share()
				return
			}
		}
	case []any:
		sample.ShareValue(x)
	}
}

func holds(v any, t *tensor.Tensor) bool {
	switch x := v.(type) {
	case *tensor.Tensor:
		return x == t
	case []any:
		for _, e := range x {
			if holds(e, t) {
				return true
			}
		}
	}
	return false
}

// JSONSchemaExtend lets set's expressions be bare numbers or booleans, and
// asks for set, keep or drop, and not both keep and drop, as Check does.
func (MapConfig) JSONSchemaExtend(s *jsonschema.Schema) {
	if set, ok := s.Properties.Get("set"); ok && set.AdditionalProperties != nil {
		exprSchema(set.AdditionalProperties)
	}
	// An empty set or list counts as absent there.
	given := func(keys ...string) *jsonschema.Schema {
		props := jsonschema.NewProperties()
		for _, k := range keys {
			if k == "set" {
				props.Set(k, &jsonschema.Schema{Type: "object", MinProperties: atLeast(1)})
			} else {
				props.Set(k, &jsonschema.Schema{Type: "array", MinItems: atLeast(1)})
			}
		}
		return &jsonschema.Schema{Required: keys, Properties: props}
	}
	s.AnyOf = []*jsonschema.Schema{given("set"), given("keep"), given("drop")}
	s.Not = given("keep", "drop")
}
