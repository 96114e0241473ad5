package spec

import (
	"encoding/json"
	"reflect"
	"slices"

	"github.com/invopop/jsonschema"
)

// SchemaID is the $id of the generated JSON Schema.
const SchemaID = "https://piperun.dev/schema/v1/spec.json"

// JSONSchema generates the JSON Schema of a spec from the Go types: the
// top-level document, the keys every stage takes, and one branch per stage
// type with that type's config fields. It is what `piperun schema` prints
// and what schema.json holds.
func JSONSchema(cat Catalog) ([]byte, error) {
	r := newReflector()
	root := r.Reflect(&document{})
	root.ID = SchemaID
	root.Title = "piperun pipeline spec"
	root.Description = "A piperun input pipeline: sources, transforms and sinks run as a DAG of goroutine stages."

	// One if/then per stage type, chosen by the type key, rather than a
	// oneOf of the types: a validator then reports a misspelt key of a
	// files stage as that ("additional properties 'patern' not allowed"),
	// where a oneOf can only say that no type matched.
	var names []any
	var branches []*jsonschema.Schema
	for _, name := range cat.Names() {
		t, _ := cat.Lookup(name)
		names = append(names, name)
		typeIs := jsonschema.NewProperties()
		typeIs.Set("type", &jsonschema.Schema{Const: name})
		branches = append(branches, &jsonschema.Schema{
			If:   &jsonschema.Schema{Properties: typeIs, Required: []string{"type"}},
			Then: stageSchema(r, t),
		})
	}
	itemProps := jsonschema.NewProperties()
	itemProps.Set("type", &jsonschema.Schema{Type: "string", Enum: names, Description: "The stage type."})
	stages := &jsonschema.Schema{Type: "array", MinItems: ptr(uint64(1)), Items: &jsonschema.Schema{
		Type:       "object",
		Required:   []string{"name", "type"},
		Properties: itemProps,
		AllOf:      branches,
	}}
	if v, ok := root.Properties.Get("stages"); ok {
		stages.Description = v.Description
	}
	root.Properties.Set("stages", stages)
	if v, ok := root.Properties.Get("version"); ok {
		v.Enum = []any{Version}
	}
	if v, ok := root.Properties.Get("name"); ok {
		v.Pattern = nameRe.String()
	}
	// x- keys hold anchors for stages to merge; the library's
	// AdditionalProperties false stays for every other key.
	root.PatternProperties = map[string]*jsonschema.Schema{"^" + ExtensionPrefix: {}}
	allowVars(root)
	allowNulls(root)
	return json.MarshalIndent(root, "", "  ")
}

// subschemas returns the schemas s applies to its parts or combines.
func subschemas(s *jsonschema.Schema) []*jsonschema.Schema {
	out := []*jsonschema.Schema{s.Items, s.AdditionalProperties, s.Then}
	out = append(out, s.OneOf...)
	out = append(out, s.AnyOf...)
	return append(out, s.AllOf...)
}

// varPattern matches a value that piperun interpolates (${VAR},
// ${VAR:-default}).
const varPattern = `\$\{[^}]*\}`

// varRef is a string that holds a variable.
var varRef = &jsonschema.Schema{Type: "string", Pattern: varPattern}

// allowVars lets every value that is not a free string (a number, a
// boolean, a byte size, a name, one of a set of words) be written as
// `${VAR}` or `${VAR:-default}` too, as piperun expands those before it
// reads the value: an editor checking `epochs: ${EPOCHS:-2}` against the
// schema then agrees with validate. A stage's type stays literal, since
// the schema picks the stage's keys by it.
func allowVars(s *jsonschema.Schema) {
	if s == nil {
		return
	}
	for _, sub := range subschemas(s) {
		allowVars(sub)
	}
	if s.Items != nil && s.Items.Properties == nil {
		s.Items = withVars(s.Items)
	}
	if s.AdditionalProperties != nil && s.AdditionalProperties.Properties == nil {
		s.AdditionalProperties = withVars(s.AdditionalProperties)
	}
	if s.Properties == nil {
		return
	}
	for p := s.Properties.Oldest(); p != nil; p = p.Next() {
		allowVars(p.Value)
		if p.Key == "type" || p.Key == "version" {
			continue
		}
		s.Properties.Set(p.Key, withVars(p.Value))
	}
}

// types returns the JSON types v takes, from type or a list of them.
func types(v *jsonschema.Schema) []string {
	if ts, ok := v.Extras["type"].([]string); ok {
		return ts
	}
	if v.Type != "" {
		return []string{v.Type}
	}
	return nil
}

// setTypes writes ts as v's type, a list where there are several (kept in
// Extras: the library's Type is one name).
func setTypes(v *jsonschema.Schema, ts []string) {
	if len(ts) == 1 {
		v.Type = ts[0]
		delete(v.Extras, "type")
		return
	}
	v.Type = ""
	if v.Extras == nil {
		v.Extras = map[string]any{}
	}
	v.Extras["type"] = ts
}

// withVars returns v, or v that also takes a variable where v would refuse
// one. A scalar of one or more types gains the string type and the
// variable's pattern (keywords apply to their own type, so a minimum still
// binds numbers), which keeps a validator's messages to the point: one
// schema, not a choice of several that all fail.
func withVars(v *jsonschema.Schema) *jsonschema.Schema {
	if len(v.OneOf) > 0 {
		for _, o := range v.OneOf {
			if takesVars(o) {
				return v
			}
		}
		v.OneOf = append(v.OneOf, varRef)
		return v
	}
	ts := types(v)
	if len(ts) == 0 || slices.Contains(ts, "object") || slices.Contains(ts, "array") || v.Properties != nil || len(v.AnyOf) > 0 || takesVars(v) {
		return v
	}
	switch {
	case len(v.Enum) > 0 || v.Const != nil:
		inner := *v
		inner.Description = ""
		return &jsonschema.Schema{AnyOf: []*jsonschema.Schema{&inner, varRef}, Description: v.Description}
	case v.MinLength != nil || v.MaxLength != nil:
		return v // a string of bounded length: none is written with a variable
	case slices.Contains(ts, "string"):
		v.Pattern = "(?:" + v.Pattern + ")|" + varPattern
	default:
		setTypes(v, append(slices.Clone(ts), "string"))
		v.Pattern = varPattern
	}
	return v
}

