package stages

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/invopop/jsonschema"

	"github.com/piperun/piperun/example"
	"github.com/piperun/piperun/expression"
	"github.com/piperun/piperun/sample"
	"github.com/piperun/piperun/spec"
	"github.com/piperun/piperun/tensor"
)

// The hooks this file's types provide, checked by the compiler: the
// engine and planner find them by type assertion, where a changed
// signature would silently turn a hook off.
var (
	_ spec.Checker = (*ParseExampleConfig)(nil)
	_ Processor    = (*parseExample)(nil)
)

// FeatureSpec describes one feature to parse.
type FeatureSpec struct {
	DType   string `yaml:"dtype" jsonschema:"required,enum=int64,enum=float32,enum=bytes,enum=string" jsonschema_description:"int64, float32, bytes or string."`
	Shape   []int  `yaml:"shape" jsonschema_description:"[] scalar (default), [N] fixed length, [-1] variable length, [A, B] fixed matrix."`
	Default any    `yaml:"default" jsonschema_description:"Value used when the feature is absent; without it a missing fixed-size feature is an error."`
}

// ParseExampleConfig configures parse_example.
type ParseExampleConfig struct {
	Field    string                `yaml:"field" jsonschema_description:"Input field holding serialized tf.train.Example bytes (default record)."`
	Features spec.Map[FeatureSpec] `yaml:"features" jsonschema:"required" jsonschema_description:"feature key: {dtype, shape, default}. Each becomes a field of the same name."`
}

func init() {
	register(&Type{
		StageType: spec.StageType{Name: "parse_example", Role: spec.RoleTransform, Doc: "Parses tf.train.Example records into the listed features.",
			NewConfig: func() any { return &ParseExampleConfig{Field: "record"} }, OnError: true, Parallel: true},
		Build: buildParseExample,
	})
}

func (f FeatureSpec) variable() bool { return len(f.Shape) == 1 && f.Shape[0] == -1 }

// fieldType is the type a parsed feature gets.
func (f FeatureSpec) fieldType() sample.Type {
	scalar := len(f.Shape) == 0
	switch f.DType {
	case "int64":
		if scalar {
			return sample.TInt
		}
		return sample.TensorOf(tensor.Int64, f.Shape...)
	case "float32":
		if scalar {
			// A float64 value, marked float32 so that batch stacks it so.
			return sample.Type{Kind: sample.Float, DType: tensor.Float32}
		}
		return sample.TensorOf(tensor.Float32, f.Shape...)
	case "bytes":
		if scalar {
			return sample.TBytes
		}
		return sample.ListOf(sample.Bytes)
	case "string":
		if scalar {
			return sample.TString
		}
		return sample.ListOf(sample.String)
	}
	return sample.TAny
}

// Check implements spec.Checker.
func (c *ParseExampleConfig) Check(cc *spec.CheckContext) sample.Schema {
	t, ok := cc.Input().Lookup(c.Field)
	switch {
	case !ok:
		cc.Errorf("field", "input has no field %q (fields here: %v)", c.Field, cc.Input().Names())
	case t.Kind != sample.Bytes && t.Kind != sample.Any:
		cc.Errorf("field", "field %q is %s; parse_example needs serialized bytes", c.Field, t)
	}
	if c.Features.Len() == 0 {
		cc.Errorf("features", "list at least one feature")
	}
	out := sample.Schema{}
	for _, e := range c.Features.Entries {
		p := "features." + e.Key
		if !expression.IdentLike(e.Key) {
			p = fmt.Sprintf("features[%q]", e.Key)
		}
		f := e.Value
		switch f.DType {
		case "int64", "float32", "bytes", "string":
		default:
			cc.Errorf(p+".dtype", "unknown dtype %q (want int64, float32, bytes or string)", f.DType)
			// The field is made, of a type not known: a stage below
			// reading it is no mistake of its own.
			out.Fields = append(out.Fields, sample.Field{Name: e.Key, Type: sample.TAny})
			continue
		}
		badShape := false
		for i, d := range f.Shape {
			if d < -1 || d == 0 || (d == -1 && len(f.Shape) > 1) {
				cc.Errorf(fmt.Sprintf("%s.shape[%d]", p, i), "dimension must be positive, or a single -1 for variable length; got %s", flowList(f.Shape))
				badShape = true
			}
		}
		if (f.DType == "bytes" || f.DType == "string") && len(f.Shape) > 1 {
			cc.Errorf(p+".shape", "%s features are scalars or lists; shape %s has too many dimensions", f.DType, flowList(f.Shape))
		}
		switch {
		case f.Default != nil && f.variable() && !badShape:
			cc.Errorf(p+".default", "a variable-length feature (shape [-1]) takes no default: a missing one is an empty list, as TensorFlow's VarLenFeature gives; declare a fixed shape to fill it")
		case f.Default != nil && !badShape:
			if _, err := f.defaultValue(); err != nil {
				cc.Errorf(p+".default", "%v", err)
			}
		}
		out.Fields = append(out.Fields, sample.Field{Name: e.Key, Type: f.fieldType()})
	}
	return out
}

