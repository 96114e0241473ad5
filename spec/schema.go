package spec

import (
	"encoding/json"
	"reflect"

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

	var branches []*jsonschema.Schema
	for _, name := range cat.Names() {
		t, _ := cat.Lookup(name)
		branches = append(branches, stageSchema(r, t))
	}
	stages := &jsonschema.Schema{Type: "array", MinItems: ptr(uint64(1)), Items: &jsonschema.Schema{
		Type:     "object",
		Required: []string{"name", "type"},
		OneOf:    branches,
	}}
	root.Properties.Set("stages", stages)
	if v, ok := root.Properties.Get("version"); ok {
		v.Enum = []any{Version}
	}
	if v, ok := root.Properties.Get("name"); ok {
		v.Pattern = nameRe.String()
	}
	allowNulls(root)
	return json.MarshalIndent(root, "", "  ")
}

// allowNulls lets every optional key of every object in s be null, as
// validate reads a null as the key's absence (nullIsAbsent), except lists
// and string-or-list keys, where validate refuses it: an editor checking
// against the schema then agrees with validate on `epochs:` left empty.
func allowNulls(s *jsonschema.Schema) {
	if s == nil {
		return
	}
	for _, sub := range append(append(append([]*jsonschema.Schema{s.Items, s.AdditionalProperties}, s.OneOf...), s.AnyOf...), s.AllOf...) {
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
		if v.OneOf != nil {
			v.OneOf = append(v.OneOf, &jsonschema.Schema{Type: "null"})
			continue
		}
		// The description stays outside, where editors show it.
		inner := *v
		inner.Description = ""
		s.Properties.Set(p.Key, &jsonschema.Schema{AnyOf: []*jsonschema.Schema{&inner, {Type: "null"}}, Description: v.Description})
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
	return &jsonschema.Schema{
		Title:                t.Name,
		Description:          t.Doc,
		Properties:           props,
		Required:             required,
		AdditionalProperties: jsonschema.FalseSchema,
	}
}