// takesVars reports whether v takes any string, a variable included.
func takesVars(v *jsonschema.Schema) bool {
	return slices.Contains(types(v), "string") && v.Pattern == "" && len(v.Enum) == 0 && v.Const == nil && v.MinLength == nil && v.MaxLength == nil
}

// allowNulls lets every optional key of every object in s be null, as
// validate reads a null as the key's absence (nullIsAbsent), except lists
// and string-or-list keys, where validate refuses it: an editor checking
// against the schema then agrees with validate on `epochs:` left empty.
func allowNulls(s *jsonschema.Schema) {
	if s == nil {
		return
	}
	for _, sub := range subschemas(s) {
		allowNulls(sub)
	}
	if s.Properties == nil {
		return
	}
	required := map[string]bool{}
	for _, r := range s.Required {
		required[r] = true
	}
	for p := s.Properties.Oldest(); p != nil; p = p.Next() {
		allowNulls(p.Value)
		if required[p.Key] || isList(p.Value) {
			continue
		}
		v := p.Value
		switch ts := types(v); {
		case v.OneOf != nil:
			v.OneOf = append(v.OneOf, &jsonschema.Schema{Type: "null"})
		case v.AnyOf != nil:
			v.AnyOf = append(v.AnyOf, &jsonschema.Schema{Type: "null"})
		case len(ts) > 0 && len(v.Enum) == 0 && v.Const == nil:
			setTypes(v, append(slices.Clone(ts), "null"))
		default:
			// The description stays outside, where editors show it.
			inner := *v
			inner.Description = ""
			s.Properties.Set(p.Key, &jsonschema.Schema{AnyOf: []*jsonschema.Schema{&inner, {Type: "null"}}, Description: v.Description})
		}
	}
}

// isList reports whether s is a list, or may be one (a string or a list).
func isList(s *jsonschema.Schema) bool {
	if s.Type == "array" {
		return true
	}
	for _, o := range s.OneOf {
		if o.Type == "array" {
			return true
		}
	}
	return false
}

func ptr[T any](v T) *T { return &v }

func newReflector() *jsonschema.Reflector {
	return &jsonschema.Reflector{
		FieldNameTag:               "yaml",
		DoNotReference:             true,
		RequiredFromJSONSchemaTags: true,
		Mapper:                     schemaMapper,
	}
}

// stageSchema is one stage type's branch: the common keys it accepts plus
// its config's fields, nothing else.
func stageSchema(r *jsonschema.Reflector, t *StageType) *jsonschema.Schema {
	cfg := r.ReflectFromType(reflect.TypeOf(t.NewConfig()).Elem())
	common := r.Reflect(&common{})
	props := jsonschema.NewProperties()
	for p := common.Properties.Oldest(); p != nil; p = p.Next() {
		switch {
		case p.Key == "on_error" && !t.OnError, p.Key == "parallelism" && !t.Parallel,
			(p.Key == "input" || p.Key == "inputs") && t.Role == RoleSource:
			continue
		case p.Key == "type":
			props.Set("type", &jsonschema.Schema{Type: "string", Const: t.Name, Description: t.Doc})
		case p.Key == "inputs" && t.Role == RoleJoin:
			props.Set("inputs", &jsonschema.Schema{Type: "array", Items: &jsonschema.Schema{Type: "string"}, MinItems: ptr(uint64(2)), Description: p.Value.Description})
		case p.Key == "inputs":
			// One stage, as a name or a list of one.
			props.Set("inputs", &jsonschema.Schema{Description: p.Value.Description, OneOf: []*jsonschema.Schema{
				{Type: "string"},
				{Type: "array", Items: &jsonschema.Schema{Type: "string"}, MaxItems: ptr(uint64(1))},
			}})
		default:
			props.Set(p.Key, p.Value)
		}
	}
	if cfg.Properties != nil {
		for p := cfg.Properties.Oldest(); p != nil; p = p.Next() {
			props.Set(p.Key, p.Value)
		}
	}
	required := append([]string{"name", "type"}, cfg.Required...)
	not := cfg.Not
	if t.Role == RoleJoin {
		required = append(required, "inputs")
	}
	if t.Role != RoleSource {
		// Set input or inputs, not both. One that is null, empty, or a
		// variable (which may expand to nothing) does not count as set:
		// validate reads an empty one as absent.
		named := &jsonschema.Schema{Type: "string", MinLength: ptr(uint64(1)), Not: &jsonschema.Schema{Pattern: varPattern}}
		set := jsonschema.NewProperties()
		set.Set("input", named)
		set.Set("inputs", &jsonschema.Schema{AnyOf: []*jsonschema.Schema{named, {Type: "array", MinItems: ptr(uint64(1))}}})
		both := &jsonschema.Schema{Required: []string{"input", "inputs"}, Properties: set}
		if not != nil {
			both = &jsonschema.Schema{AnyOf: []*jsonschema.Schema{both, not}}
		}
		not = both
	}
	return &jsonschema.Schema{
		Title:                t.Name,
		Description:          t.Doc,
		Properties:           props,
		Required:             required,
		AnyOf:                cfg.AnyOf,
		Not:                  not,
		AdditionalProperties: jsonschema.FalseSchema,
	}
}