// defaultValues returns the spec's default as its elements: one for a
// scalar, which fills a fixed shape; or, for a fixed shape, a list of one
// value per element, flat in row-major order or nested as the shape is
// (TensorFlow's default_value). A variable-length feature takes none
// (Check refuses one); a missing one is empty.
func (f FeatureSpec) defaultValues(n int) ([]any, error) {
	list, ok := f.Default.([]any)
	if !ok {
		return []any{f.Default}, nil
	}
	if len(f.Shape) == 0 || f.variable() {
		return nil, fmt.Errorf("default for a feature of shape %s must be a scalar, got a list", flowList(f.Shape))
	}
	if flat, ok := flattenAs(list, f.Shape); ok {
		return flat, nil
	}
	if len(list) != n || slices.ContainsFunc(list, func(x any) bool { _, nested := x.([]any); return nested }) {
		return nil, fmt.Errorf("default for shape %s must be a scalar, a list of %d values, or lists nested as the shape", flowList(f.Shape), n)
	}
	return list, nil
}

// flattenAs flattens v, lists nested as shape is, in row-major order.
func flattenAs(v []any, shape []int) ([]any, bool) {
	if len(shape) < 2 || len(v) != shape[0] {
		return nil, false
	}
	var out []any
	for _, x := range v {
		inner, ok := x.([]any)
		if !ok {
			return nil, false
		}
		if len(shape) == 2 {
			if len(inner) != shape[1] {
				return nil, false
			}
			out = append(out, inner...)
			continue
		}
		flat, ok := flattenAs(inner, shape[1:])
		if !ok {
			return nil, false
		}
		out = append(out, flat...)
	}
	return out, true
}

// defaultValue converts the spec's default to the feature's field value.
func (f FeatureSpec) defaultValue() (any, error) {
	n := tensor.NumElements(f.Shape)
	if f.variable() {
		n = 0
	}
	if n < 0 {
		return nil, fmt.Errorf("shape %s is not a valid shape", flowList(f.Shape))
	}
	vals, err := f.defaultValues(n)
	if err != nil {
		return nil, err
	}
	// at gives element i: a scalar default fills every element.
	at := func(i int) any { return vals[i%len(vals)] }
	switch f.DType {
	case "int64":
		for _, x := range vals {
			if _, ok := x.(int); !ok {
				return nil, fmt.Errorf("default for an int64 feature must be an integer, got %s", yamlValue(x))
			}
		}
		if len(f.Shape) == 0 {
			return int64(vals[0].(int)), nil
		}
		t := tensor.New(tensor.Int64, max(n, 0))
		if !f.variable() {
			t = tensor.New(tensor.Int64, f.Shape...)
		}
		for i := range t.Int64() {
			t.Int64()[i] = int64(at(i).(int))
		}
		return t, nil
	case "float32":
		num := func(x any) (float32, bool) {
			switch v := x.(type) {
			case int:
				return float32(v), true
			case float64:
				return float32(v), true
			}
			return 0, false
		}
		for _, x := range vals {
			if _, ok := num(x); !ok {
				return nil, fmt.Errorf("default for a float32 feature must be a number, got %s", yamlValue(x))
			}
			if f, _ := x.(float64); overflows32(f) {
				// 1e40 became +Inf, unseen.
				return nil, fmt.Errorf("default %v is beyond float32's range (±%g)", x, float32(math.MaxFloat32))
			}
		}
		if len(f.Shape) == 0 {
			v, _ := num(vals[0])
			return tensor.Float32Decimal(v), nil
		}
		t := tensor.New(tensor.Float32, 0)
		if !f.variable() {
			t = tensor.New(tensor.Float32, f.Shape...)
		}
		for i := range t.Float32() {
			t.Float32()[i], _ = num(at(i))
		}
		return t, nil
	case "bytes", "string":
		for _, x := range vals {
			if _, ok := x.(string); !ok {
				err := fmt.Errorf("default for a %s feature must be a string, got %s", f.DType, yamlValue(x))
				if text, ok := scalarText(x); ok {
					err = fmt.Errorf("%w: quote it (%q)", err, text)
				}
				return nil, err
			}
		}
		if len(f.Shape) == 0 {
			if f.DType == "bytes" {
				return []byte(vals[0].(string)), nil
			}
			return vals[0].(string), nil
		}
		if f.DType == "bytes" {
			out := make([][]byte, n)
			for i := range out {
				out[i] = []byte(at(i).(string))
			}
			return out, nil
		}
		out := make([]string, n)
		for i := range out {
			out[i] = at(i).(string)
		}
		return out, nil
	}
	return nil, fmt.Errorf("unknown dtype %q", f.DType)
}

// yamlValue names a value decoded from YAML as the spec wrote it: the
// type's YAML name and the text, where Go's %v printed 1.0 as "1" (read as
// an integer refused for not being one) and a string without quotes.
func yamlValue(x any) string {
	switch v := x.(type) {
	case nil:
		return "null"
	case string:
		return fmt.Sprintf("string %q", v)
	case []any:
		return "a list"
	case map[string]any:
		return "a mapping"
	case bool:
		return "boolean " + strconv.FormatBool(v)
	case int:
		return "integer " + strconv.Itoa(v)
	}
	if text, ok := scalarText(x); ok {
		if _, ok := x.(float64); ok {
			return "number " + text
		}
		return "date " + text
	}
	return fmt.Sprintf("%v", x)
}

// flowList writes a shape as the spec does, [2, -1], not as Go's [2 -1].
func flowList(shape []int) string {
	parts := make([]string, len(shape))
	for i, d := range shape {
		parts[i] = strconv.Itoa(d)
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

// scalarText is the text a number, boolean or date decoded from YAML was
// written as, near enough to quote back: a float keeps a decimal point.
func scalarText(x any) (string, bool) {
	switch v := x.(type) {
	case int:
		return strconv.Itoa(v), true
	case bool:
		return strconv.FormatBool(v), true
	case float64:
		s := strconv.FormatFloat(v, 'g', -1, 64)
		if !strings.ContainsAny(s, ".eEnN") {
			s += ".0"
		}
		return s, true
	case time.Time:
		if v.Equal(v.Truncate(24*time.Hour)) && v.Location() == time.UTC {
			return v.Format(time.DateOnly), true
		}
		return v.Format(time.RFC3339Nano), true
	}
	return "", false
}

type parseExample struct {
	skip     func(*sample.Sample) bool
	field    string
	keys     []string
	specs    []FeatureSpec
	defaults []any
	want     map[string]int
}

func buildParseExample(env *Env, cfg any) (any, error) {
	c := cfg.(*ParseExampleConfig)
	p := &parseExample{field: c.Field, want: map[string]int{}, skip: env.Skip}
	for i, e := range c.Features.Entries {
		p.keys = append(p.keys, e.Key)
		p.specs = append(p.specs, e.Value)
		var d any
		if e.Value.Default != nil || e.Value.variable() {
			if e.Value.Default == nil {
				e.Value.Default = defaultZero(e.Value.DType)
			}
			v, err := e.Value.defaultValue()
			if err != nil {
				return nil, fmt.Errorf("feature %q: %w", e.Key, err)
			}
			d = v
		}
		p.defaults = append(p.defaults, d)
		p.want[e.Key] = i
	}
	return p, nil
}

func defaultZero(dtype string) any {
	switch dtype {
	case "int64":
		return 0
	case "float32":
		return 0.0
	}
	return ""
}

func (p *parseExample) Process(_ context.Context, s *sample.Sample, emit Emit) error {
	if p.skip != nil && p.skip(s) {
		return emit(s)
	}
	rec, ok := s.Fields[p.field].([]byte)
	if !ok {
		return fmt.Errorf("field %q is %s, not serialized bytes", p.field, expression.ValueWord(s.Fields[p.field]))
	}
	vals := make([]any, len(p.keys))
	var empty []bool
	var featureErr error
	err := example.ParseInto(rec, p.want, func(i int, f *example.Feature) error {
		if f.Kind == example.KindNone {
			vals[i] = nil // a feature with no kind set counts as absent
			if empty == nil {
				empty = make([]bool, len(p.keys))
			}
			empty[i] = true
			return nil
		}
		v, err := convertFeature(p.specs[i], f)
		if err != nil {
			featureErr = fmt.Errorf("feature %q: %w", p.keys[i], err)
			return featureErr
		}
		vals[i] = v
		return nil
	})
	if err != nil && featureErr == nil && !strings.Contains(err.Error(), "not a tf.train.Example") {
		// The bytes are no Example at all (a tfevents file's Event, a
		// CSV): say so, not only which protobuf field was off.
		return fmt.Errorf("the record is not a tf.train.Example (%w); piperun inspect shows what the file holds", err)
	}
	if err != nil {
		return err
	}
	unalias(vals, len(rec))
	out := &sample.Sample{ID: s.ID, Epoch: s.Epoch, Origin: s.Origin, Fields: make(map[string]any, len(p.keys))}
	for i, v := range vals {
		if v == nil {
			// A feature list of a SequenceExample is no absent feature,
			// even where a default (a variable length's empty list) would
			// stand in for one: that would drop every step in silence.
			if example.HasFeatureList(rec, p.keys[i]) { // an empty list too
				return fmt.Errorf("feature %q is a feature list of this tf.train.SequenceExample: parse_example reads its context features only", p.keys[i])
			}
			if p.defaults[i] == nil {
				if empty != nil && empty[i] {
					return fmt.Errorf("feature %q has no value (a Feature with no list set) and no default: give it a default in the spec", p.keys[i])
				}
				return fmt.Errorf("feature %q is missing and has no default: give it a default in the spec", p.keys[i])
			}
			v = p.defaults[i]
		}
		out.Fields[p.keys[i]] = v
	}
	return emit(out)
}

// unalias copies each bytes value in vals out of its record, of recLen
// bytes, unless the value is most of the record by itself. Parsed bytes
// alias the record, and the budget counts a value at its own length: a
// 20-byte file name kept its 380 KB record alive while counted as 20
// bytes (a memory audit saw 680 MiB of RSS under a 64 MiB budget, behind
// a shuffle of them), also beside the image in the same record, which the
// map below decodes and drops (a review). The image itself, most of the
// record, stays an alias: its copy would free little and cost a pass over
// it.
func unalias(vals []any, recLen int) {
	small := func(n int) bool { return n < recLen-recLen/8 }
	for i, v := range vals {
		switch x := v.(type) {
		case []byte:
			if small(len(x)) {
				vals[i] = slices.Clone(x)
			}
		case [][]byte:
			// One buffer for the list's values: a list is one value.
			n := 0
			for _, b := range x {
				n += len(b)
			}
			if !small(n) {
				continue
			}
			buf := make([]byte, 0, n)
			parts := make([][]byte, len(x))
			for j, b := range x {
				buf = append(buf, b...)
				parts[j] = buf[len(buf)-len(b) : len(buf) : len(buf)]
			}
			vals[i] = parts
		}
	}
}

var kindOf = map[string]example.Kind{"int64": example.KindInt64, "float32": example.KindFloat, "bytes": example.KindBytes, "string": example.KindBytes}

// values counts n values in words.
func values(n int) string {
	if n == 1 {
		return "1 value"
	}
	return fmt.Sprintf("%d values", n)
}

func convertFeature(fs FeatureSpec, f *example.Feature) (any, error) {
	if want := kindOf[fs.DType]; f.Kind != want {
		return nil, fmt.Errorf("holds %s values, but the spec says %s", f.Kind, fs.DType)
	}
	n := f.Len()
	switch {
	case len(fs.Shape) == 0:
		if n != 1 {
			return nil, fmt.Errorf("holds %s, but shape [] wants exactly 1", values(n))
		}
	case !fs.variable():
		if want := tensor.NumElements(fs.Shape); n != want {
			return nil, fmt.Errorf("holds %s, but shape %v wants %d", values(n), fs.Shape, want)
		}
	}
	shape := fs.Shape
	if fs.variable() {
		shape = []int{n}
	}
	switch fs.DType {
	case "int64":
		if len(fs.Shape) == 0 {
			return f.Ints[0], nil
		}
		t := tensor.New(tensor.Int64, shape...)
		copy(t.Int64(), f.Ints)
		return t, nil
	case "float32":
		if len(fs.Shape) == 0 {
			return tensor.Float32Decimal(f.Floats[0]), nil
		}
		t := tensor.New(tensor.Float32, shape...)
		copy(t.Float32(), f.Floats)
		return t, nil
	case "bytes":
		if len(fs.Shape) == 0 {
			return f.Bytes[0], nil
		}
		return f.Bytes, nil
	default:
		if len(fs.Shape) == 0 {
			return string(f.Bytes[0]), nil
		}
		out := make([]string, n)
		for i, b := range f.Bytes {
			out[i] = string(b)
		}
		return out, nil
	}
}

// JSONSchemaExtend asks for at least one feature, as Check does.
func (ParseExampleConfig) JSONSchemaExtend(s *jsonschema.Schema) {
	if f, ok := s.Properties.Get("features"); ok {
		f.MinProperties = atLeast(1)
	}
}
